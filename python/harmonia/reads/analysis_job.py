"""The analysis job of `harmonia reproduce reads`, run as a script under libharmonia (it imports
nothing of harmonia, so that the library sees only the job's own I/O): computes for COMPUTE
seconds (a prefetch announced in HARMONIA_PREFETCH is staged in meanwhile), then reads each FILE
whole in 4 MiB read() calls, as a restart or analysis code reads its input, and prints JSON: the
wall-clock start of the read phase and its end (time.time(), so that the caller can place them
among its own clock readings), and per file the SHA-256 and the size of what read() returned."""

import hashlib
import json
import os
import sys
import time

CHUNK = 4 << 20

compute, files = float(sys.argv[1]), sys.argv[2:]
time.sleep(compute)
read_start = time.time()
digests = {}
for path in files:
    digest = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while chunk := os.read(fd, CHUNK):
            digest.update(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    digests[path] = {"sha256": digest.hexdigest(), "size": size}
read_end = time.time()
print(json.dumps({"read_start": read_start, "read_end": read_end, "files": digests}))
