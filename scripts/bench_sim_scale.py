#!/usr/bin/env python3
"""Wall time and peak memory of `harmonia-sim` against the number of jobs (docs/benchmarks.md).

The first N jobs of a real trace (default KTH-SP2), for each N, each policy and each seed, at
most --workers simulator processes at once, each killed after --timeout seconds (a policy that
times out at one size is not run at larger ones). Two settings:

- `mix` (default): the jobs through MixSpec(trace=...), as the bake-off's swf-trace mix: every
  job on nodes of its own, 3-8 phases of 2-24 GB drawn as docs/workloads.md says, 4 SSD buffers
  of 200 GB;
- `machine`: the jobs on the machine they shared (`harmonia sim --trace`), sized from the trace,
  with the request model of --requests.

--repeat K replays the trace K times back to back (each copy's jobs renumbered and submitted one
span of the trace later): KTH-SP2 eleven times is 307,769 jobs, a large machine's log.

Prints a Markdown table per build: the median wall seconds over the seeds per size and policy,
the growth exponent k (wall ~ jobs^k, least squares over the sizes each seed finished; median and
range over the seeds) and the largest peak resident memory at the largest size. With --baseline
(another build, such as main's, measured in the same run, on the sizes it finishes) it also
prints the baseline's wall time over this build's, per size. --out writes every measurement as
JSON.

    .venv/bin/python scripts/bench_sim_scale.py --jobs 200,800,3200,12800 --seeds 1,2,3 \
        --baseline ../main/build/src/sim/harmonia-sim --baseline-jobs 100,200 --out scale.json
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harmonia.names import policy_names
from harmonia.scenario import normalize
from harmonia.simulator import find_simulator
from harmonia.swf import trace_lines
from harmonia.workloads import MixSpec, TraceSpec, synthetic_mix, trace_scenario

KTH = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "traces"
    / "swf"
    / "KTH-SP2-1996-2.1-cln.swf.gz"
)

# (build, policy, seed) -> jobs -> the measurement
Rows = dict[tuple[str, str, int], dict[int, dict[str, object]]]


def repeated(trace: Path, copies: int, directory: Path) -> Path:
    """`trace` `copies` times back to back, in `directory`: a site's log of copies x its jobs.
    Each copy's jobs are numbered past the previous copy's and submitted one span of the trace
    (first to last submission, plus a day) later."""
    header, jobs = [], []
    for line in trace_lines(trace):
        if line.startswith(";"):
            header.append(line + "\n")
        elif line.strip():
            jobs.append(line.split())
    submits = [float(job[1]) for job in jobs]
    span = max(submits) - min(submits) + 86400
    numbers = max(int(job[0]) for job in jobs)
    out = directory / f"{trace.name.split('.swf')[0]}-x{copies}.swf"
    with out.open("w") as swf:
        swf.writelines(header)
        for k in range(copies):
            for job in jobs:
                fields = [
                    str(int(job[0]) + k * numbers),
                    str(int(float(job[1]) + k * span)),
                ]
                swf.write(" ".join(fields + job[2:]) + "\n")
    return out


def scenario(
    setting: str, trace: Path, jobs: int, requests: str, seed: int
) -> dict[str, object]:
    if setting == "mix":
        return normalize(
            synthetic_mix(MixSpec(name="scale", jobs=jobs, trace=trace), seed)
        )
    return normalize(
        trace_scenario(TraceSpec(trace, jobs=jobs, requests=requests), seed)
    )


def run(simulator: Path, path: Path, policy: str, timeout: float) -> dict[str, object]:
    """One simulation: its wall time, events and peak memory, or timed_out / failed."""
    with tempfile.TemporaryDirectory(prefix="harmonia-scale-") as tmp:
        perf = Path(tmp) / "perf.json"
        command = [str(simulator), "--scenario", str(path), "--policy", policy,
                   "--out", str(Path(tmp) / "out.json"), "--perf", str(perf)]  # fmt: skip
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return {"timed_out": True, "wall_s": timeout}
        if done.returncode != 0:
            return {
                "failed": done.stderr.strip()[-300:],
                "wall_s": time.monotonic() - started,
            }
        figures: dict[str, object] = json.loads(perf.read_text())
        return figures


def finished(figures: dict[str, object]) -> bool:
    return not figures.get("timed_out") and "failed" not in figures


def exponent(walls: dict[int, float]) -> float | None:
    """k in wall ~ jobs^k, the least-squares slope of log wall against log jobs."""
    points = [(math.log(n), math.log(w)) for n, w in walls.items() if w > 0]
    if len(points) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def measure(
    args: argparse.Namespace,
    builds: dict[str, tuple[Path, list[int], list[str]]],
    seeds: list[int],
) -> Rows:
    """Every build x policy x seed at every size, smallest size first, --workers at once."""
    rows: Rows = {}
    given_up: set[tuple[str, str]] = set()
    sizes = sorted({n for _, build_sizes, _ in builds.values() for n in build_sizes})
    with (
        tempfile.TemporaryDirectory(prefix="harmonia-scale-") as tmp,
        ThreadPoolExecutor(args.workers) as pool,
    ):
        for size in sizes:
            tasks = []
            for seed in seeds:
                doc = scenario(
                    args.setting, args.trace, size or 10**9, args.requests, seed
                )
                jobs = len(doc["apps"])  # type: ignore[arg-type]
                path = Path(tmp) / f"scenario-{size}-{seed}.json"
                path.write_text(json.dumps(doc))
                for build, (simulator, build_sizes, policies) in builds.items():
                    for policy in policies:
                        if size in build_sizes and (build, policy) not in given_up:
                            key = (build, policy, seed)
                            tasks.append((key, jobs, pool.submit(
                                run, simulator, path, policy, args.timeout)))  # fmt: skip
            for key, jobs, future in tasks:
                figures = future.result()
                figures["load"] = os.getloadavg()[0]
                rows.setdefault(key, {})[jobs] = figures
                print(f"{key} {jobs}: {figures}", file=sys.stderr, flush=True)
                if not finished(figures):
                    given_up.add(key[:2])  # a larger size would not finish either
    return rows


def table(rows: Rows, build: str, seeds: list[int], timeout: float) -> None:
    keys = [k for k in rows if k[0] == build]
    policies = list(dict.fromkeys(p for _, p, _ in keys))
    sizes = sorted({n for k in keys for n in rows[k]})
    print(f"\n{build}: median wall seconds over seeds {','.join(map(str, seeds))}\n")
    print(
        "| policy | "
        + " | ".join(f"{n} jobs" for n in sizes)
        + " | k (median, range) | peak RSS (MB) |"
    )
    print("| --- |" + " ---: |" * (len(sizes) + 2))
    for policy in policies:
        cells = []
        for n in sizes:
            runs = [rows.get((build, policy, s), {}).get(n) for s in seeds]
            done = [float(f["wall_s"]) for f in runs if f and finished(f)]  # type: ignore[arg-type]
            if any(f and f.get("timed_out") for f in runs):
                cells.append(f"> {timeout:.0f}")
            elif any(f and "failed" in f for f in runs):
                cells.append("failed")
            else:
                cells.append(f"{statistics.median(done):.2f}" if done else "")
        ks = []
        for s in seeds:
            by_size = rows.get((build, policy, s), {})
            k = exponent(
                {n: float(f["wall_s"]) for n, f in by_size.items() if finished(f)}  # type: ignore[arg-type]
            )
            if k is not None:
                ks.append(k)
        k_cell = (
            f"{statistics.median(ks):.2f} ({min(ks):.2f}-{max(ks):.2f})" if ks else ""
        )
        largest = [
            float(f["peak_rss_kb"])  # type: ignore[arg-type]
            for s in seeds
            for n, f in rows.get((build, policy, s), {}).items()
            if finished(f) and n == max(sizes)
        ]
        rss = f"{max(largest) / 1024:.0f}" if largest else ""
        print(f"| {policy} | " + " | ".join(cells) + f" | {k_cell} | {rss} |")


def ratios(rows: Rows, seeds: list[int]) -> None:
    """The baseline's wall time over this build's, per policy and size, median over seeds."""
    pairs: dict[tuple[str, int], list[float]] = {}
    for (build, policy, seed), by_size in rows.items():
        if build != "baseline":
            continue
        for n, f in by_size.items():
            new = rows.get(("this build", policy, seed), {}).get(n)
            if new and finished(new) and finished(f):
                pairs.setdefault((policy, n), []).append(
                    float(f["wall_s"]) / float(new["wall_s"])  # type: ignore[arg-type]
                )
    if not pairs:
        return
    sizes = sorted({n for _, n in pairs})
    print("\nbaseline wall / this build's wall (median, range over seeds)\n")
    print("| policy | " + " | ".join(f"{n} jobs" for n in sizes) + " |")
    print("| --- |" + " ---: |" * len(sizes))
    for policy in dict.fromkeys(p for p, _ in pairs):
        cells = []
        for n in sizes:
            r = pairs.get((policy, n))
            cells.append(
                f"{statistics.median(r):.1f} ({min(r):.1f}-{max(r):.1f})" if r else ""
            )
        print(f"| {policy} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=KTH)
    parser.add_argument(
        "--repeat", type=int, default=1,
        help="replay the trace this many times back to back (a longer site's log)",
    )  # fmt: skip
    parser.add_argument("--jobs", default="200,800,3200,12800",
                        help="sizes, comma-separated; 0: the whole trace")  # fmt: skip
    parser.add_argument(
        "--policies", default="", help="comma-separated (default: every one)"
    )
    parser.add_argument("--setting", choices=("mix", "machine"), default="mix")
    parser.add_argument(
        "--requests", default="phases", help="machine: the request model"
    )
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--simulator", type=Path, help="default: this build's harmonia-sim"
    )
    parser.add_argument(
        "--baseline", type=Path, help="another build's harmonia-sim, run beside it"
    )
    parser.add_argument("--baseline-jobs", default="100,200")
    parser.add_argument("--baseline-policies", default="datawarp,min-stall")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    simulator = args.simulator or find_simulator()
    listed = subprocess.run(
        [str(simulator), "--list-policies"], capture_output=True, text=True, check=True
    )
    known = listed.stdout.split()
    policies = [p for p in args.policies.split(",") if p] or [
        p for p in policy_names() if p in known
    ]
    seeds = [int(s) for s in args.seeds.split(",")]
    builds = {
        "this build": (simulator, [int(n) for n in args.jobs.split(",")], policies)
    }
    if args.baseline:
        builds["baseline"] = (
            args.baseline,
            [int(n) for n in args.baseline_jobs.split(",")],
            args.baseline_policies.split(","),
        )
        builds["this build"][1].extend(builds["baseline"][1])
    print(f"{simulator}, setting {args.setting}, load average {os.getloadavg()[0]:.2f}",
          file=sys.stderr)  # fmt: skip
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="harmonia-trace-") as tmp:
        if args.repeat > 1:
            args.trace = repeated(args.trace, args.repeat, Path(tmp))
        rows = measure(args, builds, seeds)
    for build in builds:
        table(rows, build, seeds, args.timeout)
    ratios(rows, seeds)
    print(
        f"\n{len(rows)} series in {time.monotonic() - started:.0f} s, "
        f"load average at the end {os.getloadavg()[0]:.2f}"
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "setting": args.setting,
                    "seeds": seeds,
                    "rows": [
                        {"build": b, "policy": p, "seed": s, "by_jobs": by_size}
                        for (b, p, s), by_size in rows.items()
                    ],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
