"""`harmonia up`: the scheduler and buffer nodes on one machine, jobs writing through them, and a
Ctrl-C that leaves every file complete on the PFS."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from buffers_support import BBD, needs
from harmonia.buffers.cluster import (
    BufferCluster,
    ClusterSettings,
    JobSpec,
    open_run_directory,
    run_jobs,
    verify,
)

pytestmark = needs(BBD)

HARMONIA = Path(sys.executable).with_name("harmonia")


def wait_started(up: subprocess.Popen[str], directory: Path) -> None:
    """Until `harmonia up` wrote its env.sh (it runs), failing if it exits or takes 30 s."""
    deadline = time.monotonic() + 30
    while not (directory / "env.sh").exists():
        assert up.poll() is None, up.communicate()
        assert time.monotonic() < deadline, "harmonia up did not start"
        time.sleep(0.1)


def test_up_runs_jobs_and_ctrl_c_drains_what_the_nodes_hold(tmp_path: Path) -> None:
    up = subprocess.Popen(
        [str(HARMONIA), "up", "--buffers", "2", "--dir", str(tmp_path), "--capacity", "256 MiB",
         "--flush-threshold", "1", "--sync", "data", "--every", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    spec = JobSpec(ranks=2, steps=8, requests=2, size=1 << 20, compute=0.4)
    job = None
    try:
        wait_started(up, tmp_path)
        exported = (tmp_path / "env.sh").read_text()
        assert f"HARMONIA_BUFFER_ROOT={tmp_path / 'pfs'}" in exported
        # The environment `harmonia up` printed is the one a cluster on that directory gives.
        job = threading.Thread(
            target=run_jobs, args=(BufferCluster(ClusterSettings(tmp_path)), 1, spec)
        )
        job.start()
        # Threshold 1 and a job still running: its finished phases wait on the nodes.
        deadline = time.monotonic() + 30
        while not any(any((tmp_path / f"bb{k}").glob("*.bblog")) for k in range(2)):
            assert time.monotonic() < deadline, "no data reached the nodes"
            time.sleep(0.05)
    finally:
        up.send_signal(signal.SIGINT)
        out, err = up.communicate(timeout=60)
        if job is not None:
            job.join()  # it writes the rest through to the PFS
    assert up.returncode == 0, err
    assert "harmonia up: draining the nodes" in out and "harmonia up: stopped" in out
    assert "bb0" in out and "held" in out, "status lines"
    assert not any(any((tmp_path / f"bb{k}").glob("*.bblog")) for k in range(2))
    assert verify(tmp_path / "pfs", 1, spec) == []


def test_up_restarts_daemons_that_die_and_shows_them(tmp_path: Path) -> None:
    up = subprocess.Popen(
        [str(HARMONIA), "up", "--buffers", "2", "--dir", str(tmp_path), "--capacity", "64 MiB",
         "--every", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_started(up, tmp_path)
        for pid_file in ("bb1.pid", "schedd.pid"):
            old = int((tmp_path / pid_file).read_text())
            os.kill(old, signal.SIGKILL)
            deadline = time.monotonic() + 20
            while int((tmp_path / pid_file).read_text()) == old:
                assert up.poll() is None, up.communicate()
                assert time.monotonic() < deadline, f"{pid_file}: not restarted"
                time.sleep(0.1)
            os.kill(int((tmp_path / pid_file).read_text()), 0)  # the new one runs
        time.sleep(1.0)  # status lines of the revived cluster
    finally:
        up.send_signal(signal.SIGINT)
        out, err = up.communicate(timeout=60)
    assert up.returncode == 0, err
    assert "harmonia-bbd 1 had exited (killed by signal 9); restarted" in out
    assert "harmonia-schedd had exited (killed by signal 9); restarted" in out
    last_status = [line for line in out.splitlines() if "| bb0" in line][-1]
    assert "DEAD" not in last_status and "DOWN" not in last_status, out
    assert "harmonia up: stopped" in out


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        (["--policy", "nope"], "--policy nope"),
        (["--capacity", "lots"], "--capacity"),
        (["--buffers", "2", "--backup-flushers", "2"], "--backup-flushers 2"),
        (["--sync", "always"], "--sync always"),
    ],
)
def test_up_refuses_bad_settings(
    tmp_path: Path, argument: list[str], message: str
) -> None:
    done = subprocess.run(
        [str(HARMONIA), "up", "--dir", str(tmp_path), *argument],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "env.sh").exists()


def test_a_run_directory_up_makes_is_open_to_users_whatever_the_umask(
    tmp_path: Path,
) -> None:
    """Users reach pfs/, the scheduler's socket and env.sh through the run directory: one
    `harmonia up` makes is 0755 even under umask 077 (an admin's shell), not 0700."""
    before = os.umask(0o077)
    try:
        fd = open_run_directory(tmp_path / "run")
    finally:
        os.umask(before)
    try:
        assert os.fstat(fd).st_mode & 0o777 == 0o755
    finally:
        os.close(fd)
