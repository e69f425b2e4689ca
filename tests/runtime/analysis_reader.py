"""A job for the read-path tests: computes for PAUSE seconds (its announced read phase is staged
in meanwhile), then reads each FILE the way analysis codes do (read() in odd-sized chunks, then
pread at scattered offsets) and prints JSON: per file, the SHA-256 of what read() returned, whether
every pread matched it, and the seconds the reads took. With READER_OUTPUT=PATH it also writes
1 MiB to PATH while its first input is open (a result written during the read phase)."""

import hashlib
import json
import os
import sys
import time

pause, files = float(sys.argv[1]), sys.argv[2:]
time.sleep(pause)
out = {}
for path in files:
    started = time.monotonic()
    fd = os.open(path, os.O_RDONLY)
    if output := os.environ.pop("READER_OUTPUT", ""):
        with open(output, "wb") as result:
            result.write(b"r" * (1 << 20))
    whole = bytearray()
    while chunk := os.read(fd, 1_000_003):
        whole += chunk
    offsets = [
        0,
        1,
        4095,
        1 << 20,
        (1 << 20) - 5,
        len(whole) // 3,
        max(0, len(whole) - 10),
    ]
    scattered = all(
        os.pread(fd, 300_000, at) == bytes(whole[at : at + 300_000]) for at in offsets
    )
    past_end = os.pread(fd, 100, len(whole) + 7)
    os.close(fd)
    out[path] = {
        "sha256": hashlib.sha256(whole).hexdigest(),
        "size": len(whole),
        "pread_ok": scattered and past_end == b"",
        "seconds": time.monotonic() - started,
    }
print(json.dumps(out))
