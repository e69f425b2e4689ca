"""libharmonia's side of the read path (HARMONIA_PREFETCH; docs/staging-library.md, "Prefetched
reads"): the announcement, the read phase, and reads served from the buffer nodes that staged the
files in. The daemon and the nodes are stand-ins (prefetch_support.py) that record what the
library sends; a node answers with its own bytes (the file's, inverted), so that every byte read
shows where it came from."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bbio_support import LIBRARY
from prefetch_support import (
    NOT_HELD,
    OK,
    FakeNode,
    FakeSchedd,
    Grant,
    ReadRequest,
    decode,
    first,
)

READER = Path(__file__).with_name("prefetch_reader.py")
STRIPE = 4096


def inverted(data: bytes) -> bytes:
    return bytes(255 - b for b in data)


@dataclass
class Setup:
    root: Path
    socket: Path
    files: dict[str, bytes]  # name relative to the root -> the bytes on the "PFS"

    def path(self, name: str) -> str:
        return str(self.root / name)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    root = tmp_path / "pfs"
    (root / "in").mkdir(parents=True)
    files = {
        "in/a.dat": os.urandom(3 * STRIPE + 100),
        "in/b.dat": os.urandom(2 * STRIPE),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    # A unix socket's path must be short: not beneath pytest's temporary directory.
    sockets = Path(tempfile.mkdtemp(prefix="hpf"))
    yield Setup(root, sockets / "schedd.sock", files)
    for leftover in sockets.iterdir():
        leftover.unlink()
    sockets.rmdir()


def copy_node(setup: Setup, code: int = OK) -> FakeNode:
    """A node holding every file's copy (inverted bytes), or answering `code` to every read."""

    def answer(request: ReadRequest) -> tuple[int, bytes]:
        if code != OK:
            return code, b""
        data = inverted(setup.files[request.file])
        return OK, data[request.offset : request.offset + request.length]

    node = FakeNode(answer)
    # A node drains to the root it makes its fence directory in: the client checks for it.
    (setup.root / ".harmonia" / "fences" / node.address).mkdir(
        parents=True, exist_ok=True
    )
    return node


def run(
    setup: Setup, steps: list[dict[str, Any]], cwd: Path | None = None, **env: str
) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(READER), json.dumps(steps)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={
            **os.environ,
            "LD_PRELOAD": str(LIBRARY.resolve()),
            "HARMONIA_SCHEDD": str(setup.socket),
            "HARMONIA_JOB": "reader",
            "HARMONIA_BUFFER_ROOT": str(setup.root),
            **env,
        },
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    result["stderr"] = done.stderr
    return result


def grant_all(nodes: list[FakeNode], files: list[str], **extra: Any) -> Grant:
    return Grant([n.address for n in nodes], STRIPE, files, **extra)


@pytest.fixture
def started() -> Iterator[list[Any]]:
    """Daemons and nodes a test starts, closed at its end."""
    running: list[Any] = []
    yield running
    for thing in running:
        thing.close()


def serve(
    setup: Setup,
    started: list[Any],
    files: list[str] | None = None,
    code: int = OK,
    **extra: Any,
) -> tuple[FakeNode, FakeSchedd]:
    """One node (copy_node) and a daemon granting it the read phase of `files` (in/a.dat
    unless told), both closed at the test's end."""
    node = copy_node(setup, code)
    schedd = FakeSchedd(setup.socket, grant_all([node], files or ["in/a.dat"], **extra))
    started += [node, schedd]
    return node, schedd


def assert_the_copy_then_the_file(
    setup: Setup, out: dict[str, Any], node: FakeNode, length: int
) -> None:
    """Steps 1 and 3 read `length` bytes of in/a.dat at 0: the first the node's copy, the
    second the file itself, the node asked only once."""
    data = setup.files["in/a.dat"]
    assert bytes.fromhex(out["results"][1]) == inverted(data)[:length]
    assert bytes.fromhex(out["results"][3]) == data[:length]
    assert len(node.reads) == 1


def test_reads_go_to_the_node_of_each_stripe_with_the_files_identity(
    setup: Setup, started: list[Any]
) -> None:
    nodes = [copy_node(setup), copy_node(setup)]
    schedd = FakeSchedd(setup.socket, grant_all(nodes, ["in/a.dat"]))
    started += [*nodes, schedd]
    path = setup.path("in/a.dat")
    data = setup.files["in/a.dat"]
    out = run(
        setup,
        [
            {"open": path, "as": "f"},
            {"pread": "f", "n": 2 * STRIPE, "at": 1000},  # stripes 0, 1 and 2
            {
                "preadv": "f",
                "sizes": [100, 5000],
                "at": 3 * STRIPE - 50,
            },  # stripes 2 and 3
            {"close": "f"},
        ],
        HARMONIA_PREFETCH=path,
    )
    results = out["results"]
    assert bytes.fromhex(results[1]) == inverted(data)[1000 : 1000 + 2 * STRIPE]
    # preadv clamps at the end of the file: 150 bytes are left.
    assert bytes.fromhex(results[2]) == inverted(data)[3 * STRIPE - 50 :]
    st = os.stat(path)
    identity = {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
    }
    for index, node in enumerate(nodes):
        assert node.reads, f"node {index} served nothing"
        for request in node.reads:
            assert request.file == "in/a.dat"
            assert request.identity == identity
            stripe = request.offset // STRIPE
            assert stripe % 2 == index, (index, request)
            assert request.offset + request.length <= (stripe + 1) * STRIPE
    served = sorted((r.offset, r.length) for n in nodes for r in n.reads)
    assert served == [
        (1000, STRIPE - 1000),
        (STRIPE, STRIPE),
        (2 * STRIPE, 1000),
        (3 * STRIPE - 50, 50),
        (3 * STRIPE, 100),
    ]


def test_read_and_readv_advance_the_offset_and_stop_at_the_end(
    setup: Setup, started: list[Any]
) -> None:
    node, _ = serve(setup, started)
    path = setup.path("in/a.dat")
    size = len(setup.files["in/a.dat"])
    out = run(
        setup,
        [
            {"open": path, "as": "f"},
            {"read": "f", "n": 1000},
            {"tell": "f"},
            {"readv": "f", "sizes": [10, 20]},
            {"tell": "f"},
            {"read": "f", "n": size},  # short: what is left
            {"tell": "f"},
            {"read": "f", "n": 10},  # at the end: nothing
            {"tell": "f"},
            {"close": "f"},
        ],
        HARMONIA_PREFETCH=path,
    )
    results = out["results"]
    copy = inverted(setup.files["in/a.dat"])
    assert bytes.fromhex(results[1]) == copy[:1000]
    assert results[2] == 1000
    assert bytes.fromhex(results[3]) == copy[1000:1030]
    assert results[4] == 1030
    assert bytes.fromhex(results[5]) == copy[1030:]
    assert results[6] == size
    assert results[7] == ""
    assert results[8] == size
    # No request reached past the end of the file.
    assert all(r.offset + r.length <= size for r in node.reads)
    assert sum(r.length for r in node.reads) == size


def test_not_held_falls_back_to_the_file_and_stays_there(
    setup: Setup, started: list[Any]
) -> None:
    node, _ = serve(setup, started, code=NOT_HELD)
    path = setup.path("in/a.dat")
    out = run(
        setup,
        [
            {"open": path, "as": "f"},
            {"read": "f", "n": 100},
            {"tell": "f"},
            {"read": "f", "n": 100},
            {"close": "f"},
        ],
        HARMONIA_PREFETCH=path,
    )
    data = setup.files["in/a.dat"]
    assert bytes.fromhex(out["results"][1]) == data[:100]
    assert out["results"][2] == 100
    assert bytes.fromhex(out["results"][3]) == data[100:200]
    assert len(node.reads) == 1  # asked once; plain from then on


def test_a_file_changed_after_the_open_is_read_from_the_file(
    setup: Setup, started: list[Any]
) -> None:
    node, _ = serve(setup, started)
    path = setup.path("in/a.dat")
    out = run(
        setup,
        [
            {"open": path, "as": "f"},
            {"pread": "f", "n": 100, "at": 0},
            {"touch": path},
            {"pread": "f", "n": 100, "at": 0},
            {"close": "f"},
        ],
        HARMONIA_PREFETCH=path,
    )
    assert_the_copy_then_the_file(setup, out, node, 100)


def test_writable_opens_and_files_not_staged_in_are_read_from_the_file(
    setup: Setup, started: list[Any]
) -> None:
    # Both files announced; only a.dat staged in.
    node, schedd = serve(setup, started)
    a, b = setup.path("in/a.dat"), setup.path("in/b.dat")
    out = run(
        setup,
        [
            {"open": b, "as": "b"},
            {"pread": "b", "n": 100, "at": 0},
            {"open": a, "as": "rw", "mode": "rw"},
            {"pread": "rw", "n": 100, "at": 0},
            {"close": "rw"},
            {"close": "b"},
        ],
        HARMONIA_PREFETCH=f"{a},{b}",
        HARMONIA_STAGE="0",
    )
    assert bytes.fromhex(out["results"][1]) == setup.files["in/b.dat"][:100]
    assert bytes.fromhex(out["results"][3]) == setup.files["in/a.dat"][:100]
    assert node.reads == []
    announced = schedd.of_kind("announce_read")
    assert len(announced) == 1
    files = [decode(f) for f in announced[0].fields[1]]
    assert [(first(f, 1).decode(), first(f, 2)) for f in files] == [
        ("in/a.dat", 3 * STRIPE + 100),
        ("in/b.dat", 2 * STRIPE),
    ]


def test_a_file_this_process_writes_or_a_forked_child_reads_from_the_file(
    setup: Setup, started: list[Any]
) -> None:
    node, _ = serve(setup, started)
    path = setup.path("in/a.dat")
    out = run(
        setup,
        [
            {"open": path, "as": "f"},
            {"fork_pread": "f", "n": 10, "at": 20},
            {"pread": "f", "n": 10, "at": 0},
            {"open": path, "as": "w", "mode": "rw"},
            {"pread": "f", "n": 10, "at": 0},
        ],
        HARMONIA_PREFETCH=path,
    )
    data = setup.files["in/a.dat"]
    assert bytes.fromhex(out["results"][1]) == data[20:30]  # the child's: plain
    assert bytes.fromhex(out["results"][2]) == inverted(data)[:10]
    assert (
        bytes.fromhex(out["results"][4]) == data[:10]
    )  # opened for writing here: plain
    assert [(r.offset, r.length) for r in node.reads] == [(0, 10)]


def test_the_read_phase_runs_from_the_first_open_to_a_gap_after_the_last_close(
    setup: Setup, started: list[Any]
) -> None:
    _, schedd = serve(setup, started, ["in/a.dat", "in/b.dat"])
    a, b = setup.path("in/a.dat"), setup.path("in/b.dat")
    out = run(
        setup,
        [
            {"mark": "start"},
            {"open": a, "as": "a"},
            {"dup": "a", "as": "a2"},
            {"close": "a"},
            {"pread": "a2", "n": 10, "at": 0},
            {"close": "a2"},
            # A restart reads its files one after the other: the next one, opened within the
            # gap, is read in the same phase.
            {"sleep": 0.2},
            {"open": b, "as": "b"},
            {"close": "b"},
            {"mark": "closed"},
            {"sleep": 2.0},
            {"mark": "end"},
        ],
        HARMONIA_PREFETCH=f"{a},{b}",
        HARMONIA_PHASE_GAP="0.8",
    )
    kinds = schedd.kinds()
    assert kinds[:2] == ["register", "announce_read"]
    begins = schedd.of_kind("phase_begin")
    ends = schedd.of_kind("phase_end")
    assert len(begins) == 1 and begins[0].fields.get(4) == [1]  # PhaseBegin.read
    assert len(ends) == 1, "one read phase for both files"
    assert ends[0].at >= out["marks"]["closed"] + 0.7, "not before the gap has passed"
    assert ends[0].at <= out["marks"]["end"], "and not only at exit"
    # The duplicate shares the offset: its reads stay plain.
    assert bytes.fromhex(out["results"][4]) == setup.files["in/a.dat"][:10]


def test_the_open_waits_for_the_grant(setup: Setup, started: list[Any]) -> None:
    serve(setup, started, await_first=1.5)
    path = setup.path("in/a.dat")
    out = run(
        setup,
        [
            {"background_open": setup.path("in/b.dat"), "after": 0.3},
            {"mark": "open"},
            {"open": path, "as": "f"},
            {"mark": "opened"},
            {"pread": "f", "n": 10, "at": 0},
        ],
        HARMONIA_PREFETCH=path,
    )
    assert out["marks"]["opened"] - out["marks"]["open"] >= 1.4
    # Meanwhile another thread opened and closed another file without waiting (for the
    # grant, it would have waited 1.2 s).
    assert out["marks"]["background"] < 0.6
    assert bytes.fromhex(out["results"][4]) == inverted(setup.files["in/a.dat"])[:10]


def test_the_open_does_not_wait_for_a_daemon_that_is_gone(
    setup: Setup, started: list[Any]
) -> None:
    node = copy_node(setup)
    schedd = FakeSchedd(setup.socket, grant_all([node], ["in/a.dat"], await_first=60))
    started.append(node)
    path = setup.path("in/a.dat")

    def close_soon() -> None:
        time.sleep(1.0)
        schedd.close()

    threading.Thread(target=close_soon, daemon=True).start()
    begin = time.monotonic()
    out = run(
        setup,
        [{"open": path, "as": "f"}, {"pread": "f", "n": 10, "at": 0}],
        HARMONIA_PREFETCH=path,
    )
    assert time.monotonic() - begin < 20
    assert bytes.fromhex(out["results"][1]) == setup.files["in/a.dat"][:10]
    assert node.reads == []


def test_a_restarted_daemon_is_told_again(setup: Setup, started: list[Any]) -> None:
    node, schedd = serve(setup, started)
    path = setup.path("in/a.dat")

    def drop_soon() -> None:
        time.sleep(0.8)
        schedd.drop_connections()

    threading.Thread(target=drop_soon, daemon=True).start()
    out = run(
        setup,
        [
            {"open": path, "as": "f"},
            {"pread": "f", "n": 10, "at": 0},
            {"sleep": 2.5},
            {"pread": "f", "n": 10, "at": 0},
        ],
        HARMONIA_PREFETCH=path,
    )
    registrations = schedd.of_kind("register")
    assert len(registrations) == 2
    second = registrations[1].connection
    on_second = [
        e.kind
        for e in schedd.events
        if e.connection == second and e.kind != "heartbeat"
    ]
    # Told again, and the read phase restated through PhaseBegin.read, not in_phase.
    assert on_second[:3] == ["register", "announce_read", "phase_begin"]
    assert schedd.of_kind("phase_begin")[-1].fields.get(4) == [1]
    assert registrations[1].fields.get(10, [0]) == [0]
    # Served before; the directive changed since the open (the daemon was gone): plain after.
    assert_the_copy_then_the_file(setup, out, node, 10)


def test_without_prefetch_nothing_is_announced(
    setup: Setup, started: list[Any]
) -> None:
    node, schedd = serve(setup, started)
    path = setup.path("in/a.dat")
    out = run(setup, [{"open": path, "as": "f"}, {"pread": "f", "n": 10, "at": 0}])
    assert bytes.fromhex(out["results"][1]) == setup.files["in/a.dat"][:10]
    assert "register" in schedd.kinds()
    assert schedd.of_kind("announce_read") == []
    assert schedd.of_kind("phase_begin") == []
    assert node.reads == []


def test_bad_prefetch_entries_are_named_and_the_program_runs(
    setup: Setup, started: list[Any], tmp_path: Path
) -> None:
    _, schedd = serve(setup, started)
    outside = tmp_path / "outside.dat"
    outside.write_bytes(b"x")
    path = setup.path("in/a.dat")
    out = run(
        setup,
        [{"open": path, "as": "f"}, {"pread": "f", "n": 10, "at": 0}],
        cwd=setup.root,  # relative entries are taken against the working directory
        HARMONIA_PREFETCH=f"{outside},{setup.root}/in/missing.dat,{path},in/b.dat",
    )
    stderr = out["stderr"]
    assert (
        f"HARMONIA_PREFETCH: '{outside}' is not beneath HARMONIA_BUFFER_ROOT" in stderr
    )
    assert f"HARMONIA_PREFETCH: '{setup.root}/in/missing.dat': no such file" in stderr
    # The good entry is still announced and served.
    assert bytes.fromhex(out["results"][1]) == inverted(setup.files["in/a.dat"])[:10]
    (announced,) = schedd.of_kind("announce_read")
    names = [first(decode(f), 1).decode() for f in announced.fields[1]]
    assert names == ["in/a.dat", "in/b.dat"]


def announced_names(schedd: FakeSchedd) -> list[str]:
    (announced,) = schedd.of_kind("announce_read")
    return [first(decode(f), 1).decode() for f in announced.fields[1]]


def test_a_directory_announces_every_regular_file_beneath_it_in_name_order(
    setup: Setup, started: list[Any]
) -> None:
    """As DataWarp's `stage_in type=directory`: the files beneath it, nested ones too; a
    symbolic link or a FIFO is left out and said, a file also named on its own is announced
    once."""
    _, schedd = serve(setup, started)
    (setup.root / "in" / "sub").mkdir()
    (setup.root / "in" / "sub" / "c.dat").write_bytes(b"c" * 10)
    (setup.root / "in" / "link.dat").symlink_to(setup.root / "in" / "a.dat")
    os.mkfifo(setup.root / "in" / "pipe")
    path = setup.path("in/a.dat")
    out = run(
        setup,
        [{"open": path, "as": "f"}, {"pread": "f", "n": 10, "at": 0}],
        HARMONIA_PREFETCH=f"{path},{setup.root}/in/",
    )
    assert announced_names(schedd) == ["in/a.dat", "in/b.dat", "in/sub/c.dat"]
    assert (
        f"HARMONIA_PREFETCH: '{setup.root}/in/': 2 entries beneath it are not regular files"
        in out["stderr"]
    )
    assert bytes.fromhex(out["results"][1]) == inverted(setup.files["in/a.dat"])[:10]


def test_a_directory_of_more_files_than_an_announcement_holds_is_cut_and_said(
    setup: Setup, started: list[Any]
) -> None:
    _, schedd = serve(setup, started)
    many = setup.root / "many"
    many.mkdir()
    for k in range(1030):
        (many / f"f{k:04d}").write_bytes(b"x")
    out = run(setup, [], HARMONIA_PREFETCH=str(many))
    names = announced_names(schedd)
    assert names == [f"many/f{k:04d}" for k in range(1024)], (
        "the first 1024 in name order"
    )
    assert (
        "HARMONIA_PREFETCH: more than 1024 files; the rest are not prefetched"
        in (out["stderr"])
    )
