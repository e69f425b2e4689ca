"""The read path end to end (issue 16 item 1): harmonia-schedd places a job's announced read
phase, harmonia-bbd nodes copy its files in from the PFS as the job's user while the job computes,
and libharmonia serves the job's reads from those copies, byte for byte. A file that changes after
its copy was made is read from the PFS."""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from buffers_support import BBD, needs
from harmonia.buffers.cluster import BufferCluster, ClusterSettings

pytestmark = needs(BBD)

READER = Path(__file__).with_name("analysis_reader.py")
INPUTS = {"in/mesh.dat": (5 << 20) + 123, "in/fields.dat": (3 << 20) + 4097}


def write_inputs(pfs: Path, seed: int) -> dict[str, bytes]:
    """The files an earlier job left on the PFS, random bytes; the nodes copy only files whose
    last change is at least 1 s old (docs/buffer-nodes.md), so this waits that long."""
    rng = random.Random(seed)
    data = {}
    for name, size in INPUTS.items():
        data[name] = rng.randbytes(size)
        (pfs / name).parent.mkdir(parents=True, exist_ok=True)
        (pfs / name).write_bytes(data[name])
    time.sleep(1.1)
    return data


def start_reader(
    cluster: BufferCluster, pause: float, prefetch: bool, **extra: str
) -> subprocess.Popen[str]:
    files = [str(cluster.pfs / name) for name in INPUTS]
    env = {**os.environ, **cluster.env(), "HARMONIA_JOB": "analysis", **extra}
    if prefetch:
        env["HARMONIA_PREFETCH"] = ",".join(files)
    return subprocess.Popen(
        [sys.executable, str(READER), str(pause), *files],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finish(reader: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    result["stderr"] = err
    return result


def wait_staged(cluster: BufferCluster, total: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.node_total("staged_bytes") >= total:
            return
        time.sleep(0.05)
    raise AssertionError(f"the nodes did not stage in {total} bytes within {timeout} s")


def settings(tmp_path: Path) -> ClusterSettings:
    return ClusterSettings(
        tmp_path, buffers=2, capacity=64 << 20, policy="max-bandwidth"
    )


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_announced_read_is_staged_in_ahead_and_served_by_the_nodes(
    tmp_path: Path,
) -> None:
    with BufferCluster(settings(tmp_path)) as cluster:
        data = write_inputs(cluster.pfs, seed=1)
        result = finish(start_reader(cluster, pause=2.0, prefetch=True))
        for name, content in data.items():
            got = result[str(cluster.pfs / name)]
            assert got["sha256"] == sha(content), name
            assert got["pread_ok"], name
        # Every read() byte came from the copies, and the preads too.
        assert cluster.node_total("staged_read_bytes") >= sum(INPUTS.values())
        record = cluster.stop()
    reads = [p for p in record["phases"] if p["op"] == "read"]
    assert len(reads) == 1, "both files in one read phase"
    assert reads[0]["granted"] >= 0 and reads[0]["end"] >= reads[0]["granted"]
    assert [p["app"] for p in record["prefetches"]] == ["analysis"]
    stage_in = record["prefetches"][0]
    assert stage_in["bytes"] == sum(INPUTS.values())
    # Staged in during the computation: the read did not wait for it.
    assert stage_in["end"] <= reads[0]["requested"]
    assert reads[0]["granted"] - reads[0]["requested"] < 0.5


def test_without_an_announcement_the_job_reads_the_pfs(tmp_path: Path) -> None:
    with BufferCluster(settings(tmp_path)) as cluster:
        data = write_inputs(cluster.pfs, seed=2)
        result = finish(start_reader(cluster, pause=0.2, prefetch=False))
        for name, content in data.items():
            assert result[str(cluster.pfs / name)]["sha256"] == sha(content)
        assert cluster.node_total("staged_read_bytes") == 0
        record = cluster.stop()
    assert record["prefetches"] == []
    assert not [p for p in record["phases"] if p["op"] == "read"]


def test_a_file_changed_after_its_copy_was_made_is_read_from_the_pfs(
    tmp_path: Path,
) -> None:
    with BufferCluster(settings(tmp_path)) as cluster:
        data = write_inputs(cluster.pfs, seed=3)
        reader = start_reader(cluster, pause=4.0, prefetch=True, HARMONIA_DEBUG="1")
        wait_staged(cluster, sum(INPUTS.values()))
        # Another job rewrites the middle of one file while the analysis still computes.
        changed = cluster.pfs / "in/mesh.dat"
        patch = random.Random(4).randbytes(1 << 20)
        with open(changed, "r+b") as f:
            f.seek(2 << 20)
            f.write(patch)
        expected = bytearray(data["in/mesh.dat"])
        expected[2 << 20 : 3 << 20] = patch
        result = finish(reader)
        assert result[str(changed)]["sha256"] == sha(bytes(expected)), "the new bytes"
        assert result[str(cluster.pfs / "in/fields.dat")]["sha256"] == sha(
            data["in/fields.dat"]
        )
        # HARMONIA_DEBUG says why the changed file's descriptor went to the PFS.
        assert "in/mesh.dat (descriptor" in result["stderr"], result["stderr"]
        assert "the PFS from now on: a buffer node did not serve" in result["stderr"]
        # The unchanged file was served; of the changed one, nothing.
        assert (
            INPUTS["in/fields.dat"]
            <= cluster.node_total("staged_read_bytes")
            < sum(INPUTS.values())
        )


def test_writes_during_the_read_phase_do_not_go_to_its_nodes(tmp_path: Path) -> None:
    # The read phase's nodes hold its copies; the policy placed no write phase there.
    with BufferCluster(settings(tmp_path)) as cluster:
        write_inputs(cluster.pfs, seed=5)
        output = cluster.pfs / "out/result.dat"
        output.parent.mkdir()
        finish(
            start_reader(cluster, pause=1.5, prefetch=True, READER_OUTPUT=str(output))
        )
        assert output.read_bytes() == b"r" * (1 << 20)
        assert cluster.node_total("staged_read_bytes") >= sum(INPUTS.values())
        assert cluster.node_total("received_bytes") == 0


def test_a_node_that_hangs_does_not_hang_the_reader(tmp_path: Path) -> None:
    with BufferCluster(settings(tmp_path)) as cluster:
        data = write_inputs(cluster.pfs, seed=6)
        reader = start_reader(cluster, pause=3.0, prefetch=True)
        wait_staged(cluster, sum(INPUTS.values()))
        hung = cluster.nodes[0]
        assert hung is not None
        hung.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            result = finish(reader)
            elapsed = time.monotonic() - started
        finally:
            hung.send_signal(signal.SIGCONT)
        for name, content in data.items():
            assert result[str(cluster.pfs / name)]["sha256"] == sha(content), name
        # One bounded wait for the hung node (5 s), then the PFS: not the 60+ s a hang would be.
        assert elapsed < 3.0 + 15.0, elapsed
