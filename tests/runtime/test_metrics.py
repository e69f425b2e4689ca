"""The daemons' OpenMetrics endpoints, logs and health checks (docs/deploy.md): each scrape
parses with prometheus_client's OpenMetrics parser, and its values move as a job writes through
a buffer node and the node drains; log lines come as JSON with the job, uid and node of each
refusal, reach the journal with their priorities, and below the level set are dropped; `harmonia
ping` and `harmonia status --json` answer scripts."""

import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from bbio_support import BUILD
from harmonia.buffers.cluster import BufferCluster, ClusterSettings
from prometheus_client.openmetrics.parser import text_string_to_metric_families

BBD = BUILD / "src" / "bbd" / "harmonia-bbd"
BBCTL = BUILD / "src" / "bbd" / "harmonia-bbctl"
HARMONIA = Path(sys.executable).with_name("harmonia")
MIB = 1 << 20
REPO = Path(__file__).parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of the endpoint, by name and labels, parsed as OpenMetrics."""
    with urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=10
    ) as answer:
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("harmonia_"), family.name
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def wait_for(check: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_scrapes_parse_and_move_as_a_job_writes_and_the_node_drains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Turned on from the environment, as a unit's environment file would.
    schedd_port, node_port = free_port(), free_port()
    monkeypatch.setenv("HARMONIA_SCHEDD_METRICS", f"127.0.0.1:{schedd_port}")
    monkeypatch.setenv("HARMONIA_BBD_METRICS", f"127.0.0.1:{node_port}")
    settings = ClusterSettings(
        tmp_path, buffers=1, capacity=64 << 20, flush_threshold=1.0
    )
    target = tmp_path / "pfs" / "metrics.dat"
    with BufferCluster(settings) as cluster:
        before = scrape(node_port)
        assert value(before, "harmonia_bbd_used_bytes") == 0
        assert value(before, "harmonia_bbd_capacity_bytes") == 64 << 20
        received = value(before, "harmonia_bbd_received_bytes_total")
        scheduler = scrape(schedd_port)
        assert value(scheduler, "harmonia_schedd_buffer_connected", node="0",
                     address=cluster.status()["buffers"][0]["address"]) == 1  # fmt: skip
        grants = value(scheduler, "harmonia_schedd_phase_wait_seconds_count")
        job = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("small_writer.py")), str(target)],
            env={**os.environ, **cluster.env(), "HARMONIA_JOB": "metrics-job"},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert job.stdout is not None
        assert job.stdout.readline().strip() == "written"
        held = scrape(node_port)
        assert value(held, "harmonia_bbd_received_bytes_total") - received == 4 * MIB
        assert value(held, "harmonia_bbd_used_bytes") == 4 * MIB
        jobs = [labels for (name, labels) in held if name == "harmonia_bbd_held_bytes"]
        assert len(jobs) == 1 and "metrics-job" in dict(jobs[0])["job"], jobs
        scheduler = scrape(schedd_port)
        assert (
            value(scheduler, "harmonia_schedd_phase_wait_seconds_count") == grants + 1
        )
        states = {dict(labels)["state"]: v for (name, labels), v in scheduler.items()
                  if name == "harmonia_schedd_jobs"}  # fmt: skip
        assert sum(states.values()) == 1 and states["in_phase"] == 1, states
        assert value(scheduler, "harmonia_schedd_decision_seconds_count") > 0
        assert value(scheduler, "harmonia_schedd_requests_total") > 0
        out, err = job.communicate("go\n", timeout=60)
        assert job.returncode == 0 and out.strip() == "closed", err
        cluster.wait_drained()
        drained = scrape(node_port)
        assert value(drained, "harmonia_bbd_used_bytes") == 0
        assert value(drained, "harmonia_bbd_drained_bytes_total") == 4 * MIB
        wait_for(
            lambda: sum(v for (name, _), v in scrape(schedd_port).items()
                        if name == "harmonia_schedd_buffer_drained_bytes_total") == 4 * MIB,
            "the scheduler's view of the node's drained bytes did not move",
        )  # fmt: skip
        wait_for(
            lambda: value(scrape(schedd_port), "harmonia_schedd_jobs", state="idle")
            + value(scrape(schedd_port), "harmonia_schedd_jobs", state="in_phase") == 0,
            "the job did not leave",
        )  # fmt: skip
    assert target.read_bytes() == bytes(4 << 20)
    # The Grafana dashboard shipped asks for nothing the daemons do not serve.
    seen = {
        name for scrape_ in (before, held, drained, scheduler) for name, _ in scrape_
    }
    dashboard = json.loads(
        (REPO / "packaging" / "grafana" / "harmonia.json").read_text()
    )
    asked = {name for panel in dashboard["panels"] for target_ in panel["targets"]
             for name in re.findall(r"harmonia_\w+", target_["expr"])}  # fmt: skip
    assert asked and asked <= seen, asked - seen


def test_the_endpoint_is_off_unless_asked_and_a_bad_address_is_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "dev").mkdir()
    node = subprocess.run(
        [str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(tmp_path), "--metrics",
         "127.0.0.1:99999"], capture_output=True, text=True, check=False, timeout=20,
    )  # fmt: skip
    assert node.returncode == 2
    assert (
        "--metrics 127.0.0.1:99999: expected HOST:PORT or PORT (0 to 65535)"
        in node.stderr
    )
    started = subprocess.Popen(
        [str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert started.stdout is not None
        assert started.stdout.readline().startswith("port=")
    finally:
        started.terminate()
        out, _ = started.communicate(timeout=10)
    assert "metrics_port" not in out


def test_the_journal_gets_each_lines_priority_and_levels_drop_lines(
    tmp_path: Path,
) -> None:
    (tmp_path / "dev").mkdir()
    schedd = f"unix:{tmp_path / 'no-scheduler.sock'}"

    def logged(*args: str) -> str:
        """What a node whose scheduler is not there writes to a stream systemd would
        name in JOURNAL_STREAM, until it says it drains on its own."""
        log = tmp_path / "journal"
        with log.open("w") as errors:
            stream = os.fstat(errors.fileno())
            node = subprocess.Popen(
                [str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(tmp_path),
                 "--schedd", schedd, *args], stdout=subprocess.PIPE, stderr=errors, text=True,
                env={**os.environ, "JOURNAL_STREAM": f"{stream.st_dev}:{stream.st_ino}"},
            )  # fmt: skip
        try:
            assert node.stdout is not None
            port = node.stdout.readline().strip().removeprefix("port=")
            wait_for(lambda: "draining at the threshold" in log.read_text(),
                     "the node did not say its scheduler is missing")  # fmt: skip
        finally:
            node.terminate()
            node.wait(timeout=10)
        return log.read_text().replace(port, "PORT")

    everything = logged().splitlines()
    # <6> info, <4> warning: the journal's priorities (journalctl -p warning).
    assert any(
        line.startswith("<6>harmonia-bbd: 0 files recovered") for line in everything
    )
    missing = [line for line in everything if "draining at the threshold" in line]
    assert missing[0].startswith(f"<4>harmonia-bbd: scheduler {schedd}: "), missing
    assert missing[0].endswith("(node 127.0.0.1:PORT)"), missing
    warnings = logged("--log-level", "warning").splitlines()
    assert all(line.startswith("<4>") for line in warnings), warnings
    assert not any("files recovered" in line for line in warnings), warnings


def test_json_logs_name_the_uid_and_node_of_a_refusal(tmp_path: Path) -> None:
    if os.getuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser: the refused client runs as nobody")
    nobody = pwd.getpwnam("nobody").pw_uid
    (tmp_path / "dev").mkdir()
    pfs = tmp_path / "pfs"
    pfs.mkdir(mode=0o755)  # root's: nobody may not create files there
    tmp_path.chmod(0o755)
    # What nobody sends: where nobody can read it (pytest's directories are root's alone).
    shared = Path(tempfile.mkdtemp(prefix="harmonia-refused-"))
    shared.chmod(0o755)
    data = shared / "data"
    data.write_bytes(b"x" * 4096)
    data.chmod(0o644)
    log = tmp_path / "bbd.log"
    with log.open("w") as errors:
        node = subprocess.Popen(
            [str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(pfs), "--log", "json"],
            stdout=subprocess.PIPE, stderr=errors, text=True,
        )  # fmt: skip
    try:
        assert node.stdout is not None
        port = node.stdout.readline().strip().split("=")[1]
        refused = subprocess.run(
            ["runuser", "-u", "nobody", "--", str(BBCTL), "--node", f"127.0.0.1:{port}", "put",
             "denied.dat", str(data)], capture_output=True, text=True, check=False, timeout=20,
        )  # fmt: skip
        assert refused.returncode != 0
        lines: list[dict[str, object]] = []

        def refusal_logged() -> bool:
            lines[:] = [
                json.loads(line) for line in log.read_text().splitlines() if line
            ]
            return any("refused" in str(line["message"]) for line in lines)

        wait_for(refusal_logged, "the refusal was not logged")
    finally:
        node.terminate()
        node.wait(timeout=10)
        shutil.rmtree(shared, ignore_errors=True)
    assert all(
        {"time", "level", "program", "pid", "message"} <= line.keys() for line in lines
    )
    refusal = next(line for line in lines if "refused" in str(line["message"]))
    assert refusal["level"] == "warning" and refusal["program"] == "harmonia-bbd"
    assert refusal["uid"] == nobody and refusal["node"] == f"127.0.0.1:{port}", refusal
    assert not (pfs / "denied.dat").exists()


def test_ping_and_status_answer_scripts(tmp_path: Path) -> None:
    settings = ClusterSettings(tmp_path, buffers=1, capacity=16 << 20)
    with BufferCluster(settings) as cluster:
        node = f"127.0.0.1:{(tmp_path / 'bb0.port').read_text().strip()}"
        env = {**os.environ, "HARMONIA_SCHEDD": str(cluster.socket)}
        ping = subprocess.run(
            [str(HARMONIA), "ping", "--node", node, "--all-nodes", "--json"],
            capture_output=True, text=True, check=False, env=env, timeout=60,
        )  # fmt: skip
        assert ping.returncode == 0, ping.stderr
        answers = json.loads(ping.stdout)
        assert [a["daemon"] for a in answers] == ["harmonia-schedd", "harmonia-bbd"]
        assert (
            answers[0]["buffer_nodes_connected"] == 1
            and answers[1]["capacity"] == 16 << 20
        )
        status = subprocess.run(
            [str(HARMONIA), "status", "--json"], capture_output=True, text=True, check=False,
            env=env, timeout=60,
        )  # fmt: skip
        assert (
            status.returncode == 0
            and json.loads(status.stdout)["policy"] == "max-bandwidth"
        )
        cluster.kill_node(0)
        degraded = subprocess.run(
            [str(HARMONIA), "ping", "--all-nodes"], capture_output=True, text=True,
            check=False, env=env, timeout=60,
        )  # fmt: skip
        assert (
            degraded.returncode == 1 and "0/1 buffer nodes connected" in degraded.stderr
        )
    down = subprocess.run(
        [str(HARMONIA), "ping", "--schedd", str(tmp_path / "gone.sock")], capture_output=True,
        text=True, check=False, timeout=60,
    )  # fmt: skip
    assert down.returncode == 1 and "DOWN" in down.stderr
    status = subprocess.run(
        [str(HARMONIA), "status", "--json", "--schedd", str(tmp_path / "gone.sock")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert status.returncode == 1 and status.stdout == ""


def test_syslog_gets_each_lines_facility_and_priority(tmp_path: Path) -> None:
    """`--log syslog`: each line is a datagram to /dev/log from the daemon facility, with its
    level's priority, the program's name and pid (glibc's syslog(3))."""
    if os.getuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare: /dev/log is replaced in a mount namespace")
    (tmp_path / "dev").mkdir()
    (tmp_path / "host-dev").mkdir()
    schedd = f"unix:{tmp_path / 'no-scheduler.sock'}"
    captured = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable,
         str(Path(__file__).with_name("syslog_capture.py")), str(tmp_path / "host-dev"),
         "draining at the threshold",
         str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(tmp_path),
         "--schedd", schedd, "--log", "syslog"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert captured.returncode == 0, captured.stderr
    lines = captured.stdout.splitlines()
    # LOG_DAEMON (3) * 8 + severity: 6 info, 4 warning.
    recovered = [line for line in lines if "0 files recovered" in line]
    assert recovered and re.match(
        r"<30>.* harmonia-bbd\[\d+\]: 0 files", recovered[0]
    ), lines
    missing = [line for line in lines if "draining at the threshold" in line]
    assert missing and re.match(
        rf"<28>.* harmonia-bbd\[\d+\]: scheduler {re.escape(schedd)}: ", missing[0]
    ), lines
    assert re.search(r"\(node 127\.0\.0\.1:\d+\)$", missing[0]), missing
