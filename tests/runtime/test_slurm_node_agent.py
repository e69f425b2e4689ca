"""The node agent under a real Slurm (docs/node-agent.md, "Under Slurm"): `harmonia cluster up`
installs harmonia-node-agent.sh as Prolog, TaskProlog, TaskEpilog and Epilog; a job that asks
(`#BB_LUA jobdw ... node_agent=yes`) gets one harmonia-agentd per node, run as the job's user,
its ranks speak to harmonia-schedd through it, and it is gone after the job. When the agent
cannot start, the ranks speak to harmonia-schedd directly."""

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harmonia.slurm import SlurmCluster, SlurmClusterError, SlurmSettings, pid_alive

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or shutil.which("slurmctld") is None
    or shutil.which("munged") is None,
    reason="needs root (sbatch --uid for a job user, munged) and slurmctld, slurmd, munge "
    "(scripts/install-deps.sh installs them)",
)
USER, GROUP = "nobody", "nogroup"
NODES = ("hn0", "hn1")

# A rank: writes 64 KiB to its own file in the job's buffer space every 50 ms (one write phase)
# until the test creates the file argv[1], and says which agent it was given.
RANK = """import os, sys, time
rank = os.environ["SLURM_PROCID"]
fd = os.open(os.path.join(os.environ["HARMONIA_BB"], "rank%s.dat" % rank),
             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
while not os.path.exists(sys.argv[1]):
    os.write(fd, rank.encode() * (64 << 10))
    time.sleep(0.05)
os.close(fd)
print("rank", rank, "on", os.environ["SLURMD_NODENAME"], "agent",
      os.environ.get("HARMONIA_AGENT", "-"), flush=True)
"""


class Cluster:
    def __init__(self, directory: Path) -> None:
        # Two CPUs a node: a job's two ranks on a node share that node's agent.
        self.cluster = SlurmCluster(
            SlurmSettings(
                directory, nodes=len(NODES), cpus=2, buffers=1, capacity=256 << 20
            )
        )
        self.dir = directory
        self.env = {**os.environ, **self.cluster.env()}
        self.out = directory / "out"

    @property
    def hooks(self) -> dict[str, Any]:
        """What `up` wrote for the burst-buffer hooks: the scheduler's socket and tools."""
        hooks: dict[str, Any] = json.loads(
            (self.dir / "etc" / "harmonia-bb.json").read_text()
        )
        return hooks

    def submit(self, name: str, jobdw: str, body: str) -> str:
        script = self.dir / f"{name}.sh"
        script.write_text(
            "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=2\n"
            f"#SBATCH -o {self.out}/{name}.out\n#BB_LUA jobdw {jobdw}\n{body}"
        )
        done = subprocess.run(
            ["sbatch", "--parsable", f"--uid={USER}", f"--gid={GROUP}", str(script)],
            capture_output=True, text=True, env=self.env, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def job_state(self, job: str) -> str:
        text = subprocess.run(
            ["scontrol", "show", "job", job, "-o"], capture_output=True, text=True,
            env=self.env, timeout=60, check=True,
        ).stdout  # fmt: skip
        return text.split("JobState=", 1)[1].split()[0]

    def schedd_job(self, key: str) -> dict[str, Any]:
        done = subprocess.run(
            [self.hooks["schedctl"], "--address", self.hooks["schedd"], "status", "--compact"],
            capture_output=True, text=True, check=True, timeout=20,
        )  # fmt: skip
        for entry in json.loads(done.stdout).get("jobs", []):
            if entry["job"] == key:
                return dict(entry)
        return {}

    def agent_dir(self, job: str, node: str) -> Path:
        return self.cluster.agents_dir / f"{job}.{node}"

    def cancel_all(self) -> None:
        """Cancels what a failed test left running and waits (at most 30 s) until Slurm has
        ended it: slurmstepd, the ranks and the agents outlive slurmd, the Epilog would not."""
        subprocess.run(["scancel", "-u", USER], env=self.env, timeout=30, check=False,
                       capture_output=True)  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            queue = subprocess.run(["squeue", "-h"], env=self.env, timeout=30, check=False,
                                   capture_output=True, text=True)  # fmt: skip
            if queue.returncode == 0 and not queue.stdout.strip():
                return
            time.sleep(0.3)


def wait(ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER} to run jobs as")
    # Not pytest's tmp_path: the job's user must reach the PFS and the munge socket.
    directory = Path(tempfile.mkdtemp(prefix="harmonia-slurm-agent-test-"))
    directory.chmod(0o755)
    c = Cluster(directory)
    try:
        c.cluster.up(progress=lambda _line: None)
    except SlurmClusterError as error:
        c.cluster.down(progress=lambda _line: None)
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(f"harmonia cluster up: {error}")
    c.out.mkdir()
    shutil.chown(c.out, USER, GROUP)
    (c.out / "rank.py").write_text(RANK)
    try:
        yield c
    finally:
        c.cancel_all()
        c.cluster.down(progress=lambda _line: None)
        shutil.rmtree(directory, ignore_errors=True)


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])  # the real uid
    raise AssertionError(f"no Uid line for pid {pid}")


def test_each_node_gets_an_agent_its_ranks_speak_through_and_it_ends_with_the_job(
    cluster: Cluster,
) -> None:
    release, stepped, end = (
        cluster.out / f"{n}-agents" for n in ("release", "step", "end")
    )
    job = cluster.submit(
        "agents",
        "io=16M node_agent=yes",
        # Without its task list the batch step's TaskEpilog leaves its agent: the Epilog's.
        'rm "$(dirname "$HARMONIA_AGENT")/batch.tasks"\n'
        f"srun /usr/bin/python3 {cluster.out}/rank.py {release}\n"
        f"touch {stepped}\n"
        f"while [ ! -e {end} ]; do sleep 0.1; done\n",
    )
    # The srun step's four ranks, two on each node: the scheduler sees two connections (one per
    # node's agent) where it would see four, both in the phase.
    key = f"slurm-{job}.0"
    wait(lambda: cluster.schedd_job(key).get("in_phase") == 2, f"{key} in its phase")
    seen = cluster.schedd_job(key)
    assert (seen["processes"], seen["ranks"]) == (2, 4), seen
    nobody = pwd.getpwnam(USER)
    step_agents = []
    for node in NODES:
        where = cluster.agent_dir(job, node)
        info = where.stat()
        # Only the job's user reaches the agent's socket.
        assert (info.st_uid, info.st_mode & 0o777) == (nobody.pw_uid, 0o700), where
        assert (where / "0.sock").is_socket()
        pid = int((where / "0.pid").read_text())
        assert (
            pid_alive(pid) and _uid_of(pid) == nobody.pw_uid
        )  # the user's, never root's
        command = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        )
        assert f"--socket {where}/0.sock" in command, command
        step_agents.append(pid)
    batch_agent = int((cluster.agent_dir(job, "hn0") / "batch.pid").read_text())
    assert pid_alive(batch_agent)
    # The step's last task on each node stops its agent (TaskEpilog), while the job goes on.
    release.touch()
    wait(stepped.exists, "the end of the job's step")
    wait(
        lambda: not any(pid_alive(pid) for pid in step_agents),
        "the step's agents to stop",
    )
    assert cluster.job_state(job) == "RUNNING" and pid_alive(batch_agent)
    end.touch()
    wait(lambda: cluster.job_state(job) == "COMPLETED", f"job {job} COMPLETED")
    # The Epilog ran on both nodes: the agent left is stopped by its PID, the directories gone.
    wait(
        lambda: not any(cluster.agent_dir(job, n).exists() for n in NODES), "the Epilog"
    )
    assert not pid_alive(batch_agent)
    log = (cluster.cluster.agents_dir / "node-agent.log").read_text()
    assert (
        f"job {job} on hn0: epilog: stopped harmonia-agentd pid {batch_agent}" in log
    ), log
    output = (cluster.out / "agents.out").read_text()
    for rank in range(4):
        node = NODES[rank // 2]
        assert (
            f"rank {rank} on {node} agent {cluster.agent_dir(job, node)}/0.sock"
            in output
        ), output
    assert "refused" not in output and "directly" not in output, output
    assert cluster.schedd_job(key) == {}


def test_a_node_whose_agent_cannot_start_speaks_to_the_scheduler_directly(
    cluster: Cluster,
) -> None:
    release = cluster.out / "release-direct"
    # The job asks for agents through its environment, for its step only (the batch step has
    # none), and takes write access to its agents' directory on the batch node (hn0) away
    # first: the step's agent there cannot start; hn1's can.
    job = cluster.submit(
        "direct",
        "io=16M",
        f'chmod 0500 "{cluster.cluster.agents_dir}/$SLURM_JOB_ID.$SLURMD_NODENAME"\n'
        "export HARMONIA_NODE_AGENT=1\n"
        f"srun /usr/bin/python3 {cluster.out}/rank.py {release}\n",
    )
    key = f"slurm-{job}.0"
    # hn0's two ranks on a connection each, hn1's two through their agent: three, all in phase.
    wait(lambda: cluster.schedd_job(key).get("in_phase") == 3, f"{key} in its phase")
    assert cluster.schedd_job(key)["processes"] == 3
    agent = int((cluster.agent_dir(job, "hn1") / "0.pid").read_text())
    assert not any(
        (cluster.agent_dir(job, "hn0") / f"{s}.pid").exists() for s in (0, "batch")
    )
    release.touch()
    wait(lambda: cluster.job_state(job) == "COMPLETED", f"job {job} COMPLETED")
    wait(
        lambda: not any(cluster.agent_dir(job, n).exists() for n in NODES), "the Epilog"
    )
    assert not pid_alive(agent)
    output = (cluster.out / "direct.out").read_text()
    assert output.count("harmonia: no node agent on hn0: ") == 2, output
    assert "speaking to harmonia-schedd directly" in output and "on hn1:" not in output
    for rank in (0, 1):
        assert f"rank {rank} on hn0 agent -" in output, output
    for rank in (2, 3):
        assert (
            f"rank {rank} on hn1 agent {cluster.agent_dir(job, 'hn1')}/0.sock" in output
        )
