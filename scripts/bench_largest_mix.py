#!/usr/bin/env python3
"""The largest mix one `harmonia-sim` run handles within a time limit (docs/benchmarks.md).

Doubles the number of jobs of a synthetic mix (docs/workloads.md: the `mixed` spec, Poisson
arrivals 20 s apart, 3-8 phases a job) from --start until a run of some seed takes longer than
--limit seconds (it is killed then). Prints a table per size: jobs, phases, median, min and max
wall time over the seeds; writes the same as JSON with --out.

    .venv/bin/python scripts/bench_largest_mix.py --policy max-bandwidth --out results/largest.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harmonia.scenario import normalize
from harmonia.simulator import find_simulator
from harmonia.workloads import MixSpec, synthetic_mix


def run_once(
    simulator: Path, jobs: int, seed: int, policy: str, limit: float
) -> dict[str, float]:
    """One simulation of `jobs` jobs; its wall time, or None for it when killed at `limit`."""
    scenario = normalize(synthetic_mix(MixSpec(name="largest", jobs=jobs), seed))
    phases = sum(len(app["phases"]) for app in scenario["apps"])
    with tempfile.TemporaryDirectory(prefix="harmonia-largest-") as tmp:
        path = Path(tmp) / "scenario.json"
        path.write_text(json.dumps(scenario), encoding="utf-8")
        command = [str(simulator), "--scenario", str(path), "--policy", policy,
                   "--out", str(Path(tmp) / "result.json")]  # fmt: skip
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=limit, check=False
            )
        except subprocess.TimeoutExpired:
            return {"phases": phases, "wall": None}
        if done.returncode != 0:
            sys.exit(
                f"harmonia-sim failed on {jobs} jobs, seed {seed}: {done.stderr.strip()}"
            )
        return {"phases": phases, "wall": time.monotonic() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="max-bandwidth")
    parser.add_argument("--start", type=int, default=12, help="jobs of the first size")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N per size")
    parser.add_argument(
        "--limit", type=float, default=600.0, help="seconds a run may take"
    )
    parser.add_argument("--out", type=Path, help="JSON file for the measurements")
    args = parser.parse_args()
    simulator = find_simulator()
    rows = []
    jobs = args.start
    print(f"policy {args.policy}, limit {args.limit:g} s, seeds 1..{args.seeds}, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    print("| jobs | phases (mean) | median wall (s) | min - max (s) |", flush=True)
    print("| ---: | ---: | ---: | --- |", flush=True)
    while True:
        runs = []
        for seed in range(1, args.seeds + 1):
            runs.append(run_once(simulator, jobs, seed, args.policy, args.limit))
            if runs[-1]["wall"] is None:
                break  # this size is out: no need to wait for the other seeds
        walls = [r["wall"] for r in runs if r["wall"] is not None]
        phases = statistics.mean(r["phases"] for r in runs)
        over = len(walls) < len(runs)
        rows.append({"jobs": jobs, "phases": [r["phases"] for r in runs], "walls": walls,
                     "timed_out": over, "load": os.getloadavg()[0]})  # fmt: skip
        if over:
            print(
                f"| {jobs} | {phases:.0f} | > {args.limit:g} (seed {len(runs)} killed) | |"
            )
        else:
            print(f"| {jobs} | {phases:.0f} | {statistics.median(walls):.2f} | "
                  f"{min(walls):.2f} - {max(walls):.2f} |", flush=True)  # fmt: skip
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"policy": args.policy, "limit": args.limit,
                                            "sizes": rows}, indent=2) + "\n")  # fmt: skip
        if over:
            break
        jobs *= 2


if __name__ == "__main__":
    main()
