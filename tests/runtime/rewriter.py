"""A job for the fence test: writes 2 MiB of 'A' to PATH, prints "written", waits for a line on
stdin, rewrites the middle MiB with 'B' (one write: not gathered, so it leaves at once) and prints
"rewritten", then closes the file and prints "closed"."""

import os
import sys

MIB = 1 << 20
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, b"A" * 2 * MIB, 0)
print("written", flush=True)
sys.stdin.readline()
os.pwrite(fd, b"B" * MIB, MIB // 2)
print("rewritten", flush=True)
os.close(fd)
print("closed", flush=True)
