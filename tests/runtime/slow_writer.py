"""A job for the coordination tests: writes CHUNKS chunks of 1 MB (chunk k is the byte 'A'+k%26)
to PATH, PAUSE seconds apart, then closes it, and prints the times as JSON."""

import json
import os
import sys
import time

path, chunks, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
opened = time.time()
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for k in range(chunks):
    os.write(fd, bytes([65 + k % 26]) * 1_000_000)
    if pause:
        time.sleep(pause)
written = time.time()
os.close(fd)
closed = time.time()
print(json.dumps({"opened": opened, "written": written, "closed": closed}))
