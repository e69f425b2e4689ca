"""Users of the tests' own, for the tests that act as other users (docs/security.md): made with
useradd, removed afterwards; why a machine cannot make them; and how to run a program as one."""

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


def why_no_users(*tools: str) -> str:
    """Why this machine cannot make users and act as them (and run `tools`); "" when it can."""
    if os.geteuid() != 0:
        return "making users and acting as them needs root"
    for tool in ("useradd", "userdel", "setpriv", *tools):
        if shutil.which(tool) is None:
            return (
                f"{tool} is not installed (Debian: passwd, util-linux, munge, iproute2)"
            )
    return ""


@contextmanager
def made_users(*roles: str) -> Iterator[dict[str, pwd.struct_passwd]]:
    """A new user for each role (named hmn<role><pid>: no home, no login shell), by role;
    removed afterwards."""
    made = []
    try:
        for role in roles:
            name = f"hmn{role}{os.getpid() % 100000}"
            subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                           check=True, capture_output=True)  # fmt: skip
            made.append(name)
        yield {role: pwd.getpwnam(name) for role, name in zip(roles, made, strict=True)}
    finally:
        for name in made:
            subprocess.run(["userdel", name], check=False, capture_output=True)


def run_as(user: pwd.struct_passwd) -> list[str]:
    """The start of a command line that runs what follows as `user`: its uid and primary
    group, no other group (setpriv keeps the environment; it works inside `ip netns exec`)."""
    return [
        "setpriv",
        f"--reuid={user.pw_uid}",
        f"--regid={user.pw_gid}",
        "--clear-groups",
    ]
