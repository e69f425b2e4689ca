"""Buffer nodes end to end: harmonia-schedd with a burst-buffer policy, harmonia-bbd nodes
reporting to it, and MPI jobs writing under libharmonia. Every file must come out with exactly
the bytes written, whatever the policy and whatever happens to the nodes."""

import json
import os
import random
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
    run_jobs,
    verify,
)
from users_support import run_as

pytestmark = needs(BBD)

SPEC = JobSpec(ranks=2, steps=3, requests=4, size=1 << 20, compute=0.2)


def phases_on_buffers(record: dict) -> list[dict]:
    return [p for p in record["phases"] if p["granted"] >= 0]


def test_jobs_write_through_buffer_nodes_and_files_are_identical(
    tmp_path: Path,
) -> None:
    settings = ClusterSettings(
        tmp_path, buffers=2, capacity=64 << 20, policy="max-bandwidth"
    )
    with BufferCluster(settings) as cluster:
        run_jobs(cluster, 2, SPEC)
        cluster.wait_drained()
        assert verify(cluster.pfs, 2, SPEC) == []
        record = cluster.stop()
    # Every phase was granted buffer nodes by the policy; a job's phase runs from its first
    # process's begin to its last one's end, so ranks out of step may split a step in two.
    assert all(p["granted"] >= 0 and p["end"] >= 0 for p in record["phases"])
    for job in ("job0", "job1"):
        assert sum(p["job"] == job for p in record["phases"]) >= SPEC.steps
    assert sum(d["bytes"] for d in record["drains"]) > 0, "the nodes drained to the PFS"
    assert not any(any((tmp_path / f"bb{k}").glob("*.bblog")) for k in range(2))


def test_datawarp_holds_a_job_until_the_first_one_is_staged_out(tmp_path: Path) -> None:
    # Each job declares 24 MiB; the two nodes hold 32 MiB: the second job's reservation fits
    # only once the first job has ended and its data has left the nodes (every buffer may be
    # reserved: the default bound of half of them would let both fit).
    settings = ClusterSettings(tmp_path, buffers=2, capacity=16 << 20, policy="datawarp",
                               max_phase_share=1.0)  # fmt: skip
    with BufferCluster(settings) as cluster:
        results = run_jobs(cluster, 2, SPEC)
        cluster.wait_drained()
        assert verify(cluster.pfs, 2, SPEC) == []
        record = cluster.stop()
    phases = sorted(phases_on_buffers(record), key=lambda p: p["granted"])
    first_job = phases[0]["job"]
    other = [p for p in phases if p["job"] != first_job]
    last_of_first = max(p["end"] for p in phases if p["job"] == first_job)
    assert other and min(p["granted"] for p in other) >= last_of_first, (
        "the second job's phases ran only after the first job's"
    )
    ends = sorted(r["apps"][0]["end"] for r in results)
    assert ends[1] > ends[0] + SPEC.steps * SPEC.compute * 0.5, "the second job waited"


@pytest.mark.parametrize("seed", [1, 2])
def test_kill_9_of_a_node_mid_run_loses_nothing(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    # Each job's phases striped over both nodes (whichever dies holds some of every file).
    settings = ClusterSettings(tmp_path, buffers=2, capacity=64 << 20, policy="max-bandwidth",
                               flush_threshold=1.0, max_phase_share=1.0)  # fmt: skip
    with BufferCluster(settings) as cluster:
        victim = rng.randrange(2)

        def crash() -> None:
            # Into the run (the jobs start 3 s after launch), then back after a while.
            time.sleep(3.0 + rng.uniform(0.1, 0.8))
            cluster.kill_node(victim)
            time.sleep(rng.uniform(0.2, 0.6))
            cluster.start_node(victim)

        chaos = threading.Thread(target=crash)
        chaos.start()
        run_jobs(cluster, 2, SPEC)
        chaos.join()
        cluster.wait_drained()
        assert verify(cluster.pfs, 2, SPEC) == []
        log = (tmp_path / f"bb{victim}.log").read_text()
        assert log.count("files recovered") == 2, "the node was restarted"


@pytest.mark.parametrize("who", ["root", "user"])
def test_a_range_rewritten_while_its_node_is_down_keeps_the_newer_bytes(
    request: pytest.FixtureRequest, tmp_path: Path, who: str
) -> None:
    # One node that drains only when told; the job's first write goes to it, then the node dies,
    # the job rewrites part of that range (through to the PFS, fenced), and its close waits for
    # the node, which comes back and drains its recovered log around the fenced range. The job
    # runs as root, or as an ordinary user beside root's daemons: the fence it leaves in the
    # PFS must be one the node honours and removes, whoever made it.
    user = request.getfixturevalue("ordinary_user") if who == "user" else None
    directory = request.getfixturevalue("reachable") if user else tmp_path
    settings = ClusterSettings(directory, buffers=1, capacity=64 << 20, policy="max-bandwidth",
                               flush_threshold=1.0)  # fmt: skip
    target = directory / "pfs" / "rewritten.dat"
    with BufferCluster(settings) as cluster:
        job = subprocess.Popen(
            [*(run_as(user) if user else []), sys.executable,
             str(Path(__file__).with_name("rewriter.py")), str(target)],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "rewriter"},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert job.stdout is not None and job.stdin is not None
        assert job.stdout.readline().strip() == "written", job.stderr
        assert any(settings.device(0).glob("*.bblog")), "the first write is on the node"
        cluster.kill_node(0)
        job.stdin.write("go\n")
        job.stdin.flush()
        assert job.stdout.readline().strip() == "rewritten"
        fences = directory / "pfs" / ".harmonia" / "fences"
        assert any(p.is_file() for p in fences.rglob("*") if p.suffix != ".lock"), (
            "fenced"
        )
        cluster.start_node(0)
        out, err = job.communicate(timeout=60)
        assert job.returncode == 0 and out.strip() == "closed", err
        cluster.wait_drained()
    mib = 1 << 20
    data = target.read_bytes()
    assert data == b"A" * (mib // 2) + b"B" * mib + b"A" * (mib // 2), (
        "the node's older bytes must not land over the rewrite"
    )
    assert not any(p.is_file() for p in fences.rglob("*") if p.suffix != ".lock")
    expected_owner = user.pw_uid if user else 0
    assert target.stat().st_uid == expected_owner, "the drained file is the job user's"


@pytest.mark.parametrize("hint", ["cached", "flushable"])
def test_reads_come_from_the_nodes_while_they_hold_the_data(
    tmp_path: Path, hint: str
) -> None:
    # Threshold 0: a flushable job's data drains once its phase is over; a cached job's stays on
    # the nodes until the job ends, and its reads are served from there.
    settings = ClusterSettings(tmp_path, buffers=2, capacity=64 << 20, policy="max-bandwidth",
                               flush_threshold=0.0)  # fmt: skip
    target = tmp_path / "pfs" / "read-back.dat"
    with BufferCluster(settings) as cluster:
        job = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("cached_reader.py")), str(target), "2"],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "reader", "HARMONIA_HINT": hint,
                 "HARMONIA_PHASE_GAP": "0.3"},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert job.returncode == 0, job.stderr
        result = json.loads(job.stdout)
        assert result["pread_ok"] and result["read_ok"], result
        if hint == "cached":
            # Served by the nodes: the PFS had nothing before, and nothing was drained to read.
            assert result["pfs_size_at_read"] == result["pfs_size_after_read"] == 0, (
                result
            )
        else:
            assert result["pfs_size_at_read"] == 3 << 20, (
                "drained after its phase, read from the PFS"
            )
        cluster.wait_drained()
    assert target.read_bytes() == bytes(k % 251 for k in range(3 << 20))


def lose_node(cluster: BufferCluster, how: str) -> None:
    """Node 0 dies (SIGKILL) or hangs (SIGSTOP: it accepts connections and never answers)."""
    if how == "killed":
        cluster.kill_node(0)
    else:
        node = cluster.nodes[0]
        assert node is not None
        node.send_signal(signal.SIGSTOP)


def bring_back_node(cluster: BufferCluster, how: str) -> None:
    if how == "killed":
        cluster.start_node(0)
    else:
        node = cluster.nodes[0]
        assert node is not None
        node.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("how", ["killed", "stopped"])
@pytest.mark.parametrize("restart", [False, True])
@pytest.mark.parametrize("when", ["after-writing", "mid-write"])
def test_a_dead_node_never_shows_wrong_bytes(
    tmp_path: Path, when: str, restart: bool, how: str
) -> None:
    # Two nodes, 1 MiB stripes: part of the file is on node 0 when it dies or hangs (after the
    # job wrote it all, or while it writes: later writes go through, fenced). Reading it back and
    # closing it either wait for the node (it comes back within HARMONIA_NODE_WAIT: the right
    # bytes, close 0) or fail with EIO; never wrong bytes or a short read, never a close of 0
    # while the node holding bytes is down, and no call waits on a hung node past the bounds.
    # Either way the PFS file is right once the node is back.
    settings = ClusterSettings(tmp_path, buffers=2, capacity=256 << 20, policy="max-bandwidth",
                               flush_threshold=1.0, max_phase_share=1.0)  # fmt: skip
    target = tmp_path / "pfs" / "failover.dat"
    mib = 8 if when == "after-writing" else 24
    with BufferCluster(settings) as cluster:
        job = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("failover_job.py")), str(target),
             str(mib)],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "failover",
                 "HARMONIA_NODE_WAIT": "30" if restart else "2"},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert job.stdout is not None and job.stdin is not None
        assert job.stdout.readline().strip() == "started"
        if when == "mid-write":
            time.sleep(0.15)
            assert any((tmp_path / "bb0").glob("*.bblog")), (
                "part of the file is on node 0"
            )
            lose_node(cluster, how)
        writing = time.monotonic()
        assert job.stdout.readline().strip() == "written"
        # A hung node holds a write up for its 5 s timeout, then is skipped for 5 s; the rest
        # of the file goes to the other node or through to the PFS.
        assert time.monotonic() - writing < 30, "the writes waited on the hung node"
        if when == "after-writing":
            assert any((tmp_path / "bb0").glob("*.bblog")), (
                "part of the file is on node 0"
            )
            lose_node(cluster, how)
        started = time.monotonic()
        job.stdin.write("go\n")
        job.stdin.flush()
        if restart:
            time.sleep(1.0)
            bring_back_node(cluster, how)
        out, err = job.communicate(timeout=90)
        elapsed = time.monotonic() - started
        assert job.returncode == 0, err
        result = json.loads(out)
        if restart:
            assert result == {"read": "ok", "close": "ok"}, err
        else:
            assert result == {"read": "EIO", "close": "EIO"}, err
            assert "is down" in err and "HARMONIA_NODE_WAIT" in err
            # Each waits HARMONIA_NODE_WAIT (2 s), and a hung node's requests 5 s more at most.
            assert elapsed < 2 * (2 + 5) + 10, "a call waited past its bound"
            bring_back_node(cluster, how)
        cluster.wait_drained()
    expected = bytes(k % 251 for k in range(251 * 1024)) * (mib * 5)
    assert target.read_bytes() == expected[: mib << 20]


def test_small_writes_reach_the_nodes_gathered_into_stripes(tmp_path: Path) -> None:
    # 1,024 writes of 4 KiB: the nodes must receive them as a few stripe-sized writes (one log
    # record each), not one request per write; and the close pushes what is still gathered.
    settings = ClusterSettings(tmp_path, buffers=2, capacity=64 << 20, policy="max-bandwidth",
                               flush_threshold=1.0)  # fmt: skip
    target = tmp_path / "pfs" / "small.dat"
    with BufferCluster(settings) as cluster:
        job = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("small_writer.py")), str(target)],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "small"},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert job.stdout is not None and job.stdin is not None
        assert job.stdout.readline().strip() == "written"
        logs = [p for k in range(2) for p in (tmp_path / f"bb{k}").glob("*.bblog")]
        records = sum(p.read_bytes().count(b"HREC") for p in logs)
        assert 3 <= records <= 8, f"{records} records for 1,024 writes of 4 KiB"
        out, err = job.communicate("go\n", timeout=60)
        assert job.returncode == 0 and out.strip() == "closed", err
        cluster.wait_drained()
    assert target.read_bytes() == bytes(4 << 20)


def test_a_buffer_root_the_nodes_do_not_drain_to_is_reported(tmp_path: Path) -> None:
    # HARMONIA_BUFFER_ROOT names another directory than the nodes' --pfs: the data must not
    # vanish onto the nodes' PFS; the writes go through to the job's files, and it is said.
    settings = ClusterSettings(tmp_path / "cluster", buffers=1, capacity=64 << 20)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "out.bin"
    with BufferCluster(settings) as cluster:
        env = {**cluster.env(), "HARMONIA_BUFFER_ROOT": str(elsewhere),
               "HARMONIA_STAGE_INCLUDE": str(elsewhere), "HARMONIA_JOB": "misplaced"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("small_writer.py")), str(target)],
            env={**os.environ, **env}, input="go\n", capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        assert not list(cluster.pfs.rglob("out.bin")), "nothing lands in the nodes' PFS"
    assert done.returncode == 0, done.stderr
    assert f"HARMONIA_BUFFER_ROOT={elsewhere} is not where buffer node" in done.stderr
    assert target.read_bytes() == bytes(4 << 20)


def test_a_connection_the_node_closed_for_idleness_is_opened_again(
    tmp_path: Path,
) -> None:
    # The node closes connections idle for 0.5 s; a job that computes for longer between its
    # writes opens a new connection, does not count the node as lost, and keeps writing to it.
    settings = ClusterSettings(tmp_path, buffers=1, capacity=64 << 20, policy="max-bandwidth",
                               flush_threshold=1.0, idle_timeout=0.5)  # fmt: skip
    target = tmp_path / "pfs" / "idle.dat"
    job = (
        "import os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)\n"
        "os.pwrite(fd, b'A' * (1 << 20), 0)\n"
        "time.sleep(1.5)\n"
        "os.pwrite(fd, b'B' * (1 << 20), 1 << 20)\n"
        "os.close(fd)\n"
    )
    with BufferCluster(settings) as cluster:
        done = subprocess.run(
            [sys.executable, "-c", job, str(target)],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "idle", "HARMONIA_PHASE_GAP": "5"},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "lost" not in done.stderr and "writing through" not in done.stderr, (
            done.stderr
        )
        cluster.wait_drained()
        drained = int(cluster.buffer_states()[0].get("drained_bytes", 0))
        assert drained == 2 << 20, "both writes went through the node"
    assert target.read_bytes() == b"A" * (1 << 20) + b"B" * (1 << 20)


REOPENER = r"""
import os, statistics, sys, time
os.chdir(sys.argv[1])
for k in range(15):
    with open(f"f{k}", "w") as f:
        f.write("x" * 1000)
took = []
for k in range(15):
    start = time.monotonic()
    open(f"f{k}", "r+").close()  # the bytes come back from the nodes first
    took.append(time.monotonic() - start)
print(statistics.median(took))
"""


def test_a_file_written_through_the_nodes_reopens_without_waiting_for_a_report(
    tmp_path: Path,
) -> None:
    """Reopening a file whose bytes the nodes hold drains it first, by an urgent order the
    scheduler pushes to its nodes. A node applies a pushed order as it arrives, not at its next
    report (every 0.1 s): git, make and rsync, which reopen what they just wrote, took about
    100 ms per file for that wait alone."""
    with BufferCluster(
        ClusterSettings(tmp_path, buffers=2, capacity=16 << 20)
    ) as cluster:
        directory = cluster.pfs / "reopen"
        directory.mkdir()
        run = subprocess.run(
            [sys.executable, "-c", REOPENER, str(directory)],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "reopener"},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert float(run.stdout) < 0.05, (
            f"median reopen {float(run.stdout) * 1000:.0f} ms"
        )
        for k in range(15):
            assert (directory / f"f{k}").read_text() == "x" * 1000


# Writes 6 MiB to argv[1] (through the nodes), says so, waits for a line on stdin, then fsyncs
# and prints "synced", or the error.
FSYNC_ON_CUE = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, bytes(range(256)) * (6 << 12))
print("written", flush=True)
sys.stdin.readline()
try:
    os.fsync(fd)
    print("synced", flush=True)
except OSError as error:
    print(error, flush=True)
"""


def test_a_scheduler_lost_during_a_drain_leaves_the_process_to_ask_the_nodes(
    tmp_path: Path,
) -> None:
    """A process's fsync waits for the scheduler to have the nodes drain its file, and the
    scheduler dies meanwhile: that says nothing of the nodes, so the process asks them itself,
    and the fsync succeeds once they drain (it failed with EIO, naming a node as down)."""
    settings = ClusterSettings(
        tmp_path / "c", buffers=2, capacity=64 << 20, flush_threshold=1.0
    )
    with BufferCluster(settings) as cluster:
        target = cluster.pfs / "synced"
        writer = subprocess.Popen(
            [sys.executable, "-c", FSYNC_ON_CUE, str(target)],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "lost", "HARMONIA_NODE_WAIT": "30"},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert writer.stdin and writer.stdout
        try:
            assert writer.stdout.readline().strip() == "written"
            assert cluster.node_total("received_bytes") >= 6 << 20, (
                "nothing on the nodes"
            )
            nodes = [node for node in cluster.nodes if node is not None]
            for node in nodes:
                os.kill(
                    node.pid, signal.SIGSTOP
                )  # the drain the scheduler orders waits
            writer.stdin.write("\n")
            writer.stdin.flush()
            time.sleep(0.5)
            cluster.schedd.kill()
            cluster.schedd.wait()
            time.sleep(0.5)
            for node in nodes:
                os.kill(node.pid, signal.SIGCONT)
            said = writer.stdout.readline().strip()
        finally:
            for node in cluster.nodes:
                if node is not None and node.poll() is None:
                    os.kill(node.pid, signal.SIGCONT)
            writer.kill()
            _, err = writer.communicate(timeout=30)
        assert said == "synced", err
        assert target.read_bytes() == bytes(range(256)) * (6 << 12)
