"""A job for the coordination tests: writes CHUNKS chunks of 1 MB (chunk k is the byte 'A'+k%26)
to PATH, PAUSE seconds apart, computes (sleeps) HOLD seconds with the file open (default 0), then
closes it, and prints the times as JSON."""

import json
import os
import sys
import time

path, chunks, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
hold = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
opened = time.time()
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for k in range(chunks):
    os.write(fd, bytes([65 + k % 26]) * 1_000_000)
    if pause:
        time.sleep(pause)
written = time.time()
time.sleep(hold)
os.close(fd)
closed = time.time()
print(json.dumps({"opened": opened, "written": written, "closed": closed}))
