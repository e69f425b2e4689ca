"""A public POSIX conformance suite as a second oracle: pjdfstest (its Rust version, from
crates.io), built by `cargo install` into the build directory the first time it is needed, run
in a directory without the library and in each mode; every test whose outcome differs from the
plain run is a difference.

The suite runs every test case in one process, so a library that crashes on one case (an
invalid path pointer) would end the whole run: a group of cases (`open::...`) that ends by a
signal is run again case by case, and the case that crashes is reported as such."""

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from fsoracle.harness import BUILD, User, Workspace, through_nodes

VERSION = "0.2.2"
INSTALL = BUILD / "fsoracle" / "pjdfstest"
BINARY = INSTALL / "bin" / "pjdfstest"
#: Users the suite switches to (seteuid) as root: three that every Debian system has.
CONFIG = """[features]
posix_fallocate = {}
rename_ctime = {}
utime_now = {}
utimensat = {}

[settings]
naptime = 0.02
allow_remount = false

[dummy_auth]
entries = [["nobody", "nogroup"], ["daemon", "daemon"], ["bin", "bin"]]
"""
RESULT = re.compile(r"^(\S+::\S+)\s+(ok|FAILED|skipped)\s*$")


class SuiteUnavailable(Exception):
    """pjdfstest cannot be built here; the message says why."""


def build() -> Path:
    """The pjdfstest binary, built with cargo the first time (about 70 s on 2 cores)."""
    if BINARY.is_file():
        return BINARY
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).is_file():
        raise SuiteUnavailable(
            "cargo is not installed (pjdfstest is built from crates.io)"
        )
    done = subprocess.run(
        [cargo, "install", "pjdfstest", "--version", VERSION, "--locked", "--root",
         str(INSTALL), "-j", "2"],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not BINARY.is_file():
        raise SuiteUnavailable(
            f"cargo install pjdfstest {VERSION} failed: {done.stderr[-2000:]}"
        )
    return BINARY


def parse(output: str) -> dict[str, str]:
    return {m[1]: m[2] for line in output.splitlines() if (m := RESULT.match(line))}


def run(
    workspace: Workspace,
    mode: str,
    user: User,
    cases: list[str] | None = None,
) -> dict[str, str]:
    """Each test case's outcome (ok, FAILED, skipped, or `signal N` for one that crashed),
    run as `user` in a fresh directory of the mode; `cases`: the names a plain run gave
    (needed to run a crashed group case by case)."""
    directory = workspace.fresh_directory(mode, user, length=44)
    config = directory.with_name(directory.name + ".toml")
    config.write_text(CONFIG)
    config.chmod(0o644)
    as_user: dict[str, Any] = {}
    if user.uid != os.getuid():
        as_user = {"user": user.uid, "group": user.gid, "extra_groups": []}
    env = workspace.environment(mode, user, directory)

    def suite(*patterns: str) -> tuple[int, dict[str, str]]:
        done = subprocess.run(
            [str(build()), "-c", str(config), "-p", str(directory), *patterns],
            capture_output=True, text=True, env=env, cwd=directory, timeout=600, check=False,
            **as_user,
        )  # fmt: skip
        return done.returncode, parse(done.stdout)

    try:
        if cases is None:
            return suite()[1]
        results: dict[str, str] = {}
        for group in sorted({case.split("::")[0] for case in cases}):
            code, found = suite(f"{group}::")
            if code >= 0:
                results.update(found)
                continue
            for case in (c for c in cases if c.startswith(group + "::")):
                code, found = suite(
                    case
                )  # a pattern: this case, and any it is part of the name of
                results[case] = (
                    found.get(case, "absent") if code >= 0 else f"signal {-code}"
                )
        return results
    finally:
        if through_nodes(mode):
            workspace.drain()
        config.unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(
            directory.with_name(directory.name + ".stage"), ignore_errors=True
        )


def differences(
    plain: dict[str, str], other: dict[str, str]
) -> dict[str, tuple[str, str]]:
    """Cases whose outcome differs: name -> (plain, mode)."""
    return {
        name: (plain.get(name, "absent"), other.get(name, "absent"))
        for name in sorted(set(plain) | set(other))
        if plain.get(name) != other.get(name)
    }
