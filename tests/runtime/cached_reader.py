"""A job for the read tests: writes 3 MiB to PATH (byte k is k % 251), computes for PAUSE seconds
while its I/O phase ends, then reads the file back (pread, then lseek and read) and prints JSON:
whether the bytes are right, and the PFS file's size before and after it read them (asked of
the kernel directly: os.stat would show the size the job wrote)."""

import ctypes
import json
import os
import platform
import sys
import time

NEWFSTATAT = {"x86_64": 262, "aarch64": 79}[platform.machine()]


def pfs_size(path: str) -> int:
    """The file's size on the PFS: newfstatat(2) by number, which no interposer sees."""
    buf = ctypes.create_string_buffer(256)
    if ctypes.CDLL(None).syscall(NEWFSTATAT, -100, path.encode(), buf, 0) != 0:
        raise OSError("newfstatat failed")
    return int.from_bytes(buf.raw[48:56], "little")  # st_size, on both architectures


path, pause = sys.argv[1], float(sys.argv[2])
SIZE = 3 << 20
expected = bytes(k % 251 for k in range(SIZE))
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
for at in range(0, SIZE, 1 << 20):
    os.pwrite(fd, expected[at : at + (1 << 20)], at)
time.sleep(pause)
size_at_read = pfs_size(path)
first = os.pread(fd, 1_500_000, 700_000)
os.lseek(fd, 0, os.SEEK_SET)
whole = b""
while chunk := os.read(fd, 1 << 20):
    whole += chunk
size_after_read = pfs_size(path)
os.close(fd)
print(json.dumps({
    "pread_ok": first == expected[700_000:2_200_000],
    "read_ok": whole == expected,
    "pfs_size_at_read": size_at_read,
    "pfs_size_after_read": size_after_read,
}))  # fmt: skip
