#!/usr/bin/env python3
"""Resident memory of a harmonia-bbd --auth munge node while clients that never authenticate
push writes at it (docs/benchmarks.md, "Identity"). A munged of its own (scripts/munged.sh) and
one node on 127.0.0.1; each round, for each count of connections, the node's peak resident
memory is reset (/proc/PID/clear_refs), `tests/runtime/attacker.py push` sends WRITES writes of
16 MiB on every connection at once (raw payloads after the frame on half of them, the bytes in
the frame on the others) with no credential, and the node's peak (VmHWM) is read back.

    python3 scripts/bench_unauthenticated.py [--rounds 5] [--connections 16,48] [--writes 2]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("HARMONIA_BUILD", ROOT / "build"))
ATTACKER = ROOT / "tests" / "runtime" / "attacker.py"


def kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--connections", default="16,48", help="counts, comma-separated"
    )
    parser.add_argument(
        "--writes", type=int, default=2, help="16 MiB writes per connection"
    )
    args = parser.parse_args()
    counts = [int(c) for c in args.connections.split(",")]
    work = Path(tempfile.mkdtemp(prefix="harmonia-bench-unauthenticated-"))
    munge_dir = work / "munged"
    started = subprocess.run([str(ROOT / "scripts" / "munged.sh"), "start", str(munge_dir)],
                             capture_output=True, text=True, check=True)  # fmt: skip
    (work / "dev").mkdir()
    (work / "pfs").mkdir()
    node = subprocess.Popen(
        [str(BUILD / "src" / "bbd" / "harmonia-bbd"), "--device", str(work / "dev"),
         "--pfs", str(work / "pfs"), "--auth", "munge", "--munge-socket", started.stdout.strip()],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert node.stdout is not None
        address = f"127.0.0.1:{node.stdout.readline().strip().removeprefix('port=')}"
        runs: dict[int, list[dict[str, int]]] = {count: [] for count in counts}
        for round_ in range(args.rounds):
            for count in counts:
                before = kib(node.pid, "VmRSS")
                Path(f"/proc/{node.pid}/clear_refs").write_text("5")  # VmHWM from now
                pushed = subprocess.run(
                    [sys.executable, str(ATTACKER), "push", address, str(count), str(args.writes)],
                    capture_output=True, text=True, check=True, timeout=600,
                )  # fmt: skip
                run = {"round": round_, "connections": count, "rss_kib": before,
                       "peak_kib": kib(node.pid, "VmHWM"),
                       "sent_bytes": sum(int(r["sent"]) for r in json.loads(pushed.stdout))}  # fmt: skip
                runs[count].append(run)
                print(json.dumps(run), flush=True)
        print(
            f"\n| connections x {args.writes} writes of 16 MiB | rounds | RSS before (MB) | "
            "peak growth (MB) median (range) | growth per connection (KB) | sent (MB) |"
        )
        print("|---|---|---|---|---|---|")
        for count, done in runs.items():
            growth = [(r["peak_kib"] - r["rss_kib"]) * 1024 for r in done]
            sent = statistics.median(r["sent_bytes"] for r in done)
            print(f"| {count} | {len(done)} | "
                  f"{statistics.median(r['rss_kib'] for r in done) * 1024 / 1e6:.1f} | "
                  f"{statistics.median(growth) / 1e6:.2f} ({min(growth) / 1e6:.2f} to "
                  f"{max(growth) / 1e6:.2f}) | {statistics.median(growth) / count / 1e3:.0f} | "
                  f"{sent / 1e6:.1f} |")  # fmt: skip
    finally:
        node.terminate()
        node.wait(timeout=10)
        subprocess.run(
            [str(ROOT / "scripts" / "munged.sh"), "stop", str(munge_dir)], check=False
        )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
