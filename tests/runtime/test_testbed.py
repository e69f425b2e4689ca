"""Hosts of their own (issue 15): the scheduler, four buffer nodes and two compute hosts, each a
network namespace with its own address and a shaped link (scripts/testbed.py), every TCP
connection authenticated with MUNGE. The scaled VPIC case with every byte checked; a buffer
host's link cut and restored mid-run; the scheduler's host unreachable."""

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from buffers_support import BBD, needs
from harmonia.buffers.cluster import (
    BufferCluster,
    ClusterSettings,
    Hosts,
    JobSpec,
    run_jobs,
    verify,
)
from harmonia.buffers.experiment import DrainingCase
from munge_support import munged
from testbed_support import hosts_of_their_own, why_no_testbed

NAME = f"hmt{os.getpid() % 10000}"

pytestmark = [
    needs(BBD),
    pytest.mark.skipif(
        bool(why_no_testbed(NAME, "munged", "mpirun")),
        reason=why_no_testbed(NAME, "munged", "mpirun") or "-",
    ),
]


@pytest.fixture(scope="module")
def testbed() -> Iterator[dict[str, Any]]:
    with hosts_of_their_own(NAME) as description:
        yield description


@pytest.fixture(scope="module")
def munge_socket() -> Iterator[str]:
    with munged("harmonia-munge-") as (socket_path,):
        yield socket_path


def settings(
    tmp_path: Path, testbed: dict[str, Any], munge: str, **extra: Any
) -> ClusterSettings:
    return ClusterSettings(tmp_path, hosts=Hosts.from_testbed(testbed, munge), **extra)


def switch_port(name: str, port: str, state: str) -> None:
    subprocess.run(["ip", "-n", f"{name}-sw", "link", "set", port, state], check=True)


def test_the_daemons_listen_on_their_hosts_addresses(
    tmp_path: Path, testbed: dict[str, Any], munge_socket: str
) -> None:
    hosts = Hosts.from_testbed(testbed, munge_socket)
    with BufferCluster(settings(tmp_path, testbed, munge_socket, buffers=4)) as cluster:
        buffers = cluster.status()["buffers"]
        assert sorted(b["address"] for b in buffers) == sorted(
            f"{address}:7080" for _, address in hosts.buffers
        )
        # The scheduler is not on the machine's own loopback, only on its host's address.
        listening = subprocess.run(["ip", "netns", "exec", hosts.schedd[0], "ss", "-ltn"],
                                   capture_output=True, text=True, check=False).stdout  # fmt: skip
        assert f"{hosts.schedd[1]}:7000" in listening, listening


def test_the_scaled_vpic_case_across_hosts_with_every_byte_checked(
    tmp_path: Path, testbed: dict[str, Any], munge_socket: str
) -> None:
    case = DrainingCase(steps=4, compute=0.5)
    with BufferCluster(settings(tmp_path, testbed, munge_socket, buffers=case.buffers,
                                capacity=case.capacity, policy="max-bandwidth",
                                phase_bytes=case.requests * case.request)) as cluster:  # fmt: skip
        results = run_jobs(cluster, case.jobs, case.spec)
        cluster.wait_drained(timeout=300)
        assert verify(cluster.pfs, case.jobs, case.spec) == []
        drained = sum(int(b.get("drained_bytes", 0)) for b in cluster.buffer_states())
        record = cluster.stop()
    assert [int(r["apps"][0]["bytes"]) for r in results] == [
        case.instance_bytes
    ] * case.jobs
    assert drained > 0, "data went through the buffer hosts"
    assert any(p["granted"] >= 0 for p in record["phases"])


def test_a_buffer_hosts_link_cut_and_restored_loses_nothing(
    tmp_path: Path, testbed: dict[str, Any], munge_socket: str
) -> None:
    spec = JobSpec(ranks=2, steps=8, requests=4, size=1 << 20, compute=0.5)
    with BufferCluster(settings(tmp_path, testbed, munge_socket, buffers=4,
                                capacity=256 << 20)) as cluster:  # fmt: skip
        # The jobs start writing 3 s after run_jobs starts (its start slack) and write for 4 s
        # or more: the link goes down in the middle of their writes, for 3 s.
        cut = threading.Timer(4.0, switch_port, (NAME, "p-bb1", "down"))
        restore = threading.Timer(7.0, switch_port, (NAME, "p-bb1", "up"))
        cut.start()
        restore.start()
        started = time.monotonic()
        try:
            run_jobs(cluster, 2, spec)
        finally:
            cut.cancel()
            restore.join()
        elapsed = time.monotonic() - started
        print(f"link cut for 3 s: the jobs took {elapsed:.1f} s")
        failures = cluster.drain_all(timeout=120)
        assert failures == [], failures
        cluster.wait_drained(timeout=120)
        assert verify(cluster.pfs, 2, spec) == [], (
            "every acknowledged byte is in the files"
        )
    assert elapsed < 120, "the jobs did not hang on the cut link"


def test_the_schedulers_host_unreachable_jobs_write_through_within_a_second(
    tmp_path: Path, testbed: dict[str, Any], munge_socket: str
) -> None:
    spec = JobSpec(ranks=2, steps=3, requests=2, size=1 << 20, compute=0.0)
    with BufferCluster(settings(tmp_path, testbed, munge_socket, buffers=4)) as cluster:
        switch_port(NAME, "p-schedd0", "down")
        try:
            started = time.monotonic()
            results = run_jobs(cluster, 1, spec, start_slack=0.5)
            elapsed = time.monotonic() - started
        finally:
            switch_port(NAME, "p-schedd0", "up")
        assert verify(cluster.pfs, 1, spec) == []
    # The I/O itself (harmonia-bench's own clock, from the start time to its end): at most the
    # one second the first write waits for a registration, and the writes.
    io_seconds = float(results[0]["apps"][0]["end"])
    print(
        f"scheduler unreachable: I/O took {io_seconds:.2f} s, the job {elapsed:.2f} s"
    )
    assert io_seconds < 1.0 + 2.0, (io_seconds, elapsed)
