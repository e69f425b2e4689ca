"""A job for the fence test: writes 1 MiB of 'A' to PATH, prints "written", waits for a line on
stdin, rewrites the middle half with 'B', closes the file and prints "rewritten"."""

import os
import sys

MIB = 1 << 20
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, b"A" * MIB, 0)
print("written", flush=True)
sys.stdin.readline()
os.pwrite(fd, b"B" * (MIB // 2), MIB // 4)
os.close(fd)
print("rewritten", flush=True)
