#!/usr/bin/env python3
"""Simulated job-hours per wall-second of a sweep, with 1 and 2 workers (docs/benchmarks.md).

Runs the same grid (a generated mix x every policy x seeds) --reps times per engine and worker
count, each time into a fresh store: `sweep` is `harmonia sweep`'s Dask LocalCluster (its
start-up included), `bakeoff` is `harmonia reproduce bakeoff`'s pool of simulator processes.
Simulated job-hours of a run: its jobs' completion times (arrival to end) added up, which is the
run's mean completion times its number of jobs. Prints a table of medians and ranges.

    .venv/bin/python scripts/bench_sweep_throughput.py --reps 3 --out results/throughput.json
"""

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from harmonia.bakeoff.experiment import MIXES, Grid, run_grid
from harmonia.policies import EVERY_POLICY
from harmonia.simulator import find_simulator
from harmonia.sweep import run_sweep, store, tasks_for


def sweep_once(
    mix_name: str, seeds: list[int], workers: int
) -> tuple[float, int, float]:
    """(wall seconds, runs, simulated job-hours) of one sweep into a fresh SQLite store."""
    mix = next(m for m in MIXES if m.name == mix_name)
    tasks = tasks_for([], list(EVERY_POLICY), seeds, (mix,))
    jobs = {t.seed: len(json.loads(t.scenario_json)["apps"]) for t in tasks}
    with tempfile.TemporaryDirectory(prefix="harmonia-throughput-") as tmp:
        database = Path(tmp) / "sweep.sqlite"
        started = time.monotonic()
        run_sweep(tasks, database, find_simulator(), None, workers, lambda d, t: None)
        wall = time.monotonic() - started
        with store(database) as connection:
            rows = connection.execute(
                "SELECT seed, avg_completion FROM runs"
            ).fetchall()
    return (
        wall,
        len(rows),
        sum(jobs[seed] * completion for seed, completion in rows) / 3600,
    )


def bakeoff_once(
    mix_name: str, seeds: list[int], workers: int
) -> tuple[float, int, float]:
    """The same grid through the bake-off's runner, into a fresh directory."""
    mix = next(m for m in MIXES if m.name == mix_name)
    grid = Grid((mix,), tuple(seeds), EVERY_POLICY)
    with tempfile.TemporaryDirectory(prefix="harmonia-throughput-") as tmp:
        started = time.monotonic()
        results = run_grid(
            grid, find_simulator(), Path(tmp), workers, lambda outcome: None
        )
        wall = time.monotonic() - started
    hours = sum(
        sum(per["avg_completion"]) * mix.jobs for per in results[mix.name].values()
    )
    return wall, grid.runs, hours / 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mix", default="mixed", help="a mix of the bake-off")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--engines", default="sweep,bakeoff")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    seeds = list(range(1, args.seeds + 1))
    runners = {"sweep": sweep_once, "bakeoff": bakeoff_once}
    rows = []
    print(f"mix {args.mix}, seeds 1..{args.seeds}, {len(EVERY_POLICY)} policies, "
          f"{args.reps} repetitions, load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    print("| engine | workers | runs | median wall (s) | runs/s | job-hours per wall-s "
          "(median, min - max) |", flush=True)  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | --- |", flush=True)
    for engine in args.engines.split(","):
        for workers in (1, 2):
            measured = [
                runners[engine](args.mix, seeds, workers) for _ in range(args.reps)
            ]
            walls = [m[0] for m in measured]
            rates = [m[2] / m[0] for m in measured]
            runs = measured[0][1]
            rows.append({"engine": engine, "workers": workers, "runs": runs, "walls": walls,
                         "job_hours": measured[0][2], "rates": rates,
                         "load": os.getloadavg()[0]})  # fmt: skip
            print(f"| {engine} | {workers} | {runs} | {statistics.median(walls):.1f} | "
                  f"{runs / statistics.median(walls):.2f} | {statistics.median(rates):.2f} "
                  f"({min(rates):.2f} - {max(rates):.2f}) |", flush=True)  # fmt: skip
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
