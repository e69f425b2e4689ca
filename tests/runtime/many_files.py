"""A job for the partitioning tests: registers (by creating a file outside the PFS), waits for
GATE to exist, creates COUNT files PREFIX-k of 64 KiB in ROOT, then stays (registered) until
GATE.exit exists, so that every job's files are placed while all jobs are registered."""

import os
import sys
import time

root, prefix, count, gate = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(f"{gate}.{prefix}.ready", "w") as ready:
    ready.write("registered\n")
while not os.path.exists(gate):
    time.sleep(0.01)
for k in range(count):
    with open(os.path.join(root, f"{prefix}-{k}"), "wb") as out:
        out.write(bytes([k % 256]) * 65536)
with open(f"{gate}.{prefix}.done", "w") as done:
    done.write("created\n")
while not os.path.exists(f"{gate}.exit"):
    time.sleep(0.01)
