"""A job that writes when told: opens PATH, then for each line "write K" on stdin writes chunk K
(1 MB of the byte 'A'+K%26, at offset K MB, one pwrite) and prints "wrote K"; on "close" (or at
the end of stdin) closes the file and prints "closed". Between commands it waits with the file
open, so a test can look at the file from outside while the writer holds it."""

import os
import sys

CHUNK = 1_000_000
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
print("opened", flush=True)
for line in sys.stdin:
    command = line.split()
    if command == ["close"]:
        break
    if len(command) != 2 or command[0] != "write" or not command[1].isdigit():
        sys.exit(f"stepped_writer: unknown command {line.strip()!r}")
    k = int(command[1])
    os.pwrite(fd, bytes([65 + k % 26]) * CHUNK, k * CHUNK)
    print(f"wrote {k}", flush=True)
os.close(fd)
print("closed", flush=True)
