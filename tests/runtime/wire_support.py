"""The daemons' wire format by hand (protobuf varints and fields, 4-byte frames), for the tests
that speak it as a client the daemons did not write: an attacker, or a malformed peer."""

import socket
import struct


def varint(value: int) -> bytes:
    """`value` as a varint (a negative one as its 64-bit two's complement, as protobuf does)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` in `data`, and where it ends."""
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


# --- a few protobuf fields by hand: the tests speak the wire format the daemons read ---------


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def seq(n: int) -> bytes:
    """Field 1 as a varint: the `seq` of a bb.proto Request and of a control Envelope."""
    return varint(1 << 3) + varint(n)


def decode(body: bytes) -> dict[int, int | bytes]:
    """A message's varint and length-delimited fields by number (the last of each)."""
    fields: dict[int, int | bytes] = {}
    at = 0
    while at < len(body):
        key, at = read_varint(body, at)
        kind = key & 7
        if kind == 0:
            fields[key >> 3], at = read_varint(body, at)
        elif kind == 2:
            length, at = read_varint(body, at)
            fields[key >> 3] = body[at : at + length]
            at += length
        else:
            raise AssertionError(f"unexpected wire type {kind}")
    return fields


def frame(body: bytes) -> bytes:
    """`body` behind its 4-byte big-endian length, as the daemons frame every message."""
    return struct.pack(">I", len(body)) + body


def receive(sock: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes; fails the test when the daemon closes the connection first."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the daemon closed the connection"
        data += chunk
    return data


def call(sock: socket.socket, body: bytes) -> dict[int, int | bytes]:
    """Sends one framed request and returns the reply's fields."""
    sock.sendall(frame(body))
    header = receive(sock, 4)
    return decode(receive(sock, struct.unpack(">I", header)[0]))


def connect(address: str) -> socket.socket:
    """A connection to HOST:PORT, or to a Unix socket's path."""
    if address.startswith("/"):
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(10)
        sock.connect(address)
        return sock
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


# bb.proto: Request{seq=1, write=2, read=3, drain=4, status=5, authenticate=6};
# Response{code=2 (OK 0, FORBIDDEN 6, UNAUTHENTICATED 7), message=3, data=4, uid=6}.
BB_OK, BB_FORBIDDEN, BB_UNAUTHENTICATED = 0, 6, 7
# A write's raw payload follows its frame (Write.payload, at most 16 MiB).
MAX_PAYLOAD = 16 << 20


def bb_authenticate(credential: bytes) -> bytes:
    return seq(1) + field(6, field(1, credential))


def bb_write(file: str, data: bytes) -> bytes:
    return seq(2) + field(2, field(1, file.encode()) + field(3, data))


def bb_write_payload(file: str, length: int) -> bytes:
    """A write whose `length` bytes follow its frame, raw (Write.payload)."""
    return seq(2) + field(2, field(1, file.encode()) + varint(5 << 3) + varint(length))


def bb_read(file: str, length: int) -> bytes:
    return seq(3) + field(3, field(1, file.encode()) + varint(3 << 3) + varint(length))


def bb_drain(file: str) -> bytes:
    """A drain of `file`; of every file the connection's user may drain when empty."""
    return seq(4) + field(4, field(1, file.encode()) if file else b"")


def bb_status() -> bytes:
    return seq(5) + field(5, b"")
