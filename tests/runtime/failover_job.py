"""A job for the node-failure tests: writes 4 MiB to PATH in 1 MiB pieces (byte k is k % 251),
prints "written", waits for a line on stdin, then reads the file back and closes it, and prints
JSON: what the read gave ("ok", "wrong" or the error's name) and what the close gave."""

import errno
import json
import os
import sys

SIZE = 4 << 20
expected = bytes(k % 251 for k in range(SIZE))
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
for at in range(0, SIZE, 1 << 20):
    os.pwrite(fd, expected[at : at + (1 << 20)], at)
print("written", flush=True)
sys.stdin.readline()
try:
    read = "ok" if os.pread(fd, SIZE, 0) == expected else "wrong"
except OSError as error:
    read = errno.errorcode[error.errno]
try:
    os.close(fd)
    closed = "ok"
except OSError as error:
    closed = errno.errorcode[error.errno]
print(json.dumps({"read": read, "close": closed}), flush=True)
