"""A job for the gathering test: writes 4 MiB of zeros to PATH in 4 KiB writes, prints
"written", waits for a line on stdin, closes the file and prints "closed"."""

import os
import sys

fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for _ in range(1024):
    os.write(fd, bytes(4096))
print("written", flush=True)
sys.stdin.readline()
os.close(fd)
print("closed", flush=True)
