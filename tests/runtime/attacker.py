"""What test_attacks.py runs as another user, on this host or a test-bed host, with the standard
library only (it runs under /usr/bin/python3):

    attacker.py hold node|schedd ADDRESS COUNT
        Opens COUNT connections to a buffer node (HOST:PORT) or to harmonia-schedd (a Unix
        socket's path, or HOST:PORT), asks the daemon's status on each, and prints as JSON how many it was
        served on (`held`), how many were refused and the first refusal; then keeps the ones it
        holds until its standard input closes.
    attacker.py push HOST:PORT CONNECTIONS WRITES
        On CONNECTIONS connections at once, without authenticating, sends WRITES writes of
        16 MiB each: raw payloads after their frames on even connections, the bytes inside
        the frame on odd ones. Prints as JSON, for each, the bytes the kernel took (until the
        node closed the connection) and the node's answer.
    attacker.py sockets COUNT
        Makes COUNT loopback TCP connections to a listener of its own (2 x COUNT sockets in
        the kernel's table, none to a daemon), says how many, and keeps them until its
        standard input closes.
    attacker.py knock HOST:PORT COUNT
        COUNT times, one after the other: connects, closes its side at once (the kernel's
        table lists the connection as closing, no longer established, by the time the daemon
        looks), and waits for the daemon to close it too.
    attacker.py hog PATH
        Under libharmonia: declares an I/O phase of 1 TiB (harmonia_io_begin), writes 1 MB to
        PATH, says "in phase", and keeps the phase open until its standard input closes.
"""

import ctypes
import json
import os
import socket
import struct
import sys
import threading

from wire_support import (
    BB_OK,
    BB_UNAUTHENTICATED,
    MAX_PAYLOAD,
    bb_status,
    bb_write,
    bb_write_payload,
    connect,
    decode,
    frame,
)

SCHEDD_STATUS = frame(b"\x08\x01\x5a\x00")  # Envelope{seq: 1, status_request: {}}


def reset(sockets: list[socket.socket]) -> None:
    """Closes TCP sockets with a reset (SO_LINGER 0): none is left in TIME_WAIT, where it would
    stay a minute in the kernel's table that the daemons read for every connection."""
    for sock in sockets:
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
        sock.close()


def reply(sock: socket.socket) -> bytes | None:
    """The next frame's body; None when the daemon closed the connection or reset it."""
    try:
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            piece = sock.recv(1 << 16)
            if not piece:
                return None
            data += piece
        return data[4:]
    except OSError:
        return None


def hold(kind: str, address: str, count: int) -> None:
    held, refusals = [], []
    for _ in range(count):
        try:
            sock = connect(address)
            sock.sendall(frame(bb_status()) if kind == "node" else SCHEDD_STATUS)
        except OSError as error:
            refusals.append(f"connect: {error}")
            continue
        body = reply(sock)
        answer = decode(body) if body is not None and kind == "node" else {}
        # Served: an answer (a node's OK, or UNAUTHENTICATED before a credential) and not a
        # refusal of the connection (an error, then closed).
        if body is not None and answer.get(2, BB_OK) in (BB_OK, BB_UNAUTHENTICATED):
            held.append(sock)
        else:
            message = answer.get(3, b"")
            refusals.append(
                message.decode() if isinstance(message, bytes) else "closed"
            )
            reset([sock])
    refusal = next((r for r in refusals if r), "closed" if refusals else "")
    print(json.dumps({"held": len(held), "refused": len(refusals), "refusal": refusal}),
          flush=True)  # fmt: skip
    sys.stdin.read()
    reset(held)


def push(address: str, connections: int, writes: int) -> None:
    payload = bytes(MAX_PAYLOAD)
    results: list[dict[str, object]] = [{} for _ in range(connections)]

    def one(k: int) -> None:
        sent = [0]

        def send(data: bytes) -> None:
            view = memoryview(data)
            while view:
                n = sock.send(view)
                sent[0] += n
                view = view[n:]

        sock = connect(address)
        try:
            for _ in range(writes):
                if k % 2 == 0:
                    send(frame(bb_write_payload(f"pushed{k}", len(payload))))
                    send(payload)
                else:
                    send(frame(bb_write(f"pushed{k}", payload)))
        except OSError as error:
            results[k]["error"] = str(error)
        body = reply(sock)
        answer = decode(body) if body is not None else {}
        message = answer.get(3, b"")
        results[k].update(sent=sent[0], code=answer.get(2, 0) if body is not None else None,
                          message=message.decode() if isinstance(message, bytes) else "")  # fmt: skip
        reset([sock])

    threads = [threading.Thread(target=one, args=(k,)) for k in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps(results), flush=True)


def sockets(count: int) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    kept = [listener]
    for _ in range(count):
        kept.append(socket.create_connection(listener.getsockname()))
        kept.append(listener.accept()[0])
    print(json.dumps({"sockets": len(kept) - 1}), flush=True)
    sys.stdin.read()
    reset(kept)


def knock(address: str, count: int) -> None:
    for _ in range(count):
        sock = connect(address)
        sock.shutdown(socket.SHUT_WR)
        while reply(sock) is not None:
            pass
        reset([sock])
    print(json.dumps({"knocks": count}), flush=True)


def hog(path: str) -> None:
    library = ctypes.CDLL(None)
    library.harmonia_io_begin.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    if library.harmonia_io_begin(b"hog", 1 << 40) != 0:
        sys.exit(
            "attacker.py hog: harmonia_io_begin failed (is libharmonia preloaded?)"
        )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"M" * 1_000_000)
    print("in phase", flush=True)
    sys.stdin.read()
    library.harmonia_io_end()
    os.close(fd)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "hold":
        hold(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif what == "push":
        push(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif what == "sockets":
        sockets(int(sys.argv[2]))
    elif what == "knock":
        knock(sys.argv[2], int(sys.argv[3]))
    elif what == "hog":
        hog(sys.argv[2])
    else:
        sys.exit(f"attacker.py: unknown attack {what!r}")
