"""What everyday programs do to names and metadata around their writes: renames after close and
while open (atomic saves, rsync's and git's temporary files), deletions, stat and a second
process's read right after close, times and modes set by path, errno after calls that succeed,
and a path the kernel cannot read. Each scenario prints one JSON object of what the program saw,
which must be what it sees without libharmonia (tests/runtime/test_namespace.py).

    python namespace_programs.py SCENARIO DIRECTORY
"""

import ctypes
import errno
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

MIB = 1 << 20
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.open.argtypes = [ctypes.c_void_p, ctypes.c_int]
LIBC.pwrite.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
LIBC.pwrite.restype = ctypes.c_ssize_t
LIBC.pread.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
LIBC.pread.restype = ctypes.c_ssize_t
SENTINEL = 4242  # an errno no call returns: what the program left there before the call


def data(size: int, seed: int) -> bytes:
    block = bytes((seed * 131 + i) % 251 for i in range(251 * 16))
    return (block * (size // len(block) + 1))[:size]


def digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()[:16]


def write_file(path: Path, blob: bytes, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    for at in range(0, len(blob), MIB):
        os.write(fd, blob[at : at + MIB])
    os.close(fd)


def seen_by_another_process(path: Path) -> dict[str, object]:
    """What a second process (with this one's environment: under the library too) sees of
    `path` right now: its size by stat and the digest of what it reads."""
    probe = (
        "import hashlib, json, os, sys\n"
        "p = sys.argv[1]\n"
        "size = os.stat(p).st_size\n"
        "with open(p, 'rb') as f:\n"
        "    blob = f.read()\n"
        "print(json.dumps({'size': size, 'read': hashlib.sha256(blob).hexdigest()[:16]}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True,
                          text=True, check=False, timeout=60)  # fmt: skip
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()}
    return json.loads(done.stdout)


def seen_here(path: Path) -> dict[str, object]:
    return {"size": path.stat().st_size, "read": digest(path.read_bytes())}


def listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


def rename_after_close(d: Path) -> dict[str, object]:
    # rsync's and git's pattern: write a temporary name, close, rename it into place.
    write_file(d / ".f.XXXXXX", data(3_000_000, 1))
    os.rename(d / ".f.XXXXXX", d / "f")
    return {"listing": listing(d), "here": seen_here(d / "f"),
            "other": seen_by_another_process(d / "f")}  # fmt: skip


def rename_while_open(d: Path) -> dict[str, object]:
    fd = os.open(d / "r.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data(MIB, 2))
    os.rename(d / "r.tmp", d / "r")
    os.write(fd, data(MIB, 3))
    os.close(fd)
    return {"listing": listing(d), "here": seen_here(d / "r"),
            "other": seen_by_another_process(d / "r")}  # fmt: skip


def atomic_save_over_a_target(d: Path) -> dict[str, object]:
    # An editor's save: the new version in a temporary file, renamed over the old one.
    write_file(d / "doc", data(2 * MIB, 4))
    old = seen_by_another_process(d / "doc")
    write_file(d / "doc.new", data(MIB + 17, 5))
    os.rename(d / "doc.new", d / "doc")
    return {"listing": listing(d), "old": old, "here": seen_here(d / "doc"),
            "other": seen_by_another_process(d / "doc")}  # fmt: skip


def unlink_after_close(d: Path) -> dict[str, object]:
    write_file(d / "gone", data(2 * MIB, 6))
    write_file(d / "kept", data(MIB, 7))
    os.unlink(d / "gone")
    return {"listing": listing(d), "kept": seen_by_another_process(d / "kept")}


def unlink_while_open(d: Path) -> dict[str, object]:
    # The temporary-file pattern: open, unlink at once, use the descriptor, close.
    fd = os.open(d / "scratch", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.unlink(d / "scratch")
    blob = data(2 * MIB + 5, 8)
    os.write(fd, blob)
    back = os.pread(fd, len(blob), 0)
    os.close(fd)
    return {"listing": listing(d), "read_back": digest(back), "written": digest(blob)}


def stat_right_after_close(d: Path) -> dict[str, object]:
    blob = data(MIB + 321, 9)
    write_file(d / "s", blob)
    return {"stat": os.stat(d / "s").st_size, "here": seen_here(d / "s"),
            "other": seen_by_another_process(d / "s")}  # fmt: skip


def metadata_by_path_after_close(d: Path) -> dict[str, object]:
    old_umask = os.umask(0o022)
    write_file(
        d / "private", data(MIB, 10), mode=0o600
    )  # the mode the program asks for
    write_file(d / "timed", data(MIB, 11))
    os.utime(d / "timed", ns=(1_400_000_000_123_456_789, 1_500_000_000_987_654_321))
    write_file(d / "moded", data(MIB, 12))
    os.chmod(d / "moded", 0o640)
    os.umask(old_umask)
    out: dict[str, object] = {}
    for name in ("private", "timed", "moded"):
        st = os.stat(d / name)
        out[name] = {"mode": oct(st.st_mode), "size": st.st_size}
    out["timed-mtime"] = os.stat(d / "timed").st_mtime_ns
    return out


def errno_after_success(d: Path) -> dict[str, object]:
    # netCDF-3 reads errno after its reads: a call that succeeds must leave it alone.
    fd = os.open(d / "e", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    out: dict[str, object] = {}
    block = data(8192, 13)
    for step, offset in enumerate((0, 1 << 20, 5 << 20, 8192)):
        ctypes.set_errno(SENTINEL)
        n = LIBC.pwrite(fd, block, len(block), offset)
        out[f"pwrite{step}"] = (n, ctypes.get_errno())
    buf = ctypes.create_string_buffer(65536)
    for step, offset in enumerate(
        (0, (5 << 20) + 4096, 10 << 20)
    ):  # whole, short, past the end
        ctypes.set_errno(SENTINEL)
        n = LIBC.pread(fd, buf, 65536, offset)
        out[f"pread{step}"] = (n, ctypes.get_errno())
    os.close(fd)
    return out


def unreadable_path(d: Path) -> dict[str, object]:
    # A pointer the kernel cannot read: open fails with EFAULT, the program runs on.
    out: dict[str, object] = {}
    for flags in (os.O_RDONLY, os.O_WRONLY | os.O_CREAT):
        ctypes.set_errno(0)
        result = LIBC.open(ctypes.c_void_p(0xDEADC0DE), flags)
        out[str(flags)] = (result, errno.errorcode.get(ctypes.get_errno(), "?"))
    write_file(d / "after", b"still running")
    out["after"] = seen_here(d / "after")
    return out


SCENARIOS: dict[str, Callable[[Path], dict[str, object]]] = {
    "rename-after-close": rename_after_close,
    "rename-while-open": rename_while_open,
    "atomic-save-over-a-target": atomic_save_over_a_target,
    "unlink-after-close": unlink_after_close,
    "unlink-while-open": unlink_while_open,
    "stat-right-after-close": stat_right_after_close,
    "metadata-by-path-after-close": metadata_by_path_after_close,
    "errno-after-success": errno_after_success,
    "unreadable-path": unreadable_path,
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](Path(sys.argv[2])), sort_keys=True))
