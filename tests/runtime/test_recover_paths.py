"""harmonia-recover run by root on a stage directory other users can write (issue 20, item 3;
docs/security.md, "Paths and fences"): a log replays only what its owner could write, never
through a symbolic link at its target, and a refused log is reported, left in place, and makes
the exit status 1."""

import os
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from bbio_support import RECOVER, preload, run_driver

NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: logs are given to another user with chown"
)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user can reach (pytest's tmp_path is private to root): `stage` and
    `pub` in it are world-writable and sticky, like /tmp; `secret` holds a root-owned 0600
    file."""
    base = Path(tempfile.mkdtemp(prefix="harmonia-recover-"))
    base.chmod(0o755)
    for name in ("stage", "pub"):
        (base / name).mkdir()
        (base / name).chmod(0o1777)
    (base / "secret").mkdir()
    victim = base / "secret" / "victim"
    victim.write_bytes(b"precious")
    victim.chmod(0o600)
    yield base
    shutil.rmtree(base)


def killed_writer(target: Path, stage: Path) -> Path:
    """The log a killed application left in `stage` for 100 bytes of `target`, given to nobody
    as if nobody had run the application."""
    run = run_driver(
        target,
        ["open", "wct", "write", "100", "1", "kill"],
        preload(HARMONIA_STAGE_DIR=str(stage)),
        check=False,
    )
    assert run.returncode == -signal.SIGKILL
    (log,) = stage.iterdir()
    os.chown(log, NOBODY, NOBODY)
    return log


def recover(stage: Path, user: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RECOVER), str(stage)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        user=user,
    )


@pytest.mark.parametrize("link_to", ["victim", "/"])
def test_a_link_at_the_target_is_not_followed(shared: Path, link_to: str) -> None:
    target = shared / "pub" / "out.bin"
    log = killed_writer(target, shared / "stage")
    os.chown(target, NOBODY, NOBODY)  # as if nobody had made it
    # Before the recovery, the log's owner moves its target away and puts a link in its place.
    target.rename(shared / "pub" / "moved.bin")
    victim = shared / "secret" / "victim"
    target.symlink_to(victim if link_to == "victim" else Path("/"))
    result = recover(shared / "stage")
    # Root finds the file by its handle, wherever it went, and never opens the link.
    assert result.returncode == 0, result.stdout + result.stderr
    assert (shared / "pub" / "moved.bin").stat().st_size == 100
    assert victim.read_bytes() == b"precious"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.stat().st_uid == 0
    assert not log.exists()


def test_a_link_at_the_target_is_not_followed_by_name(shared: Path) -> None:
    # The program itself renamed the file into the link's place before the kill: recovery goes
    # by that name, never through a link there.
    target = shared / "pub" / "out.bin"
    run = run_driver(target, ["open", "wct", "write", "100", "1", "rename",
                              str(shared / "pub" / "final.bin"), "kill"],
                     preload(HARMONIA_STAGE_DIR=str(shared / "stage")), check=False)  # fmt: skip
    assert run.returncode == -signal.SIGKILL
    (log,) = (shared / "stage").iterdir()
    os.chown(log, NOBODY, NOBODY)
    (shared / "pub" / "final.bin").unlink()
    (shared / "pub" / "final.bin").symlink_to(shared / "secret" / "victim")
    result = recover(shared / "stage")
    assert (shared / "secret" / "victim").read_bytes() == b"precious"
    assert '"status": "dropped' in result.stdout, result.stdout


def test_a_target_its_owner_may_not_write_is_untouched(shared: Path) -> None:
    (shared / "pub" / "dir").mkdir()
    log = killed_writer(shared / "pub" / "dir" / "victim", shared / "stage")
    # The file, root's (the killed writer ran as root), lies where nobody, the log's owner, may
    # not write it: recovery as nobody is refused.
    (shared / "pub" / "dir" / "victim").chmod(0o600)
    result = recover(shared / "stage")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "refused: uid 65534, the log's owner, may not write" in result.stdout
    assert "refused" in result.stderr
    assert (shared / "pub" / "dir" / "victim").stat().st_size == 0
    assert (shared / "secret" / "victim").read_bytes() == b"precious"
    assert log.exists()


def test_a_log_that_is_a_link_is_refused(shared: Path) -> None:
    elsewhere = shared / "secret" / "log"
    log = killed_writer(shared / "pub" / "out.bin", shared / "stage")
    shutil.move(log, elsewhere)
    log.symlink_to(elsewhere)
    result = recover(shared / "stage")
    assert result.returncode == 1
    assert f"refused: {log} is a symbolic link (never followed)" in result.stdout
    assert (shared / "pub" / "out.bin").stat().st_size == 0


def test_another_users_log_is_replayed_as_that_user(shared: Path) -> None:
    target = shared / "pub" / "out.bin"
    log = killed_writer(target, shared / "stage")
    os.chown(target, NOBODY, NOBODY)  # as if nobody had made it
    result = recover(shared / "stage")
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"status": "replayed"' in result.stdout
    assert target.stat().st_size == 100 and target.stat().st_uid == NOBODY
    assert not log.exists()


def test_a_user_does_not_replay_another_users_log(shared: Path) -> None:
    if not os.access(RECOVER, os.X_OK, effective_ids=False):
        pytest.skip("harmonia-recover is not reachable")
    target = shared / "pub" / "out.bin"
    log = killed_writer(target, shared / "stage")
    # Root's log in a shared directory, readable by all, recovered by nobody.
    os.chown(log, 0, 0)
    log.chmod(0o644)
    result = recover(shared / "stage", user=NOBODY)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "is owned by uid 0, not by this user (uid 65534)" in result.stdout
    assert log.exists() and target.stat().st_size == 0
