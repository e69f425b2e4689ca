"""Stand-ins for the prefetched-read tests: a scheduler daemon speaking control.proto on a unix
socket and buffer nodes speaking bb.proto on loopback TCP, both in Python threads, recording what
libharmonia sends them. The protobuf messages are encoded by hand (only the fields the tests use):
frames are a 4-byte big-endian length, then the message."""

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wire_support import read_varint, varint

Fields = dict[int, list[Any]]

# control.proto Envelope bodies
REGISTER, REGISTERED, PHASE_BEGIN, PHASE_END = 2, 3, 4, 5
FLUSH_REQUEST, FLUSH_DONE, HEARTBEAT, UNREGISTER, DIRECTIVE = 6, 7, 8, 9, 10
SETTLE_FILE, SETTLE_STARTED, SETTLE_DONE, ANNOUNCE_READ = 18, 19, 21, 25
# bb.proto
BB_WRITE, BB_READ, BB_DRAIN, BB_STATUS, BB_AUTHENTICATE = 2, 3, 4, 5, 6
OK, NOT_HELD, ERROR = 0, 2, 4


def encode(*items: tuple[int, Any]) -> bytes:
    """A message from (field number, value) pairs: int (varint), float (double), bytes or str
    (length-delimited); a list repeats the field."""
    out = bytearray()
    for number, value in items:
        for one in value if isinstance(value, list) else [value]:
            if isinstance(one, (bool, int)):
                out += varint(number << 3) + varint(int(one))
            elif isinstance(one, float):
                out += varint(number << 3 | 1) + struct.pack("<d", one)
            else:
                data = one.encode() if isinstance(one, str) else one
                out += varint(number << 3 | 2) + varint(len(data)) + data
    return bytes(out)


def decode(data: bytes) -> Fields:
    fields: Fields = {}
    at = 0
    while at < len(data):
        key, at = read_varint(data, at)
        kind = key & 7
        value: Any
        if kind == 0:
            value, at = read_varint(data, at)
        elif kind == 1:
            value = data[at : at + 8]
            at += 8
        elif kind == 2:
            length, at = read_varint(data, at)
            value = data[at : at + length]
            at += length
        elif kind == 5:
            value = data[at : at + 4]
            at += 4
        else:
            raise ValueError(f"wire type {kind}")
        fields.setdefault(key >> 3, []).append(value)
    return fields


def first(fields: Fields, number: int, default: Any = 0) -> Any:
    return fields.get(number, [default])[0]


def receive_frame(sock: socket.socket) -> bytes | None:
    header = receive_exactly(sock, 4)
    if header is None:
        return None
    return receive_exactly(sock, struct.unpack(">I", header)[0])


def receive_exactly(sock: socket.socket, length: int) -> bytes | None:
    data = b""
    while len(data) < length:
        try:
            chunk = sock.recv(length - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def send_frame(sock: socket.socket, body: bytes) -> None:
    sock.sendall(struct.pack(">I", len(body)) + body)


def serve_each(
    server: socket.socket,
    lock: threading.Lock,
    clients: list[socket.socket],
    serve: Callable[[socket.socket, int], None],
    closing: Callable[[], bool] = lambda: False,
) -> None:
    """Accepts connections until `server` is closed or `closing()`: records each in `clients`
    (under `lock`) and serves it on a thread of its own, with its number (from 1)."""
    while not closing():
        try:
            client, _ = server.accept()
        except OSError:
            return
        with lock:
            clients.append(client)
            number = len(clients)
        threading.Thread(target=serve, args=(client, number), daemon=True).start()


def messages(client: socket.socket) -> Iterator[Fields]:
    """Each frame `client` sends, decoded, until it closes the connection (closed here then)."""
    while True:
        frame = receive_frame(client)
        if frame is None:
            client.close()
            return
        yield decode(frame)


@dataclass
class Grant:
    """What the fake daemon grants a read phase."""

    nodes: list[str]
    stripe: int
    read_files: list[str]
    await_first: float = (
        0.0  # seconds the phase waits (await_grant) before the grant is pushed
    )


def directive(grant: Grant | None, waiting: bool = False) -> bytes:
    if grant is None:
        return encode((1, 0), (2, 1), (5, 1))
    items: list[tuple[int, Any]] = [(1, 0), (2, 1), (5, 2), (6, 1), (10, "job")]
    if waiting:
        items.append((9, 1))
    else:
        items += [(7, grant.nodes), (8, grant.stripe), (11, grant.read_files)]
    return encode(*items)


@dataclass
class Event:
    kind: str
    at: float
    fields: Fields
    connection: int


class FakeSchedd:
    """A scheduler daemon on `path`: registers every process, records its requests, answers
    each with the job's directive; a read phase (PhaseBegin.read) is granted `grant`."""

    def __init__(self, path: Path, grant: Grant | None) -> None:
        self.path = path
        self.grant = grant
        self.events: list[Event] = []
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen(16)
        self.closing = False
        threading.Thread(
            target=serve_each,
            args=(self.server, self.lock, self.connections, self.serve),
            kwargs={"closing": lambda: self.closing},
            daemon=True,
        ).start()

    def kinds(self) -> list[str]:
        with self.lock:
            return [e.kind for e in self.events if e.kind != "heartbeat"]

    def of_kind(self, kind: str) -> list[Event]:
        with self.lock:
            return [e for e in self.events if e.kind == kind]

    def drop_connections(self) -> None:
        """Closes every connection, as a daemon that restarts does."""
        with self.lock:
            for connection in self.connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # closed already

    def serve(self, client: socket.socket, number: int) -> None:
        names = {
            REGISTER: "register",
            PHASE_BEGIN: "phase_begin",
            PHASE_END: "phase_end",
            FLUSH_REQUEST: "flush_request",
            FLUSH_DONE: "flush_done",
            HEARTBEAT: "heartbeat",
            UNREGISTER: "unregister",
            SETTLE_FILE: "settle_file",
            SETTLE_DONE: "settle_done",
            ANNOUNCE_READ: "announce_read",
        }
        send_lock = threading.Lock()
        # The process's directive, the reply to every request: granted while in its read phase.
        current = [directive(None)]

        def reply(seq: int, body: int, message: bytes) -> None:
            with send_lock:
                try:
                    send_frame(client, encode((1, seq), (body, message)))
                except OSError:
                    pass

        def grant_later(grant: Grant) -> None:
            time.sleep(grant.await_first)
            with send_lock:
                if current[0] != directive(grant, waiting=True):
                    return  # the phase ended meanwhile
                current[0] = directive(grant)
            reply(0, DIRECTIVE, current[0])

        for envelope in messages(client):
            seq = first(envelope, 1)
            body = next(n for n in envelope if n != 1)
            message = decode(first(envelope, body, b""))
            with self.lock:
                self.events.append(
                    Event(names.get(body, str(body)), time.time(), message, number)
                )
            if body == PHASE_BEGIN and first(message, 4) and self.grant is not None:
                waiting = self.grant.await_first > 0
                current[0] = directive(self.grant, waiting=waiting)
                if waiting:
                    threading.Thread(
                        target=grant_later, args=(self.grant,), daemon=True
                    ).start()
            elif body == PHASE_END:
                current[0] = directive(None)
            if body == REGISTER:
                reply(seq, REGISTERED, encode((1, 1), (2, 10.0), (3, current[0])))
            elif body == SETTLE_FILE:
                reply(seq, SETTLE_STARTED, encode((1, seq), (2, 0), (3, current[0])))
            else:
                reply(seq, DIRECTIVE, current[0])

    def close(self) -> None:
        self.closing = True
        self.server.close()
        self.drop_connections()


@dataclass
class ReadRequest:
    file: str
    offset: int
    length: int
    identity: dict[str, int]


@dataclass
class FakeNode:
    """A buffer node on loopback TCP: answers each Read with `answer(request)` (its code and
    bytes), records it, and answers everything else OK."""

    answer: Callable[[ReadRequest], tuple[int, bytes]]
    reads: list[ReadRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.server = socket.socket(socket.AF_INET)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.lock = threading.Lock()
        self.clients: list[socket.socket] = []
        threading.Thread(
            target=serve_each,
            args=(self.server, self.lock, self.clients, self.serve),
            daemon=True,
        ).start()

    def serve(self, client: socket.socket, _number: int) -> None:
        for request in messages(client):
            seq = first(request, 1)
            code, data = OK, b""
            if BB_READ in request:
                read = decode(first(request, BB_READ))
                seen = decode(first(read, 4, b""))
                identity = {
                    name: first(seen, number)
                    for number, name in enumerate(
                        ("size", "mtime_ns", "ctime_ns", "inode"), 1
                    )
                }
                got = ReadRequest(
                    first(read, 1, b"").decode(),
                    first(read, 2),
                    first(read, 3),
                    identity if 4 in read else {},
                )
                with self.lock:
                    self.reads.append(got)
                code, data = self.answer(got)
            try:
                send_frame(client, encode((1, seq), (2, code), (4, data)))
            except OSError:
                return

    def close(self) -> None:
        self.server.close()
        with self.lock:
            for client in self.clients:
                try:
                    client.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
