"""harmonia-bbd, a buffer node: ingest, reads of held data, drains, recovery after kill -9, a
full device, malformed input (docs/buffer-nodes.md)."""

import json
import random
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from bbio_support import BUILD

BBD = BUILD / "src" / "bbd" / "harmonia-bbd"
BBCTL = BUILD / "src" / "bbd" / "harmonia-bbctl"
pytestmark = pytest.mark.skipif(not BBD.is_file(), reason="harmonia-bbd is not built")


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    (tmp_path / "dev").mkdir(exist_ok=True)
    (tmp_path / "pfs").mkdir(exist_ok=True)
    node = subprocess.Popen(
        [str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(tmp_path / "pfs"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert node.stdout is not None
    line = node.stdout.readline()
    assert line.startswith("port="), node.stderr.read() if node.stderr else ""
    return node, f"127.0.0.1:{line.strip().removeprefix('port=')}"


def ctl(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BBCTL), "--node", address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def status(address: str) -> dict[str, str]:
    result: dict[str, str] = json.loads(ctl(address, "status").stdout)
    return result


def test_write_read_and_drain(tmp_path: Path) -> None:
    data = random.Random(1).randbytes(3_000_000)
    (tmp_path / "src").write_bytes(data)
    node, address = start(tmp_path, "--capacity", "64M", "--threshold", "1")
    try:
        put = ctl(
            address, "put", "run/out.dat", str(tmp_path / "src"), "--chunk", "250000"
        )
        assert put.returncode == 0 and json.loads(put.stdout)["acknowledged"] == len(
            data
        )
        assert status(address)["used"] == str(len(data))
        got = subprocess.run(
            [str(BBCTL), "--node", address, "get", "run/out.dat", "123456", "1000"],
            capture_output=True, check=True,
        )  # fmt: skip
        assert got.stdout == data[123456:124456], "read-after-write from the node"
        assert ctl(address, "get", "run/out.dat", "2999999", "10").returncode == 1, (
            "not held"
        )
        # The first write made the PFS file (as its writer, docs/security.md); no byte yet.
        assert (tmp_path / "pfs" / "run" / "out.dat").stat().st_size == 0, (
            "nothing drained yet"
        )
        assert ctl(address, "drain").returncode == 0
        assert (tmp_path / "pfs" / "run" / "out.dat").read_bytes() == data
        # Only the (empty) directory of staged-in copies is left on the device.
        assert status(address)["used"] == "0" and [
            p.name for p in (tmp_path / "dev").iterdir()
        ] == ["stage-in"]
    finally:
        node.kill()


@pytest.mark.parametrize(
    ("delay", "sync"), [(0.05, "none"), (0.15, "none"), (0.3, "none"), (0.15, "data")]
)
def test_kill_9_loses_nothing_acknowledged(
    tmp_path: Path, delay: float, sync: str
) -> None:
    data = random.Random(2).randbytes(40_000_000)
    (tmp_path / "src").write_bytes(data)
    node, address = start(
        tmp_path, "--capacity", "1G", "--threshold", "1", "--sync", sync
    )
    put = subprocess.Popen(
        [str(BBCTL), "--node", address, "put", "f.dat", str(tmp_path / "src"), "--chunk", "100000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(delay)
    node.send_signal(signal.SIGKILL)
    node.wait()
    out, _ = put.communicate(timeout=60)
    acknowledged = json.loads(out)["acknowledged"]
    node, address = start(tmp_path, "--capacity", "1G", "--threshold", "1")
    try:
        # The recovered log drains on its own: its writer is gone.
        deadline = time.monotonic() + 30
        while status(address)["used"] != "0" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status(address)["used"] == "0", "the recovered log drained"
        assert ctl(address, "drain").returncode == 0
        drained = (tmp_path / "pfs" / "f.dat").read_bytes() if acknowledged else b""
        assert drained[:acknowledged] == data[:acknowledged]
    finally:
        node.kill()


def test_a_full_node_refuses_and_keeps_what_it_holds(tmp_path: Path) -> None:
    data = random.Random(3).randbytes(2_000_000)
    (tmp_path / "src").write_bytes(data)
    node, address = start(tmp_path, "--capacity", "1M", "--threshold", "1")
    try:
        put = ctl(address, "put", "f.dat", str(tmp_path / "src"), "--chunk", "300000")
        assert put.returncode == 3 and "FULL" in put.stderr
        acknowledged = json.loads(put.stdout)["acknowledged"]
        assert acknowledged == 900_000
        assert ctl(address, "drain").returncode == 0
        assert (tmp_path / "pfs" / "f.dat").read_bytes() == data[:acknowledged]
        # A client that drains and goes on where the node stopped it ends with the whole file.
        done = acknowledged
        while done < len(data):
            rest = tmp_path / "rest"
            rest.write_bytes(data[done:])
            more = ctl(address, "put", "f.dat", str(rest), "--offset", str(done),
                       "--chunk", "300000")  # fmt: skip
            assert more.returncode in (0, 3), more.stderr
            done += json.loads(more.stdout)["acknowledged"]
            assert ctl(address, "drain").returncode == 0
        assert (tmp_path / "pfs" / "f.dat").read_bytes() == data
    finally:
        node.kill()


def test_background_drain_at_the_threshold(tmp_path: Path) -> None:
    data = random.Random(4).randbytes(6_000_000)
    (tmp_path / "src").write_bytes(data)
    node, address = start(tmp_path, "--capacity", "10M", "--threshold", "0.5")
    try:
        assert ctl(address, "put", "f.dat", str(tmp_path / "src")).returncode == 0
        deadline = time.monotonic() + 10
        while status(address)["used"] != "0" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "pfs" / "f.dat").read_bytes() == data
    finally:
        node.kill()


def varint(value: int) -> bytes:
    """`value` as a protobuf varint."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def test_bad_names_malformed_and_oversized_frames(tmp_path: Path) -> None:
    (tmp_path / "src").write_bytes(b"x" * 10)
    node, address = start(tmp_path, "--threshold", "1")
    try:
        for name in ("../escape", "/abs", "a/./b", "a//b"):
            bad = ctl(address, "put", name, str(tmp_path / "src"))
            assert bad.returncode == 1 and "INVALID" in bad.stderr, name
        host, port = address.split(":")
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(struct.pack(">I", 5) + b"\xff\xff\xff\xff\xff")
            length = struct.unpack(">I", raw.recv(4, socket.MSG_WAITALL))[0]
            assert b"valid Request" in raw.recv(length, socket.MSG_WAITALL)
            raw.sendall(struct.pack(">I", 1 << 30))
            length = struct.unpack(">I", raw.recv(4, socket.MSG_WAITALL))[0]
            assert b"at most" in raw.recv(length, socket.MSG_WAITALL)
        with socket.create_connection((host, int(port))) as raw:
            # Request{seq: 1, write: {file: "f", payload: 1 GiB}}: a raw payload over the limit.
            write = b"\x0a\x01f\x28" + varint(1 << 30)
            request = b"\x08\x01\x12" + varint(len(write)) + write
            raw.sendall(struct.pack(">I", len(request)) + request)
            length = struct.unpack(">I", raw.recv(4, socket.MSG_WAITALL))[0]
            assert b"at most" in raw.recv(length, socket.MSG_WAITALL)
            assert raw.recv(1) == b"", "the node closes a stream it cannot follow"
        assert node.poll() is None and status(address)["used"] == "0"
    finally:
        node.kill()


def test_bad_arguments(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BBD), "--device", str(tmp_path / "missing"), "--pfs", str(tmp_path)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "missing: not a writable directory" in done.stderr
    size = subprocess.run(
        [str(BBD), "--device", str(tmp_path), "--pfs", str(tmp_path), "--capacity", "lots"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert size.returncode == 2 and "--capacity lots" in size.stderr
    sync = subprocess.run(
        [str(BBD), "--device", str(tmp_path), "--pfs", str(tmp_path), "--sync", "always"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert sync.returncode != 0 and "--sync" in sync.stderr


def write_frame(seq: int, name: str, size: int) -> bytes:
    """Request{seq, write: {file: name, payload: size}}, framed: its `size` bytes follow raw."""
    write = b"\x0a" + varint(len(name)) + name.encode() + b"\x28" + varint(size)
    request = b"\x08" + varint(seq) + b"\x12" + varint(len(write)) + write
    return struct.pack(">I", len(request)) + request


def reply_code(raw: socket.socket) -> int:
    """The code of the next Response on `raw` (field 2; proto3 leaves OK, 0, out)."""
    body = raw.recv(
        struct.unpack(">I", raw.recv(4, socket.MSG_WAITALL))[0], socket.MSG_WAITALL
    )
    at = 0
    while at < len(body):
        tag, value, shift = body[at], 0, 0
        at += 1
        if tag & 7 == 0 or tag & 7 == 2:
            while True:
                value |= (body[at] & 0x7F) << shift
                shift += 7
                at += 1
                if not body[at - 1] & 0x80:
                    break
        if tag == 0x10:
            return value
        if tag & 7 == 2:
            at += value
    return 0


def test_a_payload_cut_off_or_refused_is_never_held(tmp_path: Path) -> None:
    node, address = start(tmp_path, "--capacity", "1G", "--threshold", "1")
    host, port = address.split(":")
    try:
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(write_frame(1, "cut.dat", 1 << 20) + b"c" * (1 << 19))
        with socket.create_connection((host, int(port))) as raw:
            # A refused write's bytes are read and dropped: the next frame is understood.
            raw.sendall(write_frame(1, "../escape", 100_000) + b"r" * 100_000)
            assert reply_code(raw) == 3  # INVALID
            raw.sendall(write_frame(2, "kept.dat", 10) + b"k" * 10)
            assert reply_code(raw) == 0
            # The node killed while the next payload arrives.
            raw.sendall(write_frame(3, "kept.dat", 1 << 20) + b"h" * (1 << 19))
            time.sleep(0.2)
            node.send_signal(signal.SIGKILL)
            node.wait()
        node, address = start(tmp_path, "--capacity", "1G", "--threshold", "1")
        # The recovered log drains on its own (its writer is gone): the whole write only.
        deadline = time.monotonic() + 30
        while status(address)["used"] != "0" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ctl(address, "drain").returncode == 0
        assert (tmp_path / "pfs" / "kept.dat").read_bytes() == b"k" * 10
        assert (
            not (tmp_path / "pfs" / "cut.dat").exists()
            or not (tmp_path / "pfs" / "cut.dat").read_bytes()
        )
    finally:
        node.kill()
