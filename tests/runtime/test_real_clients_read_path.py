"""Real programs reading through the read path (issue 16 item 1): harmonia-schedd and two
harmonia-bbd nodes (BufferCluster), files an earlier job left on the PFS, and an outside program
started under libharmonia with HARMONIA_PREFETCH naming them. The nodes copy the files in while the
program starts; the library serves its read/pread/readv/preadv/preadv2 calls from the copies.

Which clients the nodes serve, as measured here (harmonia-bbctl status: staged_read_bytes):
- served: cat and tar -c (read), fio with the sync (read), psync (pread), pvsync (preadv) and
  pvsync2 (preadv2) engines, forked jobs and threads alike, sqlite3 -readonly (pread);
- from the PFS: sha256sum (coreutils reads through stdio's fread, whose reads glibc makes inside
  itself, past the library), and dd (it reopens its input onto descriptor 0 with dup2; a
  duplicated descriptor shares its offset, and its reads stay plain).
Either way the bytes a program reads must be exactly the file's, also when another process
changed a file after its copy was made: rewritten in place, rewritten with its times put back
(only the ctime tells), or replaced by a rename."""

import hashlib
import io
import os
import random
import shutil
import sqlite3
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from buffers_support import BBD, needs
from harmonia.buffers.cluster import BufferCluster, ClusterSettings
from test_read_path import wait_staged

pytestmark = needs(BBD)

FIO_SIZE = 4 << 20


def needs_program(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} is not installed")
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    settings = ClusterSettings(
        tmp_path, buffers=2, capacity=64 << 20, policy="max-bandwidth"
    )
    with BufferCluster(settings) as started:
        yield started


def write_inputs(pfs: Path, sizes: dict[str, int], seed: int) -> dict[Path, bytes]:
    """Random files on the PFS, at least 1 s old when this returns: the nodes do not copy a file
    changed within the last second (docs/buffer-nodes.md)."""
    rng = random.Random(seed)
    data = {}
    for name, size in sizes.items():
        path = pfs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data[path] = rng.randbytes(size)
        path.write_bytes(data[path])
    time.sleep(1.1)
    return data


def run_client(
    cluster: BufferCluster, command: list[str], inputs: list[Path], job: str
) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        **cluster.env(),
        "HARMONIA_JOB": job,
        "HARMONIA_PREFETCH": ",".join(str(p) for p in inputs),
    }
    done = subprocess.run(
        command, env=env, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done


SIZES = {"in/a.dat": (3 << 20) + 17, "in/b.dat": (1 << 20) + 4095, "in/c.dat": 1}


def test_cat_reads_the_staged_copies_byte_for_byte(cluster: BufferCluster) -> None:
    needs_program("cat")
    data = write_inputs(cluster.pfs, SIZES, seed=11)
    files = list(data)
    before = cluster.node_total("staged_read_bytes")
    done = run_client(cluster, ["cat", *map(str, files)], files, "cat")
    assert done.stdout == b"".join(data[p] for p in files)
    # cat reads with read(): every byte came from the nodes' copies.
    assert cluster.node_total("staged_read_bytes") - before == sum(SIZES.values())


def test_tar_archives_the_staged_copies(cluster: BufferCluster) -> None:
    needs_program("tar")
    data = write_inputs(cluster.pfs, SIZES, seed=12)
    files = list(data)
    before = cluster.node_total("staged_read_bytes")
    done = run_client(
        cluster, ["tar", "-c", "-f", "-", "-C", str(cluster.pfs), *SIZES], files, "tar"
    )
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        names = [m.name for m in archive.getmembers()]
        assert names == list(SIZES)
        for name in SIZES:
            member = archive.extractfile(name)
            assert member is not None
            assert member.read() == data[cluster.pfs / name], name
    assert cluster.node_total("staged_read_bytes") - before == sum(SIZES.values())


def test_sqlite3_queries_a_database_the_nodes_serve(cluster: BufferCluster) -> None:
    """sqlite3 -readonly opens its database O_RDONLY and reads pages with pread; a read-write
    open (plain sqlite3) would make every read the PFS's (docs/staging-library.md)."""
    needs_program("sqlite3")
    database = cluster.pfs / "in/table.db"
    database.parent.mkdir(parents=True)
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)")
        rng = random.Random(16)
        db.executemany(
            "INSERT INTO t VALUES (?, ?)",
            ((k, rng.randbytes(900)) for k in range(3000)),
        )
    db.close()
    query = "SELECT count(*), hex(sha3(group_concat(hex(v), '') )) FROM t"
    time.sleep(1.1)
    size = database.stat().st_size
    before = cluster.node_total("staged_read_bytes")
    done = run_client(
        cluster, ["sqlite3", "-readonly", str(database), "PRAGMA integrity_check;", query],
        [database], "sqlite3",
    )  # fmt: skip
    plain = subprocess.run(
        ["sqlite3", "-readonly", str(database), "PRAGMA integrity_check;", query],
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout == plain.stdout
    assert done.stdout.startswith(b"ok\n3000|")
    # Every page was read at least once, from the copies.
    assert cluster.node_total("staged_read_bytes") - before >= size


def fio_command(data: Path, engine: str, extra: list[str]) -> list[str]:
    return [
        "fio", "--name=input", f"--filename={data}", "--bs=64k", f"--size={FIO_SIZE}",
        "--verify=crc32c", f"--ioengine={engine}", "--verify_state_save=0",
        "--output-format=terse", "--terse-version=3", *extra,
    ]  # fmt: skip


def fio_input(cluster: BufferCluster) -> Path:
    """A file an earlier fio job wrote with crc32c verification headers in every block."""
    data = cluster.pfs / "in/fio.dat"
    data.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        fio_command(data, "psync", ["--rw=write", "--do_verify=0"]),
        capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    time.sleep(1.1)
    return data


def fio_fields(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    return done.stdout.decode().strip().splitlines()[-1].split(";")


@pytest.mark.parametrize(
    ("engine", "how"),
    [
        ("sync", "forked job"),
        ("psync", "forked job"),
        ("pvsync", "forked job"),
        ("pvsync2", "forked job"),
        ("psync", "thread"),
        ("psync", "paced"),
    ],
)
def test_fio_verifies_the_blocks_the_nodes_serve(
    cluster: BufferCluster, engine: str, how: str
) -> None:
    """Paced: 4 MiB at 4 MiB/s, so that the read outlasts several exchanges with the daemon
    (each restates the grant; a restatement that differs would end the serving)."""
    needs_program("fio")
    data = fio_input(cluster)
    before = cluster.node_total("staged_read_bytes")
    extra = {"forked job": [], "thread": ["--thread"], "paced": ["--rate=4m"]}[how]
    extra.append("--rw=read")
    fields = fio_fields(
        run_client(cluster, fio_command(data, engine, extra), [data], "fio")
    )
    assert fields[4] == "0", f"fio reported error {fields[4]}"
    assert int(fields[5]) == FIO_SIZE >> 10, "fio read the whole file (KiB)"
    assert cluster.node_total("staged_read_bytes") - before == FIO_SIZE


def test_fio_verification_fails_on_wrong_bytes(cluster: BufferCluster) -> None:
    """The verification above can fail: one flipped byte in the file is an error."""
    needs_program("fio")
    data = fio_input(cluster)
    with open(data, "r+b") as f:
        f.seek(3 * 65536 + 1000)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    env = {
        **os.environ,
        **cluster.env(),
        "HARMONIA_JOB": "fio",
        "HARMONIA_PREFETCH": str(data),
    }
    done = subprocess.run(
        fio_command(data, "psync", ["--rw=read"]),
        env=env, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert fio_fields(done)[4] != "0"


def test_stdio_and_duplicated_descriptors_read_the_pfs(cluster: BufferCluster) -> None:
    needs_program("sha256sum")
    needs_program("dd")
    data = write_inputs(cluster.pfs, SIZES, seed=13)
    files = list(data)
    before = cluster.node_total("staged_read_bytes")
    done = run_client(cluster, ["sha256sum", *map(str, files)], files, "sha256sum")
    expected = "".join(f"{hashlib.sha256(data[p]).hexdigest()}  {p}\n" for p in files)
    assert done.stdout.decode() == expected
    first = files[0]
    done = run_client(
        cluster, ["dd", f"if={first}", "bs=64k", "status=none"], [first], "dd"
    )
    assert done.stdout == data[first]
    # fread and a dup2'd descriptor are not the library's to serve: the PFS answered.
    assert cluster.node_total("staged_read_bytes") == before


def open_gate(gate: Path, timeout: float = 30) -> None:
    """Writes a line into the FIFO and closes it, once its reader has it open (never blocking: a
    reader that died must fail the test, not hang it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError("cat did not open its first input") from None
            time.sleep(0.02)
    os.write(fd, b"gate\n")
    os.close(fd)


def change(path: Path, old: bytes, how: str) -> bytes:
    """Another process changes `path` (same size every time) and says what it holds now."""
    patch = random.Random(15).randbytes(1 << 20)
    new = bytearray(old)
    new[1 << 20 : 2 << 20] = patch
    if how == "replaced":
        # A new file renamed over the old one, with the old one's times: a new inode.
        spare = path.with_name(path.name + ".new")
        spare.write_bytes(bytes(new))
        subprocess.run(["touch", "-r", str(path), str(spare)], check=True, timeout=30)
        subprocess.run(["mv", str(spare), str(path)], check=True, timeout=30)
        return bytes(new)
    stat = path.stat()
    subprocess.run(
        ["dd", f"of={path}", "bs=1M", "seek=1", "conv=notrunc", "status=none"],
        input=patch, check=True, timeout=30,
    )  # fmt: skip
    if how == "rewritten, times put back":
        # Same size, same mtime as the copy's: only the ctime (which no user can set) moved.
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert path.stat().st_mtime_ns == stat.st_mtime_ns
    return bytes(new)


@pytest.mark.parametrize("how", ["rewritten", "rewritten, times put back", "replaced"])
def test_cat_reads_the_new_bytes_of_a_file_changed_after_its_copy(
    cluster: BufferCluster, tmp_path: Path, how: str
) -> None:
    """cat first reads a FIFO the test holds: it has announced its files and the nodes copy them
    meanwhile; then another process changes one file, and only then does cat read it."""
    needs_program("cat")
    data = write_inputs(cluster.pfs, SIZES, seed=14)
    files = list(data)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = {
        **os.environ,
        **cluster.env(),
        "HARMONIA_JOB": "cat",
        "HARMONIA_PREFETCH": ",".join(map(str, files)),
    }
    before = cluster.node_total("staged_read_bytes")
    cat = subprocess.Popen(
        ["cat", str(gate), *map(str, files)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    output: dict[str, bytes] = {}
    reader = threading.Thread(
        target=lambda: output.update(zip(("out", "err"), cat.communicate(timeout=60)))
    )
    reader.start()
    try:
        wait_staged(cluster, sum(SIZES.values()))
        expected = change(files[0], data[files[0]], how)
        open_gate(gate)
    finally:
        reader.join(timeout=70)
    assert cat.returncode == 0, output.get("err", b"").decode(errors="replace")
    rest = b"".join(data[p] for p in files[1:])
    assert output["out"] == b"gate\n" + expected + rest, (
        "the new bytes, then the copies"
    )
    # The unchanged files were served; of the changed one, nothing.
    assert cluster.node_total("staged_read_bytes") - before == len(rest)
