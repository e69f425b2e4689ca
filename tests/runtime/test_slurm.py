"""Harmonia under a real Slurm (docs/slurm.md): `harmonia cluster` starts munged, slurmctld, two
slurmd and the buffer nodes; jobs ask for buffers with #BB_LUA directives and run as `nobody`
(Slurm's burst_buffer plugins refuse root's jobs)."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harmonia.slurm import SlurmCluster, SlurmClusterError, SlurmSettings, pid_alive
from slurm_support import GROUP, USER, needs_slurm, running, wait
from slurm_support import Cluster as SlurmJobs

pytestmark = needs_slurm
BLOCK = 1 << 20


class Cluster(SlurmJobs):
    def __init__(self, directory: Path, **settings: Any) -> None:
        defaults: dict[str, Any] = {"nodes": 2, "buffers": 2, "capacity": 256 << 20}
        super().__init__(SlurmSettings(directory, **(defaults | settings)))
        self.pfs = self.cluster.pfs

    def script(self, body: str, name: str) -> str:
        """A one-task job running `body`, its output in `out`/`name`.out."""
        return f"#!/bin/bash\n#SBATCH -n 1\n#SBATCH -o {self.out}/{name}.out\n{body}"

    def sbatch(self, body: str, name: str) -> subprocess.CompletedProcess[str]:
        return self.sbatch_script(name, self.script(body, name))

    def submit(self, body: str, name: str) -> str:
        return self.submit_script(name, self.script(body, name))

    def submit_stage_out_to_root_only(self, name: str) -> str:
        """A job writing `name`.dat and staging it out into a directory its user may not
        write (`pfs`/root-only): the stage-out fails with Permission denied."""
        closed = self.pfs / "root-only"
        closed.mkdir(mode=0o755, exist_ok=True)
        return self.submit(
            "#BB_LUA jobdw pool=harmonia capacity=16M\n"
            f"#BB_LUA stage_out source=$HARMONIA_BB/{name}.dat destination={closed}/{name}.dat\n"
            + WRITER.format(name=name, blocks=1, block=BLOCK),
            name,
        )

    def torn_down(self, job: str) -> bool:
        """Teardown ran: the hooks' state for the job is gone."""
        return (
            not (self.dir / "jobs" / f"{job}.json").exists()
            and (self.dir / "jobs" / f"{job}.log").exists()
        )

    def nodes(self) -> list[dict[str, int]]:
        bbctl = self.hooks["bbctl"]
        out = []
        for port in sorted(self.cluster.buffers_dir.glob("bb*.port")):
            done = subprocess.run(
                [bbctl, "--node", f"127.0.0.1:{port.read_text().strip()}", "status"],
                capture_output=True, text=True, check=True, timeout=20,
            )  # fmt: skip
            out.append({k: int(v) for k, v in json.loads(done.stdout).items()
                        if k in ("used", "received_bytes", "drained_bytes")})  # fmt: skip
        return out


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with running(Cluster, "harmonia-slurm-test-") as c:
        (c.pfs / "results").mkdir()
        shutil.chown(c.pfs / "results", USER, GROUP)
        yield c


# A job step writing `blocks` MiB through libharmonia (a plain descriptor: libharmonia leaves
# descriptors 0-2 to plain I/O), each block tagged with the job's name and its index.
WRITER = """
/usr/bin/python3 - <<'PY'
import os
path = os.path.join(os.environ["HARMONIA_BB"], "{name}.dat")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range({blocks}):
    os.write(fd, ("{name}:%d;" % i).encode().ljust({block}, b"."))
os.close(fd)
print("written", {blocks} * {block}, "bytes to", path, flush=True)
PY
"""


def expected(name: str, blocks: int) -> bytes:
    return b"".join(f"{name}:{i};".encode().ljust(BLOCK, b".") for i in range(blocks))


def test_stage_in_and_out_go_through_the_buffer_nodes(cluster: Cluster) -> None:
    source = cluster.pfs / "input.dat"
    data = os.urandom(3 * BLOCK + 12345)
    source.write_bytes(data)
    source.chmod(0o644)
    before = sum(n["received_bytes"] for n in cluster.nodes())
    destination = cluster.pfs / "results" / "doubled.dat"
    job = cluster.submit(
        "#BB_LUA jobdw pool=harmonia capacity=64M priority=3 hint=flushable\n"
        f"#BB_LUA stage_in source={source} destination=$HARMONIA_BB/in/input.dat\n"
        f"#BB_LUA stage_out source=$HARMONIA_BB/doubled.dat destination={destination}\n"
        'echo "LD_PRELOAD=$LD_PRELOAD HARMONIA_PRIORITY=$HARMONIA_PRIORITY"\n'
        "/usr/bin/python3 - <<'PY'\n"
        "import os\n"
        "bb = os.environ['HARMONIA_BB']\n"
        "data = open(bb + '/in/input.dat', 'rb').read()\n"
        "fd = os.open(bb + '/doubled.dat', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
        "os.write(fd, data)\n"
        "os.write(fd, data)\n"
        "os.close(fd)\n"
        "print('wrote', 2 * len(data), flush=True)\n"
        "PY\n"
        "scontrol show bbstat\n",
        "stage",
    )
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    wait(lambda: cluster.job_state(job) == "COMPLETED", "job state COMPLETED")
    assert destination.read_bytes() == data + data
    output = (cluster.out / "stage.out").read_text()
    assert "libharmonia.so" in output and "HARMONIA_PRIORITY=3" in output
    assert f"wrote {2 * len(data)}" in output
    assert "Harmonia pool harmonia" in output  # bbstat from inside the job
    # Stage-in and the job's writes both reached the nodes, and all of it has drained.
    nodes = cluster.nodes()
    assert sum(n["received_bytes"] for n in nodes) - before >= 3 * len(data)
    assert all(n["used"] == 0 for n in nodes)
    assert not (cluster.pfs / ".harmonia-jobs" / job).exists()
    burst = cluster.scontrol("show", "burst")
    assert "PoolName[0]=harmonia" in burst and "UsedSpace=0" in burst


@pytest.mark.parametrize(
    ("directive", "named"),
    [
        ("#BB_LUA jobdw pool=harmonia capacity=16M colour=blue", "unknown key 'colour'"),
        ("#BB_LUA jobdw pool=harmonia capacity=-5G", "capacity=-5G: must not be negative"),
        ("#BB_LUA jobdw pool=harmonia capacity=4G", "capacity=4G: more than"),
        # Slurm's own check would say only "Burst Buffer request invalid" to these three.
        ("#BB_LUA jobdw pool=harmonia capacity=0", "capacity=0: must be more than 0 bytes"),
        ("#BB_LUA jobdw pool=other capacity=16M", "pool=other: expected pool=harmonia"),
        ("#BB_LUA jobdw pool=harmonia capacity=16777217T", "capacity=16777217T: too large"),
        ("#DW jobdw type=scratch access_mode=striped capacity=0", "capacity=0: must be more"),
        ("#DW jobdw type=cache access_mode=striped capacity=16M", "type=cache: only"),
        ("#DW persistentdw name=project", "persistent buffers are not offered"),
        (("#BB_LUA jobdw pool=harmonia capacity=16M\n"
          "#BB_LUA stage_in source=/nonexistent/in.dat destination=$HARMONIA_BB/in.dat"),
         "source=/nonexistent/in.dat: no such file"),
        ("#BB_LUA jobdw pool=harmonia capacity=16M access=private", "access=private"),
        ("#BB_LUA jobdw io=-1M", "io=-1M: must not be negative"),
        ("#BB_LUA jobdw priority=1", "capacity=SIZE is required (or io=SIZE)"),
        (("#BB_LUA jobdw pool=harmonia capacity=16M\n"
          "#BB_LUA stage_out source=$HARMONIA_BB/x destination=/tmp/x-$SLURM_JOB_ID"),
         "variables are not expanded"),
        ("#BB_LUA stage_out source=$HARMONIA_BB/x destination=/tmp/x", "need a `#BB_LUA jobdw`"),
    ],
)  # fmt: skip
def test_bad_directives_are_refused_by_sbatch_naming_them(
    cluster: Cluster, directive: str, named: str
) -> None:
    done = cluster.sbatch(directive + "\ntrue\n", "bad")
    assert done.returncode != 0
    assert named in done.stderr, done.stderr


def test_harmonia_mode_io_declares_without_reserving(cluster: Cluster) -> None:
    """io= declares the job's output for the policy; Slurm reserves none of the pool for it."""
    job = cluster.submit(
        "#BB_LUA jobdw io=48M\n"
        + 'echo "HARMONIA_BYTES_PER_PROCESS=$HARMONIA_BYTES_PER_PROCESS"\n'
        + "scontrol show burst\n"
        + WRITER.format(name="declared", blocks=2, block=BLOCK),
        "declared",
    )
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    output = (cluster.out / "declared.out").read_text()
    assert f"HARMONIA_BYTES_PER_PROCESS={48 << 20}" in output
    assert "UsedSpace=0" in output  # seen from inside the running job
    kept = cluster.pfs / ".harmonia-jobs" / job / "declared.dat"
    assert kept.read_bytes() == expected("declared", 2)


def test_scancel_mid_run_drains_and_releases(cluster: Cluster) -> None:
    job = cluster.submit(
        "#BB_LUA jobdw pool=harmonia capacity=32M\n"
        + WRITER.format(name="cancelled", blocks=4, block=BLOCK)
        + "sleep 120\n",
        "cancelled",
    )
    output = cluster.out / "cancelled.out"
    wait(
        lambda: output.exists() and "written" in output.read_text(), "the job's writes"
    )
    subprocess.run(["scancel", job], env=cluster.env, check=True, timeout=30)
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    wait(lambda: cluster.job_state(job) == "CANCELLED", "job state CANCELLED")
    # Not staged out: what the nodes acknowledged stays, drained, in the job's space.
    kept = cluster.pfs / ".harmonia-jobs" / job / "cancelled.dat"
    assert kept.read_bytes() == expected("cancelled", 4)
    assert all(n["used"] == 0 for n in cluster.nodes())
    wait(
        lambda: f"slurm-{job}" not in [j["job"] for j in cluster.schedd_jobs()],
        "harmonia-schedd to drop the job",
    )


def test_directory_stage_in_and_a_symlink_to_root_in_the_job_space(
    cluster: Cluster,
) -> None:
    """A directory is staged in file by file (subdirectories too); links the job leaves in its
    space are neither followed nor drained by the hooks, which run as root: not even when the
    job swaps stage-in's directory for a link to another holding a file of the same name."""
    victim = cluster.pfs / "victim"
    victim.mkdir()
    (victim / "a.dat").write_bytes(b"root's")
    inputs = cluster.pfs / "inputs"
    (inputs / "sub").mkdir(parents=True)
    contents = {"a.dat": os.urandom(70000), "sub/b.dat": os.urandom(1 << 20)}
    for name, data in contents.items():
        (inputs / name).write_bytes(data)
    (inputs / "sub").chmod(0o755)
    job = cluster.submit(
        "#BB_LUA jobdw pool=harmonia capacity=16M\n"
        f"#BB_LUA stage_in source={inputs} destination=$HARMONIA_BB/in type=directory\n"
        "ln -s / $HARMONIA_BB/root\n"
        "/usr/bin/python3 - <<'PY'\n"
        "import hashlib, os\n"
        "bb = os.environ['HARMONIA_BB']\n"
        "for name in ('a.dat', 'sub/b.dat'):\n"
        "    print(name, hashlib.sha256(open(f'{bb}/in/{name}', 'rb').read()).hexdigest())\n"
        "PY\n",
        "tree",
    )
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    output = (cluster.out / "tree.out").read_text()
    for name, data in contents.items():
        assert f"{name} {hashlib.sha256(data).hexdigest()}" in output
    space = cluster.pfs / ".harmonia-jobs" / job
    assert (space / "root").is_symlink()  # kept (the user's), never followed
    assert (victim / "a.dat").read_bytes() == b"root's"  # teardown did not follow `in`
    assert all(n["used"] == 0 for n in cluster.nodes())


def test_a_failed_stage_in_names_the_file_and_frees_the_space(cluster: Cluster) -> None:
    """A file the job's user may not read is checked at submission as root (it exists) but
    copied as the user: stage-in fails with one line naming it and the cause, Slurm holds the
    job with that reason and tears its space down (Flags=TeardownFailure)."""
    secret = cluster.pfs / "secret.dat"
    secret.write_bytes(b"root's")
    secret.chmod(0o600)
    job = cluster.submit(
        "#BB_LUA jobdw pool=harmonia capacity=16M\n"
        f"#BB_LUA stage_in source={secret} destination=$HARMONIA_BB/secret.dat\ntrue\n",
        "secret",
    )
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    shown = cluster.scontrol("show", "job", job, "-o")
    # The reason (spaces shown as _) and the SystemComment (sacct's too) name file and cause.
    assert "Reason=burst_buffer/lua:_slurm_bb_data_in:_stage_in_" in shown
    assert f"data_in: stage_in {secret}: Permission denied" in shown
    assert "JobState=PENDING" in shown and "Priority=0" in shown  # held, as Slurm does
    assert "Traceback" not in shown
    assert not (cluster.pfs / ".harmonia-jobs" / job).exists()
    wait(
        lambda: "UsedSpace=0" in cluster.scontrol("show", "burst"),
        "the pool's space freed",
    )
    subprocess.run(["scancel", job], env=cluster.env, check=True, timeout=30)


def test_a_failed_stage_out_names_the_destination_and_frees_the_space(
    cluster: Cluster,
) -> None:
    """The hooks run as root, but the user names the destination: a directory the user may not
    write gets nothing. The failure is one line naming the destination and the cause, the job
    is torn down (Flags=TeardownFailure: the pool's space is free again) and its bytes are kept
    in its space."""
    job = cluster.submit_stage_out_to_root_only("denied")
    closed = cluster.pfs / "root-only"
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    shown = cluster.scontrol("show", "job", job, "-o")
    assert (
        "Reason=burst_buffer/lua:_slurm_bb_data_out:_stage_out_$HARMONIA_BB/" in shown
    )
    assert (
        f"data_out: stage_out $HARMONIA_BB/denied.dat to {closed}/denied.dat: Permission denied"
        in shown
    )
    assert not (closed / "denied.dat").exists()
    kept = cluster.pfs / ".harmonia-jobs" / job / "denied.dat"
    assert kept.read_bytes() == expected("denied", 1)
    wait(
        lambda: "UsedSpace=0" in cluster.scontrol("show", "burst"),
        "the pool's space freed",
    )


def test_files_not_staged_out_are_removed_after_the_retention_time(
    cluster: Cluster,
) -> None:
    """A job's files that no stage_out moved are kept for the retention time (7 days here): the
    next teardown removes those kept longer, with a log line, and leaves the rest; `harmonia
    cluster purge` removes them on demand."""
    spaces = cluster.pfs / ".harmonia-jobs"
    jobs = []
    for name in ("kept-old", "kept-new"):
        job = cluster.submit(
            "#BB_LUA jobdw io=4M\n" + WRITER.format(name=name, blocks=1, block=BLOCK),
            name,
        )
        wait(lambda job=job: cluster.torn_down(job), f"job {job}'s teardown")
        jobs.append(job)
        if name == "kept-old":  # as if it had been torn down 8 days ago
            record = cluster.dir / "jobs" / "kept" / f"{job}.json"
            kept = json.loads(record.read_text())
            record.write_text(
                json.dumps({**kept, "kept_at": kept["kept_at"] - 8 * 86400})
            )
    old, new = jobs
    assert not (spaces / old).exists()  # removed by the second job's teardown
    assert (spaces / new / "kept-new.dat").read_bytes() == expected("kept-new", 1)
    log = (cluster.dir / "jobs" / "harmonia-bb.log").read_text()
    assert f"retention: removed {spaces / old} (uid" in log and "retention 168 h" in log
    done = subprocess.run(
        [sys.executable, "-m", "harmonia", "cluster", "purge", "--dir", str(cluster.dir),
         "--older-than", "0"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert f"retention: removed {spaces / new}" in done.stdout
    assert not (spaces / new).exists()


def test_bbstat_names_a_killed_and_a_stopped_node_within_a_second(
    cluster: Cluster,
) -> None:
    """While a job holds bytes on the nodes, one node is killed (SIGKILL, `harmonia up` held
    so it does not restart it yet) and one stopped (SIGSTOP): bbstat answers within a second,
    naming each; once they are back the job ends and its bytes are whole."""
    release = cluster.out / "release-faults"
    job = cluster.submit(
        "#BB_LUA jobdw io=8M\n"
        + WRITER.format(name="faults", blocks=2, block=BLOCK)
        + f"while [ ! -e {release} ]; do sleep 0.2; done\n",
        "faults",
    )
    output = cluster.out / "faults.out"
    wait(
        lambda: output.exists() and "written" in output.read_text(), "the job's writes"
    )
    manager = json.loads((cluster.dir / "cluster.json").read_text())["pids"]["harmonia"]
    killed, stopped = (
        int((cluster.cluster.buffers_dir / f"bb{k}.pid").read_text()) for k in (0, 1)
    )
    os.kill(manager, signal.SIGSTOP)
    try:
        os.kill(killed, signal.SIGKILL)
        os.kill(stopped, signal.SIGSTOP)
        wait(lambda: not pid_alive(killed), "the killed node to be gone")
        started = time.monotonic()
        shown = cluster.scontrol("show", "bbstat")
        took = time.monotonic() - started
    finally:
        os.kill(stopped, signal.SIGCONT)
        os.kill(manager, signal.SIGCONT)
    assert took < 1.0, f"bbstat took {took:.2f} s"
    rows = {line.split()[0]: line for line in shown.splitlines() if line[:2] == "bb"}
    assert " dead " in rows["bb0"] and "Connection refused" in rows["bb0"], shown
    assert f"pid {killed} not running" in rows["bb0"]
    assert " down " in rows["bb1"] and "no answer within 0.5 s" in rows["bb1"], shown
    assert f"pid {stopped} stopped" in rows["bb1"]
    assert any(
        line.split()[:3] == [job, USER, "running"] for line in shown.splitlines()
    ), shown
    # `harmonia up` restarts the killed node; the job ends and teardown drains its bytes.
    wait(lambda: shown_up(cluster), "both nodes up again")
    release.touch()
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    kept = cluster.pfs / ".harmonia-jobs" / job / "faults.dat"
    assert kept.read_bytes() == expected("faults", 2)


def shown_up(cluster: Cluster) -> bool:
    rows = [line.split() for line in cluster.scontrol("show", "bbstat").splitlines()]
    return [row[2] for row in rows if row and row[0][:2] == "bb"] == ["up", "up"]


def test_failed_job_is_torn_down_and_keeps_its_bytes(cluster: Cluster) -> None:
    destination = cluster.pfs / "results" / "failed.dat"
    job = cluster.submit(
        "#BB_LUA jobdw pool=harmonia capacity=32M\n"
        f"#BB_LUA stage_out source=$HARMONIA_BB/failed.dat destination={destination}\n"
        + WRITER.format(name="failed", blocks=3, block=BLOCK)
        + "exit 3\n",
        "failed",
    )
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown")
    wait(lambda: cluster.job_state(job) == "FAILED", "job state FAILED")
    # Slurm stages a failed job's data out too: the bytes it wrote are on the PFS.
    assert destination.read_bytes() == expected("failed", 3)
    assert all(n["used"] == 0 for n in cluster.nodes())


def test_slurmctld_restart_mid_job(cluster: Cluster) -> None:
    destination = cluster.pfs / "results" / "restart.dat"
    job = cluster.submit(
        "#BB_LUA jobdw pool=harmonia capacity=32M\n"
        f"#BB_LUA stage_out source=$HARMONIA_BB/restart.dat destination={destination}\n"
        + WRITER.format(name="restart", blocks=5, block=BLOCK)
        + "sleep 6\n",
        "restart",
    )
    output = cluster.out / "restart.out"
    wait(
        lambda: output.exists() and "written" in output.read_text(), "the job's writes"
    )
    old = json.loads((cluster.dir / "cluster.json").read_text())["pids"]["slurmctld"]
    new = cluster.cluster.restart(["slurmctld"], progress=lambda _line: None).pids[
        "slurmctld"
    ]
    assert new != old and not pid_alive(old)
    wait(lambda: cluster.torn_down(job), f"job {job}'s teardown after the restart", 150)
    wait(lambda: cluster.job_state(job) == "COMPLETED", "job state COMPLETED")
    assert destination.read_bytes() == expected("restart", 5)
    assert all(n["used"] == 0 for n in cluster.nodes())


def test_up_again_is_a_no_op_and_a_taken_port_is_refused(cluster: Cluster) -> None:
    pids = json.loads((cluster.dir / "cluster.json").read_text())["pids"]
    said: list[str] = []
    cluster.cluster.up(progress=said.append)
    assert said == [f"already running in {cluster.dir}"]
    assert json.loads((cluster.dir / "cluster.json").read_text())["pids"] == pids
    other = Path(tempfile.mkdtemp(prefix="harmonia-slurm-test-other-"))
    try:
        taken = json.loads((cluster.dir / "cluster.json").read_text())[
            "controller_port"
        ]
        with pytest.raises(
            SlurmClusterError, match=f"--controller-port {taken}: port already"
        ):
            SlurmCluster(SlurmSettings(other, controller_port=taken)).up(
                lambda _l: None
            )
    finally:
        shutil.rmtree(other, ignore_errors=True)


def test_datawarp_mode_holds_a_job_until_the_reservation_is_free() -> None:
    """DataWarp mode: the capacity is reserved for the whole job, so of two jobs asking 160 MiB
    of a 256 MiB pool the second waits (BurstBufferResources) until the first is torn down.
    This cluster keeps a failed stage's space (--keep-on-failure): a job whose stage-out
    failed stays in STAGE_OUT, its space claimed, until `scancel --hurry`."""
    dw = running(
        lambda d: Cluster(
            d, capacity=128 << 20, policy="datawarp", keep_on_failure=True
        ),
        "harmonia-slurm-test-dw-",
    )
    with dw as c:
        assert c.hooks["mode"] == "datawarp"
        refused = c.sbatch("#BB_LUA jobdw io=16M\ntrue\n", "dw-io")
        assert refused.returncode != 0
        assert "capacity=SIZE is required in DataWarp mode" in refused.stderr
        jobs = [
            c.submit(
                "#BB_LUA jobdw pool=harmonia capacity=160M\n"
                + WRITER.format(name=f"dw{k}", blocks=8, block=BLOCK)
                + "sleep 4\n",
                f"dw{k}",
            )
            for k in range(2)
        ]
        wait(lambda: c.job_state(jobs[0]) == "RUNNING", "the first job to run")
        second = c.scontrol("show", "job", jobs[1], "-o")
        assert "JobState=PENDING" in second and "BurstBufferResources" in second
        wait(lambda: c.torn_down(jobs[0]), "the first job's teardown")
        wait(lambda: c.torn_down(jobs[1]), "the second job's teardown")
        for k, job in enumerate(jobs):
            kept = c.pfs / ".harmonia-jobs" / job / f"dw{k}.dat"
            assert kept.read_bytes() == expected(f"dw{k}", 8)
        assert all(n["used"] == 0 for n in c.nodes())
        job = c.submit_stage_out_to_root_only("kept")
        wait(lambda: c.job_state(job) == "STAGE_OUT" and "Permission_denied" in
             c.scontrol("show", "job", job, "-o"), "the failed stage-out")  # fmt: skip
        assert "UsedSpace=16MiB" in c.scontrol("show", "burst")  # still claimed
        subprocess.run(["scancel", "--hurry", job], env=c.env, check=True, timeout=30)
        wait(lambda: c.torn_down(job), f"job {job}'s teardown")
        assert (c.pfs / ".harmonia-jobs" / job / "kept.dat").read_bytes() == expected(
            "kept", 1
        )
        wait(
            lambda: "UsedSpace=0" in c.scontrol("show", "burst"),
            "the pool's space freed",
        )
