"""The node agent under a real Slurm (docs/node-agent.md, "Under Slurm"): `harmonia cluster up`
installs harmonia-node-agent.sh as Prolog, TaskProlog, TaskEpilog and Epilog; a job that asks
(`#BB_LUA jobdw ... node_agent=yes`) gets one harmonia-agentd per node, run as the job's user,
its ranks speak to harmonia-schedd through it, and it is gone after the job. When the agent
cannot start, the ranks speak to harmonia-schedd directly."""

import pwd
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harmonia.slurm import SlurmSettings, pid_alive
from slurm_support import USER, needs_slurm, running, wait
from slurm_support import Cluster as SlurmJobs

pytestmark = needs_slurm
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


class Cluster(SlurmJobs):
    def __init__(self, directory: Path) -> None:
        # Two CPUs a node: a job's two ranks on a node share that node's agent.
        super().__init__(
            SlurmSettings(
                directory, nodes=len(NODES), cpus=2, buffers=1, capacity=256 << 20
            )
        )

    def submit(self, name: str, jobdw: str, body: str) -> str:
        return self.submit_script(
            name,
            "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=2\n"
            f"#SBATCH -o {self.out}/{name}.out\n#BB_LUA jobdw {jobdw}\n{body}",
        )

    def schedd_job(self, key: str) -> dict[str, Any]:
        return next((job for job in self.schedd_jobs() if job["job"] == key), {})

    def agent_dir(self, job: str, node: str) -> Path:
        return self.cluster.agents_dir / f"{job}.{node}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running(Cluster, "harmonia-slurm-agent-test-") as c:
        (c.out / "rank.py").write_text(RANK)
        yield c


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
