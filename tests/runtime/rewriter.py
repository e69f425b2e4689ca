"""A job for the fence test: writes 1 MiB of 'A' to PATH, prints "written", waits for a line on
stdin, rewrites the middle half with 'B' and prints "rewritten", then closes the file and prints
"closed"."""

import os
import sys

MIB = 1 << 20
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, b"A" * MIB, 0)
print("written", flush=True)
sys.stdin.readline()
os.pwrite(fd, b"B" * (MIB // 2), MIB // 4)
print("rewritten", flush=True)
os.close(fd)
print("closed", flush=True)
