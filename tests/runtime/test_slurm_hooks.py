"""The Slurm hooks' job directories against a real ordinary user (made for these tests) who
plants links before the hooks run: `setup`, run as root, makes `<pfs>/.harmonia-jobs/<job>`
beneath the PFS root with no link followed and only under directories no user may write, so no
user gets another directory chowned to them (docs/slurm.md, "Security")."""

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harmonia.slurm_bb import HookError, Hooks

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs root (the hooks run as SlurmUser root) and useradd for a user of its own",
)
REQUEST = json.dumps({"capacity": "1048576", "io": "0", "pool": "harmonia", "priority": 0,
                      "hint": "flushable", "access": "striped", "node_agent": False,
                      "ntasks": 1, "stage_in": {}, "stage_out": {}})  # fmt: skip


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    """An ordinary user of its own, removed afterwards."""
    name = f"hmnbb{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def site() -> Iterator[Path]:
    """A directory every user can pass through, holding the PFS root and the hooks' state."""
    where = Path(tempfile.mkdtemp(prefix="harmonia-bb-hooks-"))
    where.chmod(0o755)
    (where / "pfs").mkdir(mode=0o755)
    (where / "state").mkdir()
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def hooks(site: Path) -> Hooks:
    pfs = site / "pfs"
    return Hooks({"pfs": str(pfs), "jobs": str(pfs / ".harmonia-jobs"),
                  "state": str(site / "state"), "mode": "harmonia"})  # fmt: skip


def as_user(user: pwd.struct_passwd, code: str) -> None:
    """Runs Python `code` as `user` (the attacker's own process, not the hooks')."""
    subprocess.run(["/usr/bin/python3", "-c", code], user=user.pw_uid, group=user.pw_gid,
                   extra_groups=[], check=True, capture_output=True, timeout=30)  # fmt: skip


def setup(site: Path, user: pwd.struct_passwd, job: str = "42") -> None:
    hooks(site).setup(job, str(user.pw_uid), str(user.pw_gid), "harmonia", "1", REQUEST)


def victim(site: Path) -> Path:
    """A root-only directory with a root file: what an attacker wants chowned to them."""
    path = site / "root-only"
    path.mkdir(mode=0o700)
    (path / "secret").write_bytes(b"root's")
    return path


def untouched(path: Path) -> bool:
    info = path.stat()
    return (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o700) and sorted(
        p.name for p in path.iterdir()
    ) == ["secret"]


def test_a_job_directory_is_the_users_under_a_root_only_parent(
    site: Path, user: pwd.struct_passwd
) -> None:
    setup(site, user)
    jobs = site / "pfs" / ".harmonia-jobs"
    info = jobs.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o711)
    space = jobs / "42"
    info = space.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (
        user.pw_uid, user.pw_gid, 0o700
    )  # fmt: skip
    setup(site, user)  # again, as after a slurmctld restart: the same directory
    assert space.stat().st_uid == user.pw_uid


def test_a_planted_jobs_link_is_refused(site: Path, user: pwd.struct_passwd) -> None:
    """A PFS root users may write (sticky, as /tmp): the user makes .harmonia-jobs a link to a
    root-only directory before any job ran."""
    target = victim(site)
    (site / "pfs").chmod(0o1777)
    as_user(
        user,
        f"import os; os.symlink({str(target)!r}, {str(site / 'pfs' / '.harmonia-jobs')!r})",
    )
    with pytest.raises(HookError, match=r"\.harmonia-jobs: is a symbolic link"):
        setup(site, user)
    assert untouched(target)


def test_a_planted_job_link_in_a_users_jobs_directory_is_refused(
    site: Path, user: pwd.struct_passwd
) -> None:
    """The user makes .harmonia-jobs a directory of their own and JOB in it a link to a
    root-only directory (the hook used to chown the link's target to them)."""
    target = victim(site)
    (site / "pfs").chmod(0o1777)
    jobs = site / "pfs" / ".harmonia-jobs"
    as_user(user, f"import os; os.mkdir({str(jobs)!r}, 0o777); os.chmod({str(jobs)!r}, 0o777); "
                  f"os.symlink({str(target)!r}, {str(jobs / '42')!r})")  # fmt: skip
    with pytest.raises(
        HookError, match=rf"\.harmonia-jobs: owned by uid {user.pw_uid}"
    ):
        setup(site, user)
    assert untouched(target)


def test_a_pfs_root_anyone_may_rename_in_is_refused(
    site: Path, user: pwd.struct_passwd
) -> None:
    """Without the sticky bit any user could rename .harmonia-jobs away and put their own."""
    (site / "pfs").chmod(0o777)
    with pytest.raises(HookError, match="writable by others .* without the sticky bit"):
        setup(site, user)
    assert not (site / "pfs" / ".harmonia-jobs").exists()


def test_another_users_leftover_job_directory_is_not_handed_over(
    site: Path, user: pwd.struct_passwd
) -> None:
    """A job id used again (a reinstalled controller) finds the kept files of another user: they
    are not chowned to the new job's user."""
    setup(site, user, job="7")
    (site / "pfs" / ".harmonia-jobs" / "7" / "result").write_bytes(b"theirs")
    other = pwd.getpwnam("nobody")
    with pytest.raises(HookError, match=f"holds uid {user.pw_uid}'s files"):
        hooks(site).setup(
            "7", str(other.pw_uid), str(other.pw_gid), "harmonia", "1", REQUEST
        )
    assert (site / "pfs" / ".harmonia-jobs" / "7").stat().st_uid == user.pw_uid
