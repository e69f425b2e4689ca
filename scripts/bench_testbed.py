#!/usr/bin/env python3
"""Ingest into a buffer node through a shaped link of the test bed, against the link's rate
(docs/benchmarks.md, "Identity and hosts of their own").

    .venv/bin/python scripts/bench_testbed.py [--config FILE] [--mib 256] [--repeat 5]

Brings up a test bed (scripts/testbed.py) named hmbench, a munged of its own, one harmonia-bbd
(--auth munge) on the first buffer host, and times `harmonia-bbctl put` of MIB MiB from the first
compute host, REPEAT times; prints a table and tears everything down.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("HARMONIA_BUILD", ROOT / "build"))
NAME = "hmbench"


def bits_per_second(rate: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)([a-z]+)", rate).groups()  # type: ignore[union-attr]
    return float(number) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--config", type=Path, default=ROOT / "examples/testbed/testbed.toml"
    )
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    testbed = [sys.executable, str(ROOT / "scripts/testbed.py")]
    work = Path(tempfile.mkdtemp(prefix="harmonia-bench-testbed-"))
    node = None
    munged = work / "munged"
    try:
        up = subprocess.run([*testbed, "up", NAME, "--config", str(args.config)],
                            capture_output=True, text=True, check=True)  # fmt: skip
        description = json.loads(up.stdout)
        hosts = {h["role"] + h["namespace"][-1]: h for h in description["hosts"]}
        bb, compute = hosts["bb0"], hosts["c0"]
        socket = subprocess.run([str(ROOT / "scripts/munged.sh"), "start", str(munged)],
                                capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        (work / "dev").mkdir()
        (work / "pfs").mkdir()
        node = subprocess.Popen(
            ["ip", "netns", "exec", bb["namespace"], str(BUILD / "src/bbd/harmonia-bbd"),
             "--device", str(work / "dev"), "--pfs", str(work / "pfs"), "--capacity", "4G",
             "--threshold", "1", "--listen", f"{bb['address']}:7080", "--auth", "munge",
             "--munge-socket", socket],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert node.stdout is not None and node.stdout.readline().startswith("port=")
        source = work / "source"
        source.write_bytes(os.urandom(args.mib << 20))
        rates = []
        for k in range(args.repeat):
            started = time.monotonic()
            subprocess.run(
                ["ip", "netns", "exec", compute["namespace"], str(BUILD / "src/bbd/harmonia-bbctl"),
                 "--node", f"{bb['address']}:7080", "put", f"run{k}.dat", str(source),
                 "--chunk", str(4 << 20), "--window", "4"],
                check=True, capture_output=True, env={**os.environ, "HARMONIA_MUNGE_SOCKET": socket},
            )  # fmt: skip
            seconds = time.monotonic() - started
            rates.append((args.mib << 20) * 8 / seconds)
            subprocess.run(
                ["ip", "netns", "exec", compute["namespace"], str(BUILD / "src/bbd/harmonia-bbctl"),
                 "--node", f"{bb['address']}:7080", "drain"],
                check=True, capture_output=True, env={**os.environ, "HARMONIA_MUNGE_SOCKET": socket},
            )  # fmt: skip
            print(
                f"[{k + 1}/{args.repeat}] {rates[-1] / 1e6:.0f} Mbit/s", file=sys.stderr
            )
        link = bits_per_second(description["link"]["rate"])
        print(
            "| link rate | MiB per put | runs | ingest median | min | max | median / rate |"
        )
        print("|---|---|---|---|---|---|---|")
        print(f"| {description['link']['rate']} | {args.mib} | {args.repeat} "
              f"| {statistics.median(rates) / 1e6:.0f} Mbit/s | {min(rates) / 1e6:.0f} "
              f"| {max(rates) / 1e6:.0f} | {statistics.median(rates) / link:.2f} |")  # fmt: skip
    finally:
        if node is not None:
            node.terminate()
            node.wait(timeout=10)
        subprocess.run(
            [str(ROOT / "scripts/munged.sh"), "stop", str(munged)], check=False
        )
        subprocess.run([*testbed, "down", NAME], check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
