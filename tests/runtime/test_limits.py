"""The daemons' resource limits (docs/limits.md): more connections than descriptors, idle and
stalled connections, frames announced and never sent, clients that never read their replies.
Each test starts its daemon itself (by PID) and stops it; loopback and Unix sockets only."""

import os
import select
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from bbio_support import BUILD
from harmonia.sockets import accepting
from proc_support import cpu_seconds, proc_status
from schedd_support import SCHEDD, frame, register_frame, status, wait_until

BBD = BUILD / "src" / "bbd" / "harmonia-bbd"
BBCTL = BUILD / "src" / "bbd" / "harmonia-bbctl"
pytestmark = pytest.mark.skipif(
    not (BBD.is_file() and SCHEDD.is_file()), reason="the daemons are not built"
)

# Descriptors the daemons get in the descriptor tests: the tests open more connections than that.
FILES = 64


def _limited(command: list[str], files: int | None) -> list[str]:
    """`command` run with at most `files` descriptors (soft and hard limit)."""
    return (
        ["prlimit", f"--nofile={files}:{files}", "--", *command] if files else command
    )


@contextmanager
def _node(
    tmp_path: Path, *args: str, files: int | None = None
) -> Iterator[tuple[int, str]]:
    """harmonia-bbd on 127.0.0.1: (pid, HOST:PORT); killed by its PID at the end."""
    for name in ("dev", "pfs"):
        (tmp_path / name).mkdir(exist_ok=True)
    with open(tmp_path / "bbd.log", "w") as log:
        node = subprocess.Popen(
            _limited([str(BBD), "--device", str(tmp_path / "dev"), "--pfs",
                      str(tmp_path / "pfs"), "--threshold", "1", *args], files),
            stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
    try:
        assert node.stdout is not None
        line = node.stdout.readline()
        assert line.startswith("port="), (tmp_path / "bbd.log").read_text()
        yield node.pid, f"127.0.0.1:{line.strip().removeprefix('port=')}"
        assert node.poll() is None, (
            "the node is still up: " + (tmp_path / "bbd.log").read_text()
        )
    finally:
        node.kill()
        node.wait(timeout=10)


def _bbctl(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BBCTL), "--node", address, *args],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip


def _connect(address: str, stack: ExitStack) -> socket.socket:
    host, port = address.split(":")
    connection = stack.enter_context(
        socket.create_connection((host, int(port)), timeout=5)
    )
    return connection


def _closed_within(connection: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the peer closed `connection` within `seconds`, and what it sent before."""
    got = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([connection], [], [], deadline - time.monotonic())
        if not ready:
            break
        try:
            piece = connection.recv(65536)
        except ConnectionResetError:
            return True, got
        if not piece:
            return True, got
        got += piece
    return False, got


def test_a_node_past_its_descriptors_refuses_and_keeps_serving(tmp_path: Path) -> None:
    # --max-connections above the descriptors: accept itself runs out (EMFILE).
    with (
        ExitStack() as stack,
        _node(tmp_path, "--max-connections", "1000", files=FILES) as (
            pid,
            address,
        ),
    ):
        held = [_connect(address, stack) for _ in range(2 * FILES)]
        assert wait_until(lambda: len(os.listdir(f"/proc/{pid}/fd")) >= FILES - 2, 5)
        print(f"\nbbd, {FILES} descriptors, {len(held)} connections, --max-connections 1000:"
              f" {proc_status(pid, 'Threads')} threads, RSS {proc_status(pid, 'VmRSS')} KiB")  # fmt: skip
        refused = [_closed_within(c, 0.05) for c in held[-FILES // 2 :]]
        assert any(b"out of file descriptors" in got for _, got in refused), refused
        for connection in held:
            connection.close()
        assert wait_until(lambda: _bbctl(address, "status").returncode == 0, 10)
    assert "accept: Too many open files" in (tmp_path / "bbd.log").read_text()


def test_a_node_refuses_connections_past_max_connections(tmp_path: Path) -> None:
    # By default a node serves at most half its descriptors (here 32) and refuses the rest.
    with ExitStack() as stack, _node(tmp_path, files=FILES) as (pid, address):
        held = [_connect(address, stack) for _ in range(FILES)]
        refused = _bbctl(address, "status")
        assert refused.returncode != 0
        assert "too many connections (at most 32, --max-connections)" in refused.stderr
        print(f"\nbbd, {FILES} descriptors, {FILES} connections: {proc_status(pid, 'Threads')}"
              f" threads, {len(os.listdir(f'/proc/{pid}/fd'))} descriptors open,"
              f" RSS {proc_status(pid, 'VmRSS')} KiB")  # fmt: skip
        assert proc_status(pid, "Threads") <= 2 * 32 + 8
        for connection in held:
            connection.close()
        assert wait_until(lambda: _bbctl(address, "status").returncode == 0, 10)
    assert "refused" in (tmp_path / "bbd.log").read_text()


def test_idle_and_stalled_connections_time_out(tmp_path: Path) -> None:
    with (
        ExitStack() as stack,
        _node(tmp_path, "--idle-timeout", "0.5") as (pid, address),
    ):
        assert _bbctl(address, "status").returncode == 0  # the node is all started
        time.sleep(0.1)
        threads = proc_status(pid, "Threads")
        idle = [_connect(address, stack) for _ in range(40)]
        stalled = _connect(address, stack)
        stalled.sendall(struct.pack(">I", 1000) + b"x" * 10)  # a frame cut short
        assert wait_until(lambda: proc_status(pid, "Threads") >= threads + 80, 5)
        print(f"\nbbd, 41 connections: {proc_status(pid, 'Threads')} threads (idle: {threads}),"
              f" RSS {proc_status(pid, 'VmRSS')} KiB")  # fmt: skip
        assert _closed_within(stalled, 3)[0], "a sender stalled mid-frame is dropped"
        assert all(_closed_within(c, 1)[0] for c in idle), "idle connections are closed"
        assert wait_until(lambda: proc_status(pid, "Threads") <= threads, 5), (
            "threads end"
        )
        # A client that keeps talking is not cut off (each pause is below the timeout).
        busy = _connect(address, stack)
        for _ in range(4):
            time.sleep(0.3)
            busy.sendall(struct.pack(">I", 2) + b"\x2a\x00")  # Request{status: {}}
            header = busy.recv(4, socket.MSG_WAITALL)
            assert len(header) == 4
            busy.recv(struct.unpack(">I", header)[0], socket.MSG_WAITALL)


def test_frames_announced_and_not_sent_take_no_memory(tmp_path: Path) -> None:
    with ExitStack() as stack, _node(tmp_path) as (pid, address):
        before = proc_status(pid, "VmRSS")
        connections = [_connect(address, stack) for _ in range(40)]
        for connection in connections:
            connection.sendall(
                struct.pack(">I", 16 << 20)
            )  # 16 MiB announced, nothing sent
        time.sleep(0.5)
        grown = proc_status(pid, "VmHWM") - before
        print(
            f"\nbbd, 40 frames of 16 MiB announced: RSS {before} KiB, peak +{grown} KiB"
        )
        assert grown < 32 * 1024, (
            f"RSS grew by {grown} KiB for 40 announced 16 MiB frames"
        )
        assert _bbctl(address, "status").returncode == 0


STATUS_REQUEST = frame(b"\x08\x01\x5a\x00")  # Envelope{seq: 1, status_request: {}}


@contextmanager
def _scheduler(
    tmp_path: Path, *args: str, files: int | None = None
) -> Iterator[tuple[int, Path]]:
    address = tmp_path / "schedd.sock"
    with open(tmp_path / "schedd.log", "w") as log:
        daemon = subprocess.Popen(
            _limited([str(SCHEDD), "--socket", str(address), "--lease", "60", *args], files),
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    try:
        # Accepting, not only bound: a connect between the daemon's bind and listen is refused.
        assert wait_until(lambda: accepting(address), 10), (
            tmp_path / "schedd.log"
        ).read_text()
        yield daemon.pid, address
        assert daemon.poll() is None, (tmp_path / "schedd.log").read_text()
    finally:
        daemon.kill()
        daemon.wait(timeout=10)


def _unix(address: Path, stack: ExitStack) -> socket.socket:
    connection = stack.enter_context(socket.socket(socket.AF_UNIX))
    connection.settimeout(5)
    connection.connect(str(address))
    return connection


def test_the_scheduler_past_its_descriptors_does_not_spin(tmp_path: Path) -> None:
    with ExitStack() as stack, _scheduler(tmp_path, files=FILES) as (pid, address):
        held = []
        for _ in range(2 * FILES):
            try:
                held.append(_unix(address, stack))
            except OSError:  # the backlog is full: the daemon does not take more
                break
        time.sleep(0.3)
        cpu = cpu_seconds(pid)
        time.sleep(1)
        spent = cpu_seconds(pid) - cpu
        print(f"\nschedd, {FILES} descriptors, {len(held)} connections: {spent:.2f} s CPU in 1 s,"
              f" RSS {proc_status(pid, 'VmRSS')} KiB")  # fmt: skip
        assert spent < 0.1, "the daemon waits, it does not busy-loop"
        for connection in held:
            connection.close()
        assert wait_until(lambda: "strategy" in status(address), 10)
    assert "accept: Too many open files" in (tmp_path / "schedd.log").read_text()


def _flood(address: Path, stack: ExitStack, requests: int) -> None:
    """A client that sends `requests` status requests and never reads a reply."""
    connection = _unix(address, stack)
    connection.setblocking(False)
    pending = STATUS_REQUEST * requests
    deadline = time.monotonic() + 2
    while pending and time.monotonic() < deadline:
        try:
            pending = pending[connection.send(pending) :]
        except BlockingIOError:
            time.sleep(0.01)


@pytest.mark.parametrize("cap", [None, "16M"])
def test_clients_that_never_read_do_not_grow_the_scheduler(
    tmp_path: Path, cap: str | None
) -> None:
    args = ["--max-output", cap] if cap else []
    with ExitStack() as stack, _scheduler(tmp_path, *args) as (pid, address):
        for k in range(40):  # 40 jobs with long keys: a Status reply of about 30 KB
            job = _unix(address, stack)
            job.sendall(register_frame(f"{k:03d}" + "j" * 250))
            assert len(job.recv(4, socket.MSG_WAITALL)) == 4
        before = proc_status(pid, "VmRSS")
        for _ in range(12):
            _flood(address, stack, requests=3000)  # 30 MB of replies each, unread
        time.sleep(0.5)
        grown = proc_status(pid, "VmHWM") - before
        print(f"\nschedd, 12 clients not reading (--max-output {cap or '256M'}): RSS {before} KiB,"
              f" peak +{grown} KiB")  # fmt: skip
        assert grown < 80 * 1024, f"RSS grew by {grown} KiB"
        assert len(status(address)["jobs"]) == 40
    if cap:
        dropped = [line for line in (tmp_path / "schedd.log").read_text().splitlines()
                   if "bytes of replies unread" in line]  # fmt: skip
        assert dropped and f"(uid {os.getuid()}, node local)" in dropped[0], dropped


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            [BBD, "--listen", "127.0.0.1:99999"],
            "--listen 127.0.0.1:99999: port 99999 out of range",
        ),
        (
            [BBD, "--max-connections", "-1"],
            "--max-connections -1: must be from 0 to 1048576",
        ),
        ([BBD, "--idle-timeout", "-1"], "--idle-timeout -1: must be from 0 to 86400"),
        (
            [SCHEDD, "--tcp", "127.0.0.1:65536"],
            "tcp 127.0.0.1:65536: port 65536 out of range",
        ),
        ([SCHEDD, "--buffers", "-1"], "--buffers -1: must be from 0 to 4096, got -1"),
        (
            [SCHEDD, "--buffers", "100000000"],
            "--buffers 100000000: must be from 0 to 4096",
        ),
        (
            [SCHEDD, "--pfs-servers", "65537"],
            "--pfs-servers 65537: must be from 1 to 65536",
        ),
        (
            [SCHEDD, "--max-output", "1K"],
            "--max-output 1K: must be at least 1M, got 1K",
        ),
    ],
)
def test_bad_ports_and_counts(
    tmp_path: Path, command: list[Path | str], expected: str
) -> None:
    program, *args = command
    if program == BBD:
        args += ["--device", str(tmp_path), "--pfs", str(tmp_path)]
    else:
        args += ["--socket", str(tmp_path / "s.sock")]
    done = subprocess.run(
        [str(program), *args], capture_output=True, text=True, timeout=20, check=False
    )
    assert done.returncode != 0 and expected in done.stderr, done.stderr
    assert "bad_alloc" not in done.stderr
    assert not (tmp_path / "s.sock").exists()
