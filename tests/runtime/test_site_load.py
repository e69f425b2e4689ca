"""harmonia-schedd under a site's kind of load, small: harmonia-siteload's emulated buffer nodes
and jobs against a real daemon (docs/control.md), and the warning the daemon logs when a real
buffer node disconnects or stops reporting."""

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from bbio_support import BUILD
from schedd_support import SCHEDD, stop_daemon, wait_listening, wait_until

SITELOAD = BUILD / "src" / "schedd" / "harmonia-siteload"
BBD = BUILD / "src" / "bbd" / "harmonia-bbd"


def start_schedd(address: Path, log: Path, *args: str) -> subprocess.Popen[str]:
    """harmonia-schedd with buffer nodes, its log as JSON lines in `log`."""
    with log.open("w") as out:
        daemon = subprocess.Popen(
            [str(SCHEDD), "--socket", str(address), "--tick", "0.01", "--log", "json", *args],
            stdout=subprocess.DEVNULL, stderr=out, text=True,
        )  # fmt: skip
    return wait_listening(daemon, address, "harmonia-schedd")


def log_lines(log: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in log.read_text().splitlines()
        if line.startswith("{")
    ]


@pytest.mark.skipif(not SITELOAD.is_file(), reason="harmonia-siteload is not built")
def test_every_phase_of_a_hundred_jobs_on_sixteen_nodes_is_decided(
    tmp_path: Path,
) -> None:
    address, record = tmp_path / "schedd.sock", tmp_path / "record.json"
    daemon = start_schedd(
        address, tmp_path / "schedd.log", "--buffers", "16", "--max-running-apps", "0",
        "--record", str(record),
    )  # fmt: skip
    try:
        run = subprocess.run(
            [str(SITELOAD), "--schedd", str(address), "--nodes", "16", "--jobs", "100",
             "--phases", "2", "--compute", "0.4", "--io", "0.1", "--json",
             str(tmp_path / "load.json")],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        stop_daemon(daemon)
    assert run.returncode == 0, run.stderr
    assert "siteload:" in run.stderr, "progress is shown while it runs"
    assert "p99 ms" in run.stdout
    load = json.loads((tmp_path / "load.json").read_text())
    # Every request answered, nothing refused or dropped, every drain order carried out and
    # acknowledged, every byte the jobs left on the nodes drained.
    assert load["refusals"] == 0, load["refusal_messages"]
    assert load["jobs_dropped"] == 0 and load["nodes_dropped"] == 0
    assert load["requests_unanswered"] == 0
    assert load["nodes_with_order_unacknowledged"] == 0
    assert load["bytes_left_on_nodes"] == 0
    assert load["orders_received"] > 0, "the nodes were ordered to drain"
    assert load["phases_done"] == 200 and load["jobs_done"] == 100
    latency = load["latency"]
    for decision, count in [("register", 100), ("node_register", 16), ("phase_begin", 200),
                            ("grant", 200), ("phase_end", 200), ("flush", 200)]:  # fmt: skip
        assert latency[decision]["count"] == count, decision
        assert 0 < latency[decision]["p50_ms"] <= latency[decision]["p99_ms"], decision
    assert latency["report"]["count"] > 16
    assert load["messages_per_second"] > 0 and load["daemon_cpu_seconds"] > 0
    assert load["daemon_peak_rss_bytes"] > 1 << 20
    # The daemon's own record agrees: each job's two write phases were granted and ended, on
    # the emulated nodes.
    phases = json.loads(record.read_text())["phases"]
    assert len(phases) == 200
    by_job: dict[str, int] = {}
    for phase in phases:
        assert (
            phase["granted"] >= phase["requested"] >= 0
            and phase["end"] >= phase["granted"]
        )
        by_job[phase["job"]] = by_job.get(phase["job"], 0) + 1
    assert by_job == {f"siteload-{j}": 2 for j in range(100)}


@pytest.mark.skipif(not BBD.is_file(), reason="harmonia-bbd is not built")
@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_buffer_node_lost_is_logged_with_its_address(
    tmp_path: Path, how: str
) -> None:
    """A node that disconnects (killed) or goes silent past the lease (stopped) is named in a
    warning of the scheduler's log."""
    address, log = tmp_path / "schedd.sock", tmp_path / "schedd.log"
    daemon = start_schedd(address, log, "--buffers", "2", "--lease", "1")
    for part in ("dev", "pfs"):
        (tmp_path / part).mkdir()
    node = subprocess.Popen(
        [str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(tmp_path / "pfs"),
         "--schedd", str(address)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert node.stdout is not None
        line = node.stdout.readline()
        assert line.startswith("port="), node.stderr.read() if node.stderr else ""
        node_address = f"127.0.0.1:{line.strip().removeprefix('port=')}"

        def lost() -> list[dict[str, Any]]:
            return [
                entry
                for entry in log_lines(log)
                if entry["message"].startswith("buffer node ")
            ]

        time.sleep(1.5)  # registered and reporting: a live node is no loss
        assert lost() == []
        node.send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        assert wait_until(lambda: lost() != [], timeout=10), log.read_text()
        entry = lost()[0]
        assert entry["level"] == "warning"
        assert entry["node"] == node_address
        assert f"buffer node 0 ({node_address})" in entry["message"]
        if how == "killed":
            assert "disconnected" in entry["message"]
        else:
            silent = re.search(
                r"stopped reporting \(silent for ([0-9.]+) s", entry["message"]
            )
            assert silent, entry["message"]
            assert float(silent.group(1)) >= 1.0, "not before the lease has passed"
    finally:
        if node.poll() is None:
            node.send_signal(signal.SIGCONT)
            node.kill()
        node.wait(timeout=10)
        stop_daemon(daemon)
