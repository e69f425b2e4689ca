"""Helpers for tests of harmonia-schedd and the agent: a daemon on a temporary socket, and jobs
that write under libharmonia."""

import hashlib
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bbio_support import BUILD, LIBRARY
from harmonia.sockets import accepting

SCHEDD = BUILD / "src" / "schedd" / "harmonia-schedd"
SCHEDCTL = BUILD / "src" / "schedd" / "harmonia-schedctl"
WRITER = Path(__file__).with_name("slow_writer.py")
STEPPED_WRITER = Path(__file__).with_name("stepped_writer.py")


def frame(body: bytes) -> bytes:
    """One message of the control protocol: its 4-byte big-endian length, then its bytes."""
    return struct.pack(">I", len(body)) + body


def _length_delimited(number: int, content: bytes) -> bytes:
    length, out = len(content), bytearray([number << 3 | 2])
    while length >= 0x80:
        out.append(length & 0x7F | 0x80)
        length >>= 7
    return bytes(out + bytes([length])) + content


def register_frame(job: str) -> bytes:
    """Envelope{seq: 1, register_process: {protocol_version: 1, job, name: job, ranks: 1}},
    framed: a process's first request, encoded by hand (no protoc needed)."""
    body = (
        b"\x08\x01"
        + _length_delimited(2, job.encode())
        + _length_delimited(3, job.encode())
    )
    return frame(b"\x08\x01" + _length_delimited(2, body + b"\x28\x01"))


def start_daemon(address: Path, *args: str) -> subprocess.Popen[str]:
    daemon = subprocess.Popen(
        [str(SCHEDD), "--socket", str(address), "--tick", "0.01", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return wait_listening(daemon, address, "harmonia-schedd")


def wait_listening(
    process: subprocess.Popen[str], address: Path, name: str
) -> subprocess.Popen[str]:
    """`process` once it accepts connections on `address`; killed, and the test failed, if
    it exits first or is not listening within 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if accepting(address):
            return process
        if process.poll() is not None:
            raise AssertionError(
                f"{name} exited: {process.stderr.read() if process.stderr else ''}"
            )
        time.sleep(0.02)
    process.kill()
    raise AssertionError(f"{name} did not start listening")


def stop_daemon(daemon: subprocess.Popen[str], hard: bool = False) -> None:
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
    daemon.wait(timeout=10)


@contextmanager
def running_daemon(address: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    daemon = start_daemon(address, *args)
    try:
        yield daemon
    finally:
        stop_daemon(daemon)


@contextmanager
def munge_daemon(address: Path, munge_socket: str) -> Iterator[str]:
    """harmonia-schedd --auth munge (the munged at `munge_socket`) on `address` and on a
    loopback TCP port of its own, which it names on its first line; that port's HOST:PORT."""
    daemon = subprocess.Popen(
        [str(SCHEDD), "--socket", str(address), "--tcp", "127.0.0.1:0", "--auth", "munge",
         "--munge-socket", munge_socket, "--tick", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert daemon.stdout is not None
    line = daemon.stdout.readline()
    assert line.startswith("tcp_port="), daemon.stderr.read() if daemon.stderr else ""
    try:
        yield f"127.0.0.1:{line.strip().removeprefix('tcp_port=')}"
    finally:
        daemon.terminate()
        _, err = daemon.communicate(timeout=10)
        print(err)  # shown with a failing test's output


def status(address: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(SCHEDCTL), "--address", str(address), "status", "--compact"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def job_env(address: Path, job: str, **extra: str) -> dict[str, str]:
    """A job's environment. The daemon may take 10 s to answer before a job gives it up and
    writes through (1 s by default): on a loaded machine a daemon slow for a second must not
    release a job a test holds in line. Tests of a hung daemon or agent set their own."""
    return {
        **os.environ,
        "LD_PRELOAD": str(LIBRARY.resolve()),
        "HARMONIA_SCHEDD": str(address),
        "HARMONIA_JOB": job,
        "HARMONIA_SCHEDD_TIMEOUT": "10",
        **extra,
    }


def start_writer(
    address: Path,
    job: str,
    path: Path,
    chunks: int,
    pause: float,
    hold: float = 0.0,
    **extra: str,
) -> subprocess.Popen[str]:
    """A job writing `chunks` 1 MB chunks to `path`, `pause` seconds apart, then computing `hold`
    seconds before closing it; it prints a JSON line of wall-clock times (open, writes done,
    close done)."""
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(path), str(chunks), str(pause), str(hold)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=job_env(address, job, **extra),
    )


def finish(writer: subprocess.Popen[str], timeout: float = 30) -> dict[str, Any]:
    out, err = writer.communicate(timeout=timeout)
    assert writer.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    result["stderr"] = err
    return result


def expected_bytes(chunks: int) -> bytes:
    return b"".join(bytes([65 + k % 26]) * 1_000_000 for k in range(chunks))


def wait_until(predicate: Any, timeout: float = 10, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


class SteppedWriter:
    """stepped_writer.py under libharmonia as job `job` (with `extra` environment): writes a
    chunk when told, and waits with the file open in between. Its open registers it with the
    daemon, so a test can wait for that before it writes: a write made while the registration
    is still under way (more than a second on a loaded machine) goes straight through."""

    def __init__(self, address: Path, job: str, path: Path, **extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(STEPPED_WRITER), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=job_env(address, job, **extra),
        )
        self.expect("opened")

    def expect(self, line: str) -> None:
        assert self.process.stdout is not None
        got = self.process.stdout.readline().strip()
        assert got == line, f"writer said {got!r}, not {line!r}"

    def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def command(self, line: str, reply: str) -> None:
        self.tell(line)
        self.expect(reply)

    def write(self, k: int) -> None:
        self.command(f"write {k}", f"wrote {k}")

    def write_chunks(self, count: int) -> None:
        """Chunks 0 to count - 1: what a slow_writer.py of `count` chunks writes."""
        for k in range(count):
            self.write(k)

    def start_close(self) -> None:
        self.tell("close")

    def closed_within(self, seconds: float) -> bool:
        """Whether the close started with start_close has returned within `seconds`."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], seconds)
        if not ready:
            return False
        self.expect("closed")
        return True

    def finish(self) -> str:
        """Waits for its end after its close; returns its stderr."""
        _, err = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, err
        return err

    def close(self) -> str:
        self.command("close", "closed")
        return self.finish()

    def kill(self) -> None:
        """Ends it if the test stopped before its close."""
        if self.process.returncode is None:
            self.process.kill()
            self.process.communicate(timeout=10)


class PhaseKeeper:
    """Keeps a SteppedWriter in its I/O phase while a test waits: `wait(predicate)` writes the
    writer's next chunk every 0.1 s until the predicate holds (at most 30 s)."""

    def __init__(self, writer: SteppedWriter) -> None:
        self.writer = writer
        self.chunks_written = 0

    def wait(self, predicate: Callable[[], bool], timeout: float = 30) -> bool:
        return keep_writing([self], predicate, timeout)

    def write_next(self) -> None:
        self.writer.write(self.chunks_written)
        self.chunks_written += 1

    def keep(self, seconds: float) -> None:
        """Writes on for `seconds`."""
        self.wait(lambda: False, timeout=seconds)


def keep_writing(
    keepers: list[PhaseKeeper], predicate: Callable[[], bool], timeout: float = 30
) -> bool:
    """Each keeper's writer writes its next chunk every 0.1 s until `predicate` holds (at most
    `timeout` seconds): they stay in their phase however slow the machine is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        for keeper in keepers:
            keeper.write_next()
        time.sleep(0.1)
    return False


@contextmanager
def kept_in_phase(address: Path, job: str, path: Path) -> Iterator[PhaseKeeper]:
    """Job `job` writing to `path` (a SteppedWriter), once the daemon at `address` sees it in
    its I/O phase; a PhaseKeeper keeps it there while the block waits. Killed at the end unless
    the block closed it (`keeper.writer.close()`, which ends its phase)."""
    # Its phase lasts until its close, or 10 s without a write: a test driver stalled for a
    # second on a loaded machine does not end it.
    writer = SteppedWriter(address, job, path, HARMONIA_PHASE_GAP="10")
    try:
        keeper = PhaseKeeper(writer)
        assert keeper.wait(
            lambda: any(
                j["job"] == job and j["in_phase"] == 1 for j in status(address)["jobs"]
            )
        ), f"{job} in its phase"
        yield keeper
    finally:
        writer.kill()


HASHING_READER = (
    "import hashlib, sys; data = open(sys.argv[1], 'rb').read(); "
    "print(len(data), hashlib.sha256(data).hexdigest())"
)


def read_while_busy(
    busy: PhaseKeeper, path: Path, env: dict[str, str], chunks: int, why: str
) -> None:
    """Reads `path` whole in another process (with `env`) while `busy` keeps its writer in its
    phase, and checks that it read what a writer of `chunks` chunks wrote; `why` names what a
    read that never ends would mean."""
    reading = subprocess.Popen(
        [sys.executable, "-c", HASHING_READER, str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert busy.wait(lambda: reading.poll() is not None), why
        out, err = reading.communicate(timeout=10)
    finally:
        if reading.poll() is None:
            reading.kill()
            reading.communicate(timeout=10)
    assert reading.returncode == 0, err
    expected = expected_bytes(chunks)
    assert out.split() == [str(len(expected)), hashlib.sha256(expected).hexdigest()]
