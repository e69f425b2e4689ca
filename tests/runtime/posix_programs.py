"""Everyday POSIX sequences that a staging library must not change: run with and without
libharmonia, each prints one JSON object that must come out the same (tests/runtime/
test_posix_semantics.py). Python's os functions call libc's, so under LD_PRELOAD every call here
goes through the library.

    python posix_programs.py SCENARIO DIRECTORY
"""

import ctypes
import fcntl
import hashlib
import json
import mmap
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

MIB = 1 << 20


def data(size: int, seed: int) -> bytes:
    block = bytes((seed * 131 + i) % 251 for i in range(251 * 16))
    return (block * (size // len(block) + 1))[:size]


def digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()[:16]


def file_digest(path: Path) -> str:
    return digest(path.read_bytes())


def create(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)


def mmap_same_descriptor(d: Path) -> dict[str, object]:
    path = d / "mapped"
    fd = create(path)
    os.write(fd, data(MIB, 1))
    view = mmap.mmap(fd, MIB)
    seen = digest(view[:])
    os.pwrite(fd, b"Z" * 10, 0)  # a write after the mapping must show in it
    coherent = view[:10] == b"Z" * 10
    view.close()
    os.close(fd)
    return {"seen": seen, "coherent": coherent, "file": file_digest(path)}


def mmap_other_descriptor(d: Path) -> dict[str, object]:
    path = d / "mapped"
    fd = create(path)
    os.write(fd, data(MIB, 2))
    reader = os.open(path, os.O_RDONLY)
    view = mmap.mmap(reader, MIB, prot=mmap.PROT_READ)
    seen = digest(view[:])
    view.close()
    os.close(reader)
    os.close(fd)
    return {"seen": seen, "file": file_digest(path)}


class StatxTimestamp(ctypes.Structure):
    _fields_ = [
        ("tv_sec", ctypes.c_int64),
        ("tv_nsec", ctypes.c_uint32),
        ("pad", ctypes.c_int32),
    ]


class Statx(ctypes.Structure):
    _fields_ = [
        ("stx_mask", ctypes.c_uint32), ("stx_blksize", ctypes.c_uint32),
        ("stx_attributes", ctypes.c_uint64), ("stx_nlink", ctypes.c_uint32),
        ("stx_uid", ctypes.c_uint32), ("stx_gid", ctypes.c_uint32),
        ("stx_mode", ctypes.c_uint16), ("pad1", ctypes.c_uint16),
        ("stx_ino", ctypes.c_uint64), ("stx_size", ctypes.c_uint64),
        ("stx_blocks", ctypes.c_uint64), ("stx_attributes_mask", ctypes.c_uint64),
        ("stx_atime", StatxTimestamp), ("stx_btime", StatxTimestamp),
        ("stx_ctime", StatxTimestamp), ("stx_mtime", StatxTimestamp),
        ("rest", ctypes.c_uint64 * 16),
    ]  # fmt: skip


def statx_size(path: Path) -> int:
    libc = ctypes.CDLL(
        None, use_errno=True
    )  # the process's statx: the library's when loaded
    buf = Statx()
    at_fdcwd, statx_basic_stats = -100, 0x7FF
    if (
        libc.statx(
            at_fdcwd, str(path).encode(), 0, statx_basic_stats, ctypes.byref(buf)
        )
        != 0
    ):
        raise OSError(ctypes.get_errno(), "statx")
    return int(buf.stx_size)


def stat_sizes(d: Path) -> dict[str, object]:
    path = d / "sized"
    fd = create(path)
    os.write(fd, data(MIB + 123, 3))
    dir_fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    sizes = {
        "stat": os.stat(path).st_size,
        "lstat": os.lstat(path).st_size,
        "fstat": os.fstat(fd).st_size,
        "fstatat": os.stat("sized", dir_fd=dir_fd).st_size,
        "statx": statx_size(path),
        "getsize": os.path.getsize(path),
    }
    os.close(dir_fd)
    # The caller looks at the file from outside now (a fork here would flush it), then says go.
    print(json.dumps({"sizes": sizes}), flush=True)
    sys.stdin.readline()
    os.close(fd)
    return {"sizes": sizes, "file": file_digest(path)}


def second_descriptor(d: Path) -> dict[str, object]:
    path = d / "twice"
    writer = create(path)
    os.write(writer, data(300_000, 4))
    reader = os.open(path, os.O_RDONLY)
    first = os.read(reader, 1 << 22)
    os.write(writer, data(5000, 5))  # after the second open: still seen by the reader
    second = os.read(reader, 1 << 22)
    with open(path, "rb") as stream:
        whole = stream.read()
    os.close(reader)
    os.close(writer)
    return {"first": digest(first), "second": digest(second), "whole": digest(whole),
            "file": file_digest(path)}  # fmt: skip


def libc_stdio() -> ctypes.CDLL:
    """The process's libc (libharmonia's wrappers first when loaded), with fopen, fclose and
    mkstemp typed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.fileno.argtypes = [ctypes.c_void_p]
    libc.mkstemp.argtypes = [ctypes.c_char_p]
    libc.popen.restype = ctypes.c_void_p
    libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.pclose.argtypes = [ctypes.c_void_p]
    return libc


def written_twice(path: Path, made: int) -> str:
    """`path`, made by mkstemp as descriptor `made` (libc's own open, unseen by the library),
    opened again for writing: the bytes of both descriptors, in the order written."""
    again = os.open(path, os.O_WRONLY)
    os.pwrite(again, b"A" * 4096, 0)
    os.pwrite(made, b"B" * 100, 0)  # after the other's write: the file's first bytes
    os.close(again)
    os.close(made)
    return file_digest(path)


def reused_numbers(d: Path) -> dict[str, object]:
    """Descriptors opened and closed by libc itself (a read-only fopen and fclose, opendir and
    closedir, popen and pclose, mkstemp), out of the library's sight, then their files opened
    again for writing: each second open must see the first, whether its number is new or one
    closed and taken again since the last look."""
    libc = libc_stdio()
    for name in ("read", "existing"):
        (d / name).write_bytes(data(8192, 7))
    stream = libc.fopen(str(d / "read").encode(), b"r")
    number = libc.fileno(stream)
    os.close(os.open(d / "existing", os.O_WRONLY))  # a look at every descriptor
    libc.fclose(stream)
    template = str(d / "reusedXXXXXX").encode()
    buffer = ctypes.create_string_buffer(template)
    made = libc.mkstemp(buffer)
    reused = Path(buffer.value.decode())
    same_number = made == number
    reused_file = written_twice(reused, made)
    buffer = ctypes.create_string_buffer(str(d / "freshXXXXXX").encode())
    made = libc.mkstemp(buffer)
    fresh_file = written_twice(Path(buffer.value.decode()), made)
    # The same with a directory stream (opendir, closedir) and a pipe (popen, pclose).
    after: dict[str, object] = {}
    for closer in ("closedir", "pclose"):
        number = lowest_free_number()
        if closer == "closedir":
            listing = os.scandir(d)
            os.close(os.open(d / "existing", os.O_WRONLY))
            listing.close()
        else:
            pipe = libc.popen(b"true", b"r")
            os.close(os.open(d / "existing", os.O_WRONLY))
            libc.pclose(pipe)
        buffer = ctypes.create_string_buffer(str(d / f"{closer}XXXXXX").encode())
        made = libc.mkstemp(buffer)
        after[closer] = [
            made == number,
            written_twice(Path(buffer.value.decode()), made),
        ]
    return {
        "same-number": same_number,
        "reused": reused_file,
        "fresh": fresh_file,
        **after,
    }


def lowest_free_number() -> int:
    """The descriptor number the next open takes."""
    probe = os.open(os.devnull, os.O_RDONLY)
    os.close(probe)
    return probe


def reopen_with_truncate(d: Path) -> dict[str, object]:
    path = d / "truncated"
    first = create(path)
    os.write(first, data(MIB, 6))
    second = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(second, b"newer")
    os.close(second)
    os.close(first)
    return {"file": file_digest(path), "size": path.stat().st_size}


TIMES = (1_600_000_000_123_456_789, 1_500_000_000_987_654_321)
METADATA_STEPS: dict[str, Callable[[int, Path], None]] = {
    "futimens": lambda fd, p: os.utime(fd, ns=TIMES),
    "utimensat": lambda fd, p: os.utime(p, ns=TIMES),
    "fchmod": lambda fd, p: os.chmod(fd, 0o4750),
    "chmod": lambda fd, p: os.chmod(p, 0o600),
    "fchown": lambda fd, p: os.chown(fd, 65534, 65534),
    "truncate": lambda fd, p: os.truncate(p, 1000),
    "ftruncate": lambda fd, p: os.ftruncate(fd, 2000),
    "posix_fallocate": lambda fd, p: os.posix_fallocate(fd, 0, 3 * MIB),
}


def metadata(d: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, step in METADATA_STEPS.items():
        path = d / name
        fd = create(path)
        os.write(fd, data(MIB, 7))
        step(fd, path)
        os.close(fd)
        st = path.stat()
        out[name] = {"size": st.st_size, "mode": oct(st.st_mode), "uid": st.st_uid,
                     "file": file_digest(path)}  # fmt: skip
        if name in ("futimens", "utimensat"):
            out[name + "-mtime"] = st.st_mtime_ns
    return out


def copies(d: Path) -> dict[str, object]:
    source = d / "source"
    src = create(source)
    os.write(src, data(MIB, 8))
    copied = create(d / "copied")
    os.write(copied, b"head" * 25)  # staged: the copy must land after it
    n1 = os.copy_file_range(src, copied, MIB, 0)
    sent = create(d / "sent")
    n2 = os.sendfile(sent, src, 0, MIB)
    for fd in (src, copied, sent):
        os.close(fd)
    return {"copy_file_range": n1, "sendfile": n2, "copied": file_digest(d / "copied"),
            "sent": file_digest(d / "sent")}  # fmt: skip


def close_range(d: Path) -> dict[str, object]:
    first = create(d / "first")
    os.write(first, b"A" * 1000)
    os.closerange(first, first + 1)  # close_range(2) in this libc
    second = create(d / "second")  # most likely the same number again
    os.write(second, b"B" * 1000)
    os.close(second)
    return {"same_number": first == second, "first": file_digest(d / "first"),
            "second": file_digest(d / "second")}  # fmt: skip


def high_descriptor(d: Path) -> dict[str, object]:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (70_000, max(hard, 70_000)))
    except (ValueError, OSError):
        return {
            "skipped": f"RLIMIT_NOFILE hard limit {hard} < 70000 and cannot be raised"
        }
    path = d / "high"
    fd = create(path)
    os.write(fd, b"x" * 100)
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 66_000)
    os.write(high, b"y" * 100)
    os.write(fd, b"z" * 100)
    direct = create(d / "direct")
    os.dup2(direct, 67_000)
    os.write(67_000, b"w" * 100)
    os.write(direct, b"v" * 100)
    for each in (fd, high, direct, 67_000):
        os.close(each)
    return {
        "high": high,
        "file": file_digest(path),
        "direct": file_digest(d / "direct"),
    }


def hdf5(d: Path) -> dict[str, object]:
    """HDF5 through h5py (its own libhdf5, writing with pwrite): datasets contiguous, chunked and
    compressed, grown, overwritten and with attributes; read back in the same process."""
    import h5py  # only this scenario needs it
    import numpy as np

    path = d / "data.h5"
    rng = np.random.default_rng(7)
    grid = rng.random((256, 256))
    with h5py.File(path, "w") as f:
        f.create_dataset("grid", data=grid)
        chunked = f.create_dataset("chunked", shape=(0, 1024), maxshape=(None, 1024),
                                   chunks=(16, 1024), dtype="i8", compression="gzip")  # fmt: skip
        for step in range(20):
            chunked.resize((step + 1) * 16, axis=0)
            chunked[step * 16 :] = np.arange(16 * 1024).reshape(16, 1024) * (step + 1)
        f["grid"][10:20, :] = -1.0
        f.attrs["steps"] = 20
        f.create_group("meta").attrs["name"] = "harmonia"
    with h5py.File(path, "r") as f:
        seen = digest(f["grid"][()].tobytes() + f["chunked"][()].tobytes())
        shape = list(f["chunked"].shape)
        steps = int(f.attrs["steps"])
    return {"seen": seen, "shape": shape, "steps": steps, "size": path.stat().st_size}


APPENDER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
print("open", flush=True)
for line in sys.stdin:
    if line.strip() == "sync":
        os.fsync(fd)
    else:
        os.write(fd, line.encode())
    print("done", flush=True)
os.close(fd)
"""


class Appender:
    """A process of its own holding `path` open with O_APPEND: a line it is sent is appended
    (`sync` fsyncs instead)."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "open\n"

    def send(self, line: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "done\n"

    def end(self) -> None:
        self.process.communicate(timeout=60)
        assert self.process.returncode == 0


def two_appenders(d: Path) -> dict[str, object]:
    """Two processes hold one log open with O_APPEND; A appends and exits, then B appends: each
    line lands at the end of the file as it then is."""
    log = d / "log"
    a, b = Appender(log), Appender(log)
    a.send("from A")
    a.end()
    b.send("from B")
    b.end()
    return {"log": log.read_text()}


def append_after_truncate(d: Path) -> dict[str, object]:
    """logrotate's copytruncate: the writer appends and syncs, another process truncates the
    log, the writer appends again: at offset 0."""
    log = d / "log"
    writer = Appender(log)
    writer.send("first line")
    writer.send("sync")
    os.truncate(log, 0)
    writer.send("A2")
    writer.end()
    return {"log": log.read_text()}


def subprocess_then_read_own(d: Path) -> dict[str, object]:
    """A child run with subprocess (vfork and exec in Python 3.11) while a file written here is
    open: the descriptor still reads, maps and stats what was written; then file after file,
    each open across a child, keeps its bytes."""
    path = d / "own"
    fd = create(path)
    os.write(fd, b"hello world\n")
    subprocess.run(["/bin/true"], check=True)
    size = os.fstat(fd).st_size
    first = os.pread(fd, 100, 0)
    os.write(fd, b"second\n")
    second = os.pread(fd, 100, 0)
    with mmap.mmap(fd, 0) as view:
        mapped = view[:]
    os.close(fd)
    for name in ("one", "two", "three"):
        with open(d / name, "w") as stream:
            stream.write(f"data of {name}\n")
            stream.flush()
            subprocess.run(["/bin/true"], check=True)
    return {"size": size, "first": first.decode(), "second": second.decode(),
            "mapped": mapped.decode(), "file": file_digest(path),
            "files": [(d / n).read_text() for n in ("one", "two", "three")]}  # fmt: skip


def read_through_pipe(start: Callable[[int], int]) -> str:
    """What a child started by `start(write end)` (returning its pid) writes to a pipe."""
    reader, writer = os.pipe()
    pid = start(writer)
    os.close(writer)
    os.waitpid(pid, 0)
    with os.fdopen(reader, "rb") as out:
        return out.read().decode()


def popen_read(command: str) -> str:
    """libc's popen(3) (the process's own: libharmonia's when loaded), read to the end."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.popen.restype = ctypes.c_void_p
    libc.popen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fread.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.c_void_p,
    ]
    libc.pclose.argtypes = [ctypes.c_void_p]
    stream = libc.popen(command.encode(), b"r")
    if not stream:
        raise OSError(ctypes.get_errno(), "popen")
    buffer = ctypes.create_string_buffer(4096)
    got = libc.fread(buffer, 1, len(buffer), stream)
    libc.pclose(stream)
    return buffer.raw[:got].decode()


def spawned_readers(d: Path) -> dict[str, object]:
    """Children started by posix_spawn, posix_spawnp, system and popen (glibc starts them
    without the exec wrapper) read a file this process wrote and still has open, as a child
    started with fork and exec does."""

    def dup_to_stdout(writer: int) -> list[tuple[int, int, int]]:
        return [(os.POSIX_SPAWN_DUP2, writer, 1)]

    starts: dict[str, Callable[[Path], str]] = {
        "posix_spawn": lambda p: read_through_pipe(lambda w: os.posix_spawn(
            "/bin/cat", ["cat", str(p)], os.environ, file_actions=dup_to_stdout(w))),
        "posix_spawnp": lambda p: read_through_pipe(lambda w: os.posix_spawnp(
            "cat", ["cat", str(p)], os.environ, file_actions=dup_to_stdout(w))),
        "system": lambda p: str(os.system(f"cat '{p}' > '{p}.out'")) + (
            Path(f"{p}.out").read_text()),
        "popen": lambda p: popen_read(f"cat '{p}'"),
    }  # fmt: skip
    seen = {}
    for how, start in starts.items():
        path = d / f"{how}.in"
        fd = create(path)
        os.write(fd, f"input for {how}\n".encode())
        seen[how] = start(path)
        os.close(fd)
    return seen


def read_at(directory: int, name: str) -> str:
    fd = os.open(name, os.O_RDONLY, dir_fd=directory)
    with os.fdopen(fd, "rb") as stream:
        return digest(stream.read())


def dirfd_calls(d: Path) -> dict[str, object]:
    """The *at calls on a name relative to a directory descriptor (not the working directory),
    each on a file written through a descriptor still open, as rsync's receiver makes them."""
    (d / "sub").mkdir()
    os.chdir("/")
    directory = os.open(d / "sub", os.O_RDONLY | os.O_DIRECTORY)
    out: dict[str, object] = {}
    steps: dict[str, Callable[[str], None]] = {
        "utimensat": lambda n: os.utime(n, ns=TIMES, dir_fd=directory,
                                        follow_symlinks=False),
        "fchmodat": lambda n: os.chmod(n, 0o600, dir_fd=directory),
        "fchownat": lambda n: os.chown(n, os.getuid(), os.getgid(), dir_fd=directory),
        "fstatat": lambda n: out.__setitem__(
            "fstatat-size", os.stat(n, dir_fd=directory).st_size),
        "renameat": lambda n: os.rename(n, n + ".renamed", src_dir_fd=directory,
                                        dst_dir_fd=directory),
        "unlinkat": lambda n: os.unlink(n, dir_fd=directory),
        "openat": lambda n: out.__setitem__("openat-read", read_at(directory, n)),
    }  # fmt: skip
    for name, step in steps.items():
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=directory
        )
        os.write(fd, data(5000 + len(name), 9))
        os.close(fd)  # closed, its bytes on buffer nodes: the call finds them by name
        fd = os.open(name, os.O_WRONLY | os.O_APPEND, dir_fd=directory)
        os.write(fd, b"tail")  # staged while the call runs
        step(name)
        os.close(fd)
    for path in sorted((d / "sub").iterdir()):
        st = path.stat()
        out[path.name] = {"mode": oct(st.st_mode), "size": st.st_size,
                          "file": file_digest(path)}  # fmt: skip
    out["utimensat-mtime"] = (d / "sub" / "utimensat").stat().st_mtime_ns
    return out


SCENARIOS: dict[str, Callable[[Path], dict[str, object]]] = {
    "mmap-same-descriptor": mmap_same_descriptor,
    "mmap-other-descriptor": mmap_other_descriptor,
    "stat-sizes": stat_sizes,
    "second-descriptor": second_descriptor,
    "reused-numbers": reused_numbers,
    "reopen-with-truncate": reopen_with_truncate,
    "metadata": metadata,
    "copies": copies,
    "close-range": close_range,
    "high-descriptor": high_descriptor,
    "hdf5": hdf5,
    "two-appenders": two_appenders,
    "append-after-truncate": append_after_truncate,
    "subprocess-then-read-own": subprocess_then_read_own,
    "spawned-readers": spawned_readers,
    "dirfd-calls": dirfd_calls,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2])), sort_keys=True))
