"""A job for the node-failure tests: writes MIB MiB to PATH in 256 KiB writes (byte k is
k % 251), printing "started" after the first MiB and pausing 20 ms after each MiB, prints
"written", waits for a line on stdin, then reads the file back and closes it, and prints JSON:
what the read gave ("ok", "wrong" or the error's name) and what the close gave.

    failover_job.py PATH MIB
"""

import errno
import json
import os
import sys
import time

SIZE = int(sys.argv[2]) << 20
PIECE = 256 << 10
expected = bytes(k % 251 for k in range(251 * 1024)) * (SIZE // (251 * 1024) + 1)
expected = expected[:SIZE]
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
for at in range(0, SIZE, PIECE):
    os.pwrite(fd, expected[at : at + PIECE], at)
    if (at + PIECE) % (1 << 20) == 0:
        if at + PIECE == 1 << 20:
            print("started", flush=True)
        time.sleep(0.02)
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
