"""A Slurm cluster as an admin lives with it (docs/slurm.md): `harmonia cluster up --accounting`
runs slurmdbd on a MariaDB of its own, so sacct shows a finished job and its burst-buffer TRES;
a DataWarp (#DW) script runs with buffers; the supervisor restarts a killed slurmd or
slurmctld and drains a node whose slurmd cannot start, `harmonia cluster restart` brings it
back, and `down` leaves no process behind, a slurmd restarted by hand and a running job's
included. One cluster, the tests in order."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harmonia.slurm import SlurmClusterError, SlurmSettings, pid_alive
from slurm_support import GROUP, USER, needs_slurm, wait
from slurm_support import Cluster as SlurmJobs

pytestmark = [
    needs_slurm,
    pytest.mark.skipif(
        shutil.which("mariadbd") is None or shutil.which("slurmdbd") is None,
        reason="--accounting needs mariadb-server and slurmdbd (scripts/install-deps.sh)",
    ),
]


class Cluster(SlurmJobs):
    def harmonia(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`harmonia cluster ARGS --dir DIR`, as an admin types it."""
        return subprocess.run(
            [sys.executable, "-m", "harmonia", "cluster", *args, "--dir", str(self.dir)],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip

    def pids(self) -> dict[str, int]:
        pids: dict[str, int] = json.loads((self.dir / "cluster.json").read_text())[
            "pids"
        ]
        return pids

    def sacct(self, job: str, *fields: str) -> dict[str, str]:
        done = subprocess.run(
            ["sacct", "-a", "-X", "-n", "-P", "-j", job, "-o", ",".join(fields)],
            capture_output=True, text=True, env=self.env, timeout=30, check=True,
        )  # fmt: skip
        line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        return dict(zip(fields, line.split("|"), strict=False))

    def job(self, name: str, body: str, node: str = "hn0") -> str:
        return self.submit_script(
            name,
            f"#!/bin/bash\n#SBATCH -o {self.out}/{name}.out\n#SBATCH -w {node}\n{body}",
        )


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    directory = Path(tempfile.mkdtemp(prefix="harmonia-slurm-admin-test-"))
    directory.chmod(0o755)
    c = Cluster(SlurmSettings(directory, nodes=2, buffers=1, capacity=256 << 20,
                              accounting=True))  # fmt: skip
    try:
        try:
            c.cluster.up(progress=lambda _line: None)
        except SlurmClusterError as error:
            pytest.fail(f"harmonia cluster up --accounting: {error}")
        c.out.mkdir()
        shutil.chown(c.out, USER, GROUP)
        (c.cluster.pfs / "results").mkdir()
        shutil.chown(c.cluster.pfs / "results", USER, GROUP)
        yield c
    finally:
        c.cluster.down(progress=lambda _line: None)
        shutil.rmtree(directory, ignore_errors=True)


def test_a_datawarp_job_runs_with_buffers_and_sacct_shows_its_tres(
    cluster: Cluster,
) -> None:
    """A script written for DataWarp: #DW jobdw, stage_in, stage_out and $DW_JOB_STRIPED."""
    source = cluster.cluster.pfs / "mesh.dat"
    data = os.urandom(300_000)
    source.write_bytes(data)
    source.chmod(0o644)
    destination = cluster.cluster.pfs / "results" / "mesh-copy.dat"
    job = cluster.job(
        "dw",
        "#DW jobdw type=scratch access_mode=striped capacity=64MiB\n"
        f"#DW stage_in type=file source={source} destination=$DW_JOB_STRIPED/mesh.dat\n"
        f"#DW stage_out type=file source=$DW_JOB_STRIPED/copy.dat destination={destination}\n"
        'echo "buffers at $DW_JOB_STRIPED, LD_PRELOAD=$LD_PRELOAD"\n'
        "/usr/bin/python3 -c \"import os; d = os.environ['DW_JOB_STRIPED']; "
        "fd = os.open(d + '/copy.dat', os.O_WRONLY | os.O_CREAT, 0o644); "
        "os.write(fd, open(d + '/mesh.dat', 'rb').read()); os.close(fd)\"\n",
    )
    wait(
        lambda: cluster.sacct(job, "State").get("State") == "COMPLETED",
        "sacct COMPLETED",
    )
    wait(lambda: destination.exists(), "the stage-out")
    assert destination.read_bytes() == data
    output = (cluster.out / "dw.out").read_text()
    assert f"buffers at {cluster.cluster.pfs}/.harmonia-jobs/{job}," in output
    assert "libharmonia.so" in output
    record = cluster.sacct(job, "AllocTRES", "SystemComment")
    assert "bb/lua=64M" in record["AllocTRES"].split(","), record
    assert record["SystemComment"] == ""


def test_a_killed_slurmd_is_restarted_and_its_job_ends(cluster: Cluster) -> None:
    release = cluster.out / "release-slurmd"
    job = cluster.job(
        "slurmd", f"while [ ! -e {release} ]; do sleep 0.2; done\necho ended\n"
    )
    wait(lambda: cluster.job_state(job) == "RUNNING", "the job to run")
    killed = cluster.pids()["slurmd-hn0"]
    os.kill(killed, signal.SIGKILL)
    wait(lambda: cluster.pids()["slurmd-hn0"] != killed, "the supervisor's restart", 30)
    assert pid_alive(cluster.pids()["slurmd-hn0"])
    release.touch()
    wait(
        lambda: cluster.sacct(job, "State").get("State") == "COMPLETED",
        "sacct COMPLETED",
    )
    assert (
        "slurmd-hn0 was not running; started again"
        in (cluster.dir / "log" / "supervisor.log").read_text()
    )
    assert cluster.harmonia("status").returncode == 0


def test_a_slurmd_that_cannot_start_drains_its_node_until_restart(
    cluster: Cluster,
) -> None:
    """slurmd hn1 is killed and its port taken: the supervisor's restarts fail, it drains hn1
    with the reason; once the port is free, `harmonia cluster restart hn1` resumes it."""
    supervisor = cluster.pids()["supervisor"]
    port = json.loads((cluster.dir / "cluster.json").read_text())["node_ports"][1]
    os.kill(supervisor, signal.SIGSTOP)  # so that the port is taken before it looks
    try:
        os.kill(cluster.pids()["slurmd-hn1"], signal.SIGKILL)
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            wait(lambda: _bound(taken, port), f"port {port} to be free")
            taken.listen()
            os.kill(supervisor, signal.SIGCONT)
            wait(
                lambda: "DRAIN" in cluster.scontrol("show", "node", "hn1", "-o"),
                "hn1 drained",
            )
    finally:
        os.kill(supervisor, signal.SIGCONT)
    node = cluster.scontrol("show", "node", "hn1", "-o")
    assert "Reason=harmonia cluster: slurmd exited and did not restart" in node
    assert "Address already in use" in node
    status = cluster.harmonia("status")
    assert status.returncode == 1 and "slurmd-hn1     pid" in status.stdout
    restarted = cluster.harmonia("restart", "hn1")
    assert restarted.returncode == 0, restarted.stderr
    assert "hn1: resumed" in restarted.stdout
    wait(
        lambda: "DRAIN" not in cluster.scontrol("show", "node", "hn1", "-o"),
        "hn1 resumed",
    )
    assert cluster.harmonia("status").returncode == 0


def test_a_killed_slurmctld_is_restarted_and_jobs_end(cluster: Cluster) -> None:
    """SIGKILL gives slurmctld no time to save its state, and it saves a job's start only
    with a later change (another job, here, which ends before the kill, and a change of the
    running job's comment after that): the kill comes after that save, as on a cluster where
    jobs come and go. (Killed before it, Slurm recovers a started job as pending and requeues
    it held: docs/slurm.md.)"""
    release = cluster.out / "release-ctld"
    state = cluster.dir / "state" / "job_state"
    job = cluster.job("ctld", f"while [ ! -e {release} ]; do sleep 0.2; done\n")
    wait(lambda: cluster.job_state(job) == "RUNNING", "the job to run")
    other = cluster.job("other", "true\n", node="hn1")
    wait(lambda: cluster.sacct(other, "State").get("State") == "COMPLETED",
         f"job {other} COMPLETED in sacct before the kill")  # fmt: skip
    saved = state.stat().st_mtime
    cluster.scontrol("update", f"JobId={job}", "Comment=saved")
    wait(lambda: state.stat().st_mtime > saved, "slurmctld to save its jobs")
    killed = cluster.pids()["slurmctld"]
    os.kill(killed, signal.SIGKILL)
    wait(lambda: cluster.pids()["slurmctld"] != killed, "the supervisor's restart", 30)
    release.touch()
    for ended in (job, other):
        wait(lambda ended=ended: cluster.sacct(ended, "State").get("State") == "COMPLETED",
             f"job {ended} COMPLETED in sacct")  # fmt: skip


def test_down_leaves_no_process_behind(cluster: Cluster) -> None:
    """A slurmd an admin restarted by hand (SLURM_CONF set, no --dir on its command line) while
    a job runs, whose slurmstepd outlived the slurmd killed before: `down` stops them all."""
    supervisor = cluster.pids()["supervisor"]
    os.kill(supervisor, signal.SIGSTOP)
    try:
        job = cluster.job("held", "sleep 300\n")
        wait(lambda: cluster.job_state(job) == "RUNNING", "the job to run")
        # RUNNING comes when slurmctld sends the launch: wait for the job's own process too.
        wait(lambda: "sleep" in cluster.cluster.leftovers().values(), "the job's sleep")
        os.kill(cluster.pids()["slurmd-hn0"], signal.SIGKILL)
        by_hand = subprocess.Popen(
            ["slurmd", "-D", "-N", "hn0"], env={**os.environ, "SLURM_CONF": str(cluster.cluster.conf)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        wait(lambda: (cluster.dir / "run" / "slurmd-hn0.pid").read_text().strip()
             == str(by_hand.pid), "the slurmd started by hand")  # fmt: skip
    finally:
        os.kill(supervisor, signal.SIGCONT)
    status = cluster.harmonia("status")
    assert f"slurmd-hn0     pid {by_hand.pid}" in status.stdout
    assert "restarted outside harmonia cluster" in status.stdout
    before = cluster.cluster.leftovers()
    assert (
        by_hand.pid in before
        and "slurmstepd" in before.values()
        and "sleep" in before.values()
    )
    done = cluster.harmonia("down")
    assert done.returncode == 0, done.stderr
    assert f"stopped slurmd-hn0 (pid {by_hand.pid})" in done.stdout
    by_hand.wait(timeout=10)
    assert cluster.cluster.leftovers() == {}
    assert not any(pid_alive(pid) for pid in before)


def _bound(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True
