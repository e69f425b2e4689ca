"""A job for the read tests: writes 3 MiB to PATH (byte k is k % 251), computes for PAUSE seconds
while its I/O phase ends, then reads the file back (pread, then lseek and read) and prints JSON:
whether the bytes are right, and the PFS file's size before and after it read them (os.stat goes
past libharmonia, to the file itself)."""

import json
import os
import sys
import time

path, pause = sys.argv[1], float(sys.argv[2])
SIZE = 3 << 20
expected = bytes(k % 251 for k in range(SIZE))
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
for at in range(0, SIZE, 1 << 20):
    os.pwrite(fd, expected[at : at + (1 << 20)], at)
time.sleep(pause)
pfs_size = os.stat(path).st_size
first = os.pread(fd, 1_500_000, 700_000)
os.lseek(fd, 0, os.SEEK_SET)
whole = b""
while chunk := os.read(fd, 1 << 20):
    whole += chunk
pfs_size_after = os.stat(path).st_size
os.close(fd)
print(json.dumps({
    "pread_ok": first == expected[700_000:2_200_000],
    "read_ok": whole == expected,
    "pfs_size_at_read": pfs_size,
    "pfs_size_after_read": pfs_size_after,
}))  # fmt: skip
