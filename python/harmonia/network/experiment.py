"""Re-run the experiments of Brown et al., "Interference between I/O and MPI Traffic on Fat-tree
Networks" (ICPP 2018) with harmonia-netsim: the survey of Table 1, job sizes, job placement, I/O
server placement, I/O throttling and the I/O-congestion threshold (`harmonia reproduce network`).

The paper's numbers below are printed beside ours for comparison only; they never feed a run.
Every case is a network scenario (harmonia.network.model) built here from a base; identical runs
(the same baseline shared by several cases) are simulated once.
"""

import copy
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from harmonia.network.model import (
    NetScenario,
    RunDone,
    load_run,
    normalize,
    run_all,
    summarize,
    validate_netsim,
)
from harmonia.network.plots import BASELINE_COLOR, TRAFFIC_COLOR, draw_box, latency_unit

KIB, MIB = 1024, 1024 * 1024
SIZES = {"4 KiB": 4 * KIB, "512 KiB": 512 * KIB, "4 MiB": 4 * MIB}
# Table 1 of the paper (its intervals per size, from the text: thresholds at 500-100 us for
# 512 KB and 5-1 ms for 4 MB); two intervals per size, one each side of the I/O threshold.
SURVEY_INTERVALS = {"4 KiB": [1e-3, 100e-6], "512 KiB": [1e-3, 100e-6], "4 MiB": [10e-3, 1e-3]}
THRESHOLD_INTERVALS = {
    "512 KiB": [5e-3, 1e-3, 500e-6, 200e-6, 100e-6, 50e-6, 0.0],
    "4 MiB": [50e-3, 20e-3, 10e-3, 5e-3, 2e-3, 1e-3, 0.0],
}
THROTTLE_WINDOWS = [0.0, 1e-3, 1.5e-3, 2e-3, 2.5e-3, 3e-3, 4e-3, 6e-3]
# Section 5's representative patterns: I/O performance under 4 MB MPI messages every 500 us,
# MPI performance (4 KB every 500 us) under checkpoint-style 4 MB I/O.
IO_CASE = {"io": (4 * MIB, 128e-3), "mpi": (4 * MIB, 500e-6)}
MPI_CASE = {"mpi": (4 * KIB, 500e-6), "io": (4 * MIB, 0.0)}


@dataclass(frozen=True)
class Settings:
    system: str = "scaled"  # a preset of harmonia.network.model
    network: str = "fluid"  # the network model: "fluid" or "packet"
    seed: int = 1
    periods: int = 25  # simulated time of a periodic run, in periods of its slowest job
    warmup: int = 5  # transfers per client not recorded (the paper: 50)
    checkpoint_requests: int = 100  # per I/O client in the throttling experiment (paper: 1,000)
    throttle_mpi_samples: int = 200
    threshold_samples: int = 60
    # Bounds on a periodic run's simulated time (periods of its slowest job)
    min_time: float = 0.0
    max_time: float = math.inf

    @classmethod
    def for_network(cls, system: str, network: str) -> "Settings":
        """The settings of `network`: the packet model simulates every packet, hundreds of times
        slower than the fluid one (docs/benchmarks.md), so its runs are shorter: one warm-up
        transfer per client (none for a job too slow to record after it), periodic runs of 3
        periods of their slowest job but at least 5 ms and at most 20 ms, checkpoints of 5
        requests per client, 20 MPI and 5 I/O samples."""
        if network == "fluid":
            return cls(system=system)
        return cls(
            system=system,
            network=network,
            periods=3,
            warmup=1,
            checkpoint_requests=5,
            throttle_mpi_samples=20,
            threshold_samples=5,
            min_time=5e-3,
            max_time=20e-3,
        )


def _fmt_interval(seconds: float) -> str:
    if seconds == 0:
        return "0"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


# Checkpoint-style clients start spread over 1 ms: in a fluid model, clients that start at the
# same instant share exactly and move in lockstep for ever (docs/network-interference.md).
CHECKPOINT_SPREAD = 1e-3


def _job(size: int, interval: float, *, enabled: bool = True, **extra: Any) -> dict[str, Any]:
    if interval == 0:
        extra.setdefault("start_spread", CHECKPOINT_SPREAD)
    return {"enabled": enabled, "size": size, "interval": interval, **extra}


@dataclass
class Case:
    """One point of an experiment: a scenario and which jobs it measures."""

    experiment: str
    label: str
    params: dict[str, Any]
    document: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def scenario(self) -> NetScenario:
        return validate_netsim(self.document, Path(f"{self.experiment}/{self.label}"))


def _document(
    settings: Settings,
    name: str,
    mpi: dict[str, Any],
    io: dict[str, Any],
    measure: list[str],
    *,
    io_fraction: float = 0.5,
    job_placement: str = "random-node",
    server_placement: str = "isolated-target",
    periodic: bool = True,
    link_loads: bool = False,
) -> dict[str, Any]:
    run: dict[str, Any] = {"measure": measure}
    if periodic:
        # A fixed simulated time instead of a sample count, so that a fast background job does
        # not run for as long as a slow measured one needs for its samples.
        slowest = max(mpi["interval"], io["interval"], 1e-3)
        duration = min(max(settings.periods * slowest, settings.min_time), settings.max_time)
        run["max_time"] = duration
        for job in (mpi, io):
            job.setdefault("samples", 10**9)
            # A job too slow to record after its warm-up within the run records its first
            # transfers: they start at random over its first period, mostly after the other job
            # has reached its steady state.
            if (settings.warmup + 2) * job["interval"] > duration:
                job.setdefault("warmup", 0)
    for job in (mpi, io):
        job.setdefault("warmup", settings.warmup)
    return {
        "scenario": {"name": name, "seed": settings.seed},
        "network": {"preset": settings.system, "model": settings.network},
        "servers": {"placement": server_placement},
        "jobs": {"placement": job_placement, "io_fraction": io_fraction},
        "mpi": mpi,
        "io": io,
        "run": run,
        "output": {"link_loads": link_loads},
    }


def survey_cases(s: Settings) -> list[Case]:
    """Table 1 / Fig. 3 and 5: every I/O pattern against every MPI pattern, both measured."""
    cases = []
    for io_size, io_intervals in SURVEY_INTERVALS.items():
        for io_interval in io_intervals:
            for mpi_size, mpi_intervals in SURVEY_INTERVALS.items():
                for mpi_interval in mpi_intervals:
                    label = (
                        f"io-{io_size}-{_fmt_interval(io_interval)}"
                        f"_mpi-{mpi_size}-{_fmt_interval(mpi_interval)}"
                    ).replace(" ", "")
                    doc = _document(
                        s,
                        label,
                        _job(SIZES[mpi_size], mpi_interval),
                        _job(SIZES[io_size], io_interval),
                        ["mpi", "io"],
                    )
                    params = {
                        "io_size": io_size,
                        "io_interval": io_interval,
                        "mpi_size": mpi_size,
                        "mpi_interval": mpi_interval,
                    }
                    cases.append(Case("survey", label, params, doc))
    return cases


def job_size_cases(s: Settings) -> list[Case]:
    """Fig. 7 and 8: the analysed job on 25, 50 or 75 % of the compute nodes."""
    cases = []
    for share in (0.25, 0.5, 0.75):
        for interval in (2e-3, 16e-3, 128e-3):
            label = f"io-{int(share * 100)}pct-{_fmt_interval(interval)}".replace(" ", "")
            doc = _document(
                s,
                label,
                _job(4 * MIB, 500e-6),
                _job(4 * MIB, interval),
                ["io"],
                io_fraction=share,
            )
            cases.append(
                Case("job-sizes", label, {"job": "io", "share": share, "x": interval}, doc)
            )
        for size_name, size in (("4 KiB", 4 * KIB), ("64 KiB", 64 * KIB), ("1 MiB", MIB)):
            label = f"mpi-{int(share * 100)}pct-{size_name}".replace(" ", "")
            doc = _document(
                s, label, _job(size, 500e-6), _job(4 * MIB, 0.0), ["mpi"], io_fraction=1 - share
            )
            params = {"job": "mpi", "share": share, "x": size_name}
            cases.append(Case("job-sizes", label, params, doc))
    return cases


def _placement_cases(s: Settings, experiment: str, key: str, values: list[str]) -> list[Case]:
    cases = []
    for value in values:
        for job, pattern in (("io", IO_CASE), ("mpi", MPI_CASE)):
            label = f"{job}-{value}"
            doc = _document(
                s,
                label,
                _job(*pattern["mpi"]),
                _job(*pattern["io"]),
                [job],
                link_loads=job == "mpi",
                job_placement=value if key == "job_placement" else "random-node",
                server_placement=value if key == "server_placement" else "isolated-target",
            )
            cases.append(Case(experiment, label, {"job": job, "placement": value}, doc))
    return cases


def job_placement_cases(s: Settings) -> list[Case]:
    """Fig. 9: random-node against random-switch job placement."""
    return _placement_cases(s, "job-placement", "job_placement", ["random-node", "random-switch"])


def server_placement_cases(s: Settings) -> list[Case]:
    """Fig. 10: isolated-, spread- and random-target I/O server placement."""
    placements = ["isolated-target", "spread-target", "random-target"]
    return _placement_cases(s, "server-placement", "server_placement", placements)


def throttle_cases(s: Settings) -> list[Case]:
    """Fig. 11: a checkpoint of fixed size with a throttle window between request starts,
    4 KiB MPI messages every 500 us in the background; both measured."""
    cases = []
    for window in THROTTLE_WINDOWS:
        label = f"window-{_fmt_interval(window)}".replace(" ", "")
        mpi = _job(4 * KIB, 500e-6, samples=s.throttle_mpi_samples)
        io = _job(4 * MIB, 0.0, window=window, finite=True, samples=s.checkpoint_requests)
        doc = _document(s, label, mpi, io, ["mpi", "io"], periodic=False)
        cases.append(Case("throttle", label, {"window": window}, doc))
    return cases


def threshold_cases(s: Settings) -> list[Case]:
    """Section 4.1: the I/O job alone (half the compute nodes) at shrinking intervals."""
    cases = []
    for size_name, intervals in THRESHOLD_INTERVALS.items():
        for interval in intervals:
            label = f"{size_name}-{_fmt_interval(interval)}".replace(" ", "")
            io = _job(SIZES[size_name], interval, samples=s.threshold_samples)
            mpi = _job(4 * KIB, 500e-6, enabled=False)
            doc = _document(s, label, mpi, io, ["io"], periodic=False)
            cases.append(Case("threshold", label, {"size": size_name, "interval": interval}, doc))
    return cases


EXPERIMENTS: dict[str, Callable[[Settings], list[Case]]] = {
    "threshold": threshold_cases,
    "job-placement": job_placement_cases,
    "server-placement": server_placement_cases,
    "throttle": throttle_cases,
    "job-sizes": job_size_cases,
    "survey": survey_cases,
}


def _key(config: dict[str, Any]) -> str:
    body = {k: v for k, v in config.items() if k != "name"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def run_cases(
    binary: Path,
    cases: list[Case],
    out: Path,
    jobs: int,
    on_start: Callable[[int], None],
    on_done: Callable[[RunDone], None],
) -> None:
    """Simulate every distinct run of every case into out/runs/<hash>.json, then attach the
    results and summaries to the cases."""
    unique: dict[str, dict[str, Any]] = {}
    wiring: list[tuple[Case, dict[str, str]]] = []
    for case in cases:
        configs = normalize(case.scenario())
        keys = {}
        for run, config in configs.items():
            key = _key(config)
            unique.setdefault(key, config)
            keys[run] = key
        wiring.append((case, keys))
    runs = out / "runs"
    todo = {k: c for k, c in unique.items() if not (runs / f"{k}.json").is_file()}
    on_start(len(todo))
    run_all(binary, todo, runs, jobs, on_done)
    for case, keys in wiring:
        case.results = {run: load_run(runs / f"{key}.json") for run, key in keys.items()}
        case.summary = summarize(case.results, list(case.scenario().run.measure))


# --- Report ------------------------------------------------------------------------------


def _slow(case: Case, traffic: str, key: str = "mean") -> float:
    value: float = case.summary.get(traffic, {}).get("slowdown", {}).get(key, float("nan"))
    return value


# The packet model's short runs can end before a slow periodic job's first recorded transfer.
NOT_MEASURED = "not measured: no transfer recorded in the run"


def _fmt_slowdown(case: Case, traffic: str, *, with_max: bool = True) -> str:
    mean, worst = _slow(case, traffic), _slow(case, traffic, "max")
    if math.isnan(mean):
        return NOT_MEASURED
    return f"{mean:.2f}x (max {worst:.2f}x)" if with_max else f"{mean:.2f}x"


def _mean(case: Case, traffic: str, run: str) -> float:
    value: float = case.summary[traffic][run]["latency"]["mean"]
    return value


def threshold_of(cases: list[Case], size: str, factor: float = 2.0) -> tuple[float, float] | None:
    """The I/O-congestion threshold: the interval below which the mean request time first
    exceeds `factor` times the uncongested one (at the largest interval). Returns (the last
    interval above the threshold, the first one below it), or None if never crossed."""
    points = sorted(
        ((c.params["interval"], _mean(c, "io", "baseline")) for c in cases
         if c.params["size"] == size),
        reverse=True,
    )  # fmt: skip
    reference = points[0][1]
    for (above, _), (below, latency) in zip(points, points[1:], strict=False):
        if latency > factor * reference:
            return above, below
    return None


def predicted_threshold(cases: list[Case], size: str) -> float:
    """Where the I/O job saturates its servers' links: c clients share a server's link, each
    asking for one request every interval + size / link_bw, so the link is full once
    c * size / link_bw >= interval + size / link_bw (every request then waits for others)."""
    result = next(c for c in cases if c.params["size"] == size).results["baseline-io"]
    clients_per_server = result["layout"]["io_clients"] / len(result["layout"]["servers"])
    seconds: float = (clients_per_server - 1) * SIZES[size] / result["fabric"]["link_bw"]
    return seconds


def _fmt_largest(cases: list[Case], traffic: str) -> str:
    """The largest mean slowdown of `traffic` over the cases that measured it, and its case."""
    measured = [c for c in cases if not math.isnan(_slow(c, traffic))]
    if not measured:
        return NOT_MEASURED
    worst = max(measured, key=lambda c: _slow(c, traffic))
    return f"{_slow(worst, traffic):.2f}x ({worst.label})"


def _fmt_median(values: np.ndarray) -> str:
    measured = values[~np.isnan(values)]
    return f"{np.median(measured):.2f}x" if measured.size else "not measured"


def report_rows(experiment: str, cases: list[Case]) -> list[tuple[str, str, str]]:
    """(what, paper, ours) rows for one experiment."""
    rows: list[tuple[str, str, str]] = []
    by = {c.label: c for c in cases}
    if experiment == "threshold":
        paper_threshold = {
            "512 KiB": "between 500 and 100 us",
            "4 MiB": "between 5 and 1 ms (about 2 ms)",
        }
        for size in THRESHOLD_INTERVALS:
            found = threshold_of(cases, size)
            ours = (
                f"between {_fmt_interval(found[0])} and {_fmt_interval(found[1])}"
                if found
                else "not crossed"
            )
            rows.append((f"I/O-congestion threshold, {size} requests", paper_threshold[size], ours))
            rows.append(
                (
                    f"  predicted by (clients per server - 1) x size / link_bw, {size}",
                    "",
                    _fmt_interval(predicted_threshold(cases, size)),
                )
            )
            for c in cases:
                if c.params["size"] == size:
                    unit, f = latency_unit([_mean(c, "io", "baseline")])
                    rows.append(
                        (
                            f"  {size} every {_fmt_interval(c.params['interval'])}: mean request",
                            "",
                            f"{_mean(c, 'io', 'baseline') * f:.3g} {unit}",
                        )
                    )
    elif experiment in ("job-placement", "server-placement"):
        paper_placement = {
            ("io", "random-node"): "+11.8 % mean",
            ("io", "random-switch"): "baseline and interference similar",
            ("mpi", "random-node"): "about 8x (800 %) mean",
            ("mpi", "random-switch"): "baseline and interference similar",
            ("io", "isolated-target"): "similar to random-target",
            ("io", "spread-target"): "least slowdown (best)",
            ("io", "random-target"): "similar to isolated-target",
            ("mpi", "isolated-target"): "similar to random-target",
            ("mpi", "spread-target"): "least slowdown (best)",
            ("mpi", "random-target"): "similar to isolated-target",
        }
        for c in cases:
            job, placement = c.params["job"], c.params["placement"]
            what = "I/O 4 MiB / 128 ms" if job == "io" else "MPI 4 KiB / 500 us"
            rows.append(
                (
                    f"{what} slowdown (mean), {placement}",
                    paper_placement[(job, placement)],
                    _fmt_slowdown(c, job),
                )
            )
    elif experiment == "throttle":
        base = by["window-0"]
        io_base = base.summary["io"]["interference"]["quota_time"]
        mpi_base = _mean(base, "mpi", "interference")
        mpi_alone = _mean(base, "mpi", "baseline")
        for c in cases:
            window = c.params["window"]
            io_time = c.summary["io"]["interference"]["quota_time"]
            mpi = _mean(c, "mpi", "interference")
            note = ""
            if window == 3e-3:
                note = "checkpoint +18 %, MPI mean latency improves by over 200 %"
            elif window == 2e-3:
                note = "checkpoint unchanged below 2 ms"
            rows.append(
                (
                    f"window {_fmt_interval(window)}: checkpoint time, MPI mean latency",
                    note,
                    f"{io_time * 1e3:.1f} ms ({(io_time / io_base - 1) * 100:+.0f} %),"
                    f" {mpi * 1e6:.3g} us ({(mpi_base / mpi - 1) * 100:+.0f} % better;"
                    f" {mpi / mpi_alone:.2f}x alone)",
                )
            )
    elif experiment == "job-sizes":
        for c in cases:
            job, share = c.params["job"], c.params["share"]
            x = c.params["x"]
            what = (
                f"I/O job on {share:.0%} of nodes, 4 MiB every {_fmt_interval(x)}"
                if job == "io"
                else f"MPI job on {share:.0%} of nodes, {x} every 500 us"
            )
            note = ""
            if job == "io" and share == 0.25 and x == 128e-3:
                note = "highest I/O slowdown: +18 %"
            if job == "mpi" and share == 0.75:
                note = "1.6-3.2x"
            rows.append((f"{what}: slowdown (mean)", note, _fmt_slowdown(c, job, with_max=False)))
    elif experiment == "survey":
        mpi_values = np.array([_slow(c, "mpi") for c in cases])
        io_values = np.array([_slow(c, "io") for c in cases])
        rows += [
            ("largest MPI slowdown (mean)", "7.6x", _fmt_largest(cases, "mpi")),
            ("largest I/O slowdown (mean)", "1.9x (4 KB I/O vs 4 MB MPI every 100 us)",
             _fmt_largest(cases, "io")),
            ("median MPI / I/O slowdown over the grid", "MPI suffers more than I/O",
             f"{_fmt_median(mpi_values)} / {_fmt_median(io_values)}"),
        ]  # fmt: skip
    return rows


def markdown(experiments: dict[str, list[Case]], settings: Settings) -> str:
    lines = [
        f"System: `{settings.system}` preset, {settings.network} network model,"
        f" seed {settings.seed}.",
        "",
    ]
    for experiment, cases in experiments.items():
        lines += [f"### {experiment}", "", "| what | paper | ours |", "| --- | --- | --- |"]
        lines += [f"| {w} | {p} | {o} |" for w, p, o in report_rows(experiment, cases)]
        lines.append("")
    return "\n".join(lines)


# --- Plots -------------------------------------------------------------------------------


def plot_threshold(cases: list[Case], out: Path) -> None:
    figure = Figure(figsize=(8, 4), layout="constrained")
    panels = figure.subplots(1, len(THRESHOLD_INTERVALS))
    for axes, size in zip(panels, THRESHOLD_INTERVALS, strict=True):
        mine = [c for c in cases if c.params["size"] == size]
        unit, f = latency_unit([_mean(c, "io", "baseline") for c in mine])
        for x, c in enumerate(mine):
            draw_box(
                axes, x, c.summary["io"]["baseline"]["latency"], f, BASELINE_COLOR, whisker="p99"
            )
        axes.set_xticks(range(len(mine)), [_fmt_interval(c.params["interval"]) for c in mine])
        axes.set_xlabel("I/O interval")
        axes.set_ylabel(f"request time ({unit})")
        found = threshold_of(cases, size)
        note = f"threshold {_fmt_interval(found[0])}-{_fmt_interval(found[1])}" if found else ""
        axes.set_title(f"{size} requests alone {note}", fontsize=10)
    figure.suptitle("I/O-congestion threshold (paper section 4.1)")
    figure.savefig(out, dpi=110)


def plot_pairs(cases: list[Case], title: str, out: Path) -> None:
    """Fig. 9/10 style: per case, the baseline box (black) and the interference box (colored)."""
    jobs = ["io", "mpi"]
    figure = Figure(figsize=(10, 4.2), layout="constrained")
    panels = figure.subplots(1, 2)
    for axes, job in zip(panels, jobs, strict=True):
        mine = [c for c in cases if c.params["job"] == job]
        unit, f = latency_unit([_mean(c, job, "interference") for c in mine])
        for k, c in enumerate(mine):
            draw_box(
                axes, 3 * k, c.summary[job]["baseline"]["latency"], f, BASELINE_COLOR, whisker="p99"
            )
            draw_box(
                axes,
                3 * k + 1,
                c.summary[job]["interference"]["latency"],
                f,
                TRAFFIC_COLOR[job],
                whisker="p99",
            )
        axes.set_xticks(
            [3 * k + 0.5 for k in range(len(mine))], [c.params["placement"] for c in mine]
        )
        axes.set_ylabel(f"latency ({unit})")
        axes.set_title("I/O 4 MiB / 128 ms" if job == "io" else "MPI 4 KiB / 500 us", fontsize=10)
    figure.suptitle(f"{title}: black baseline, colored interference (whiskers to p99)")
    figure.savefig(out, dpi=110)


def plot_throttle(cases: list[Case], out: Path) -> None:
    windows = [c.params["window"] * 1e3 for c in cases]
    io_times = [c.summary["io"]["interference"]["quota_time"] * 1e3 for c in cases]
    mpi = [_mean(c, "mpi", "interference") * 1e6 for c in cases]
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.subplots()
    axes.plot(windows, io_times, "o-", color=TRAFFIC_COLOR["io"], label="checkpoint time")
    axes.set_xlabel("throttle window (ms)")
    axes.set_ylabel("checkpoint time (ms)", color=TRAFFIC_COLOR["io"])
    twin = axes.twinx()
    twin.plot(windows, mpi, "s--", color=TRAFFIC_COLOR["mpi"], label="MPI mean latency")
    twin.set_ylabel("MPI mean latency (us)", color=TRAFFIC_COLOR["mpi"])
    figure.suptitle("I/O throttling (paper Fig. 11)")
    figure.savefig(out, dpi=110)


def plot_slowdown_grid(cases: list[Case], out: Path) -> None:
    """Survey: mean slowdown of MPI and of I/O for every (I/O pattern, MPI pattern) pair."""
    io_patterns = sorted({(c.params["io_size"], c.params["io_interval"]) for c in cases},
                         key=lambda p: (SIZES[p[0]], -p[1]))  # fmt: skip
    mpi_patterns = sorted({(c.params["mpi_size"], c.params["mpi_interval"]) for c in cases},
                          key=lambda p: (SIZES[p[0]], -p[1]))  # fmt: skip
    figure = Figure(figsize=(13, 5.5), layout="constrained")
    panels = figure.subplots(1, 2)
    for axes, traffic in zip(panels, ("mpi", "io"), strict=True):
        grid = np.full((len(io_patterns), len(mpi_patterns)), np.nan)
        for c in cases:
            i = io_patterns.index((c.params["io_size"], c.params["io_interval"]))
            j = mpi_patterns.index((c.params["mpi_size"], c.params["mpi_interval"]))
            grid[i, j] = _slow(c, traffic)
        image = axes.imshow(grid, cmap="Reds", vmin=1, aspect="auto")
        for (i, j), value in np.ndenumerate(grid):
            axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
        mpi_labels = [f"{s}\n{_fmt_interval(t)}" for s, t in mpi_patterns]
        io_labels = [f"{s} {_fmt_interval(t)}" for s, t in io_patterns]
        axes.set_xticks(range(len(mpi_patterns)), mpi_labels, fontsize=8)
        axes.set_yticks(range(len(io_patterns)), io_labels, fontsize=8)
        axes.set_xlabel("MPI pattern (size, interval)")
        axes.set_ylabel("I/O pattern (size, interval)")
        axes.set_title(f"{'MPI' if traffic == 'mpi' else 'I/O'} slowdown (mean latency)")
        figure.colorbar(image, ax=axes)
    figure.suptitle("Survey of Table 1 (paper Fig. 3 and 5)")
    figure.savefig(out, dpi=110)


def plot_survey_boxes(cases: list[Case], analysed: str, out: Path) -> None:
    """Fig. 3 (analysed = "io") or Fig. 5 ("mpi"): one panel per (analysed size, other size);
    in each, one cluster per interval of the analysed job, holding its baseline box (black) and
    one colored box per interval of the other job, shorter intervals darker."""
    other = "mpi" if analysed == "io" else "io"
    sizes = list(SURVEY_INTERVALS)
    figure = Figure(figsize=(4.2 * len(sizes), 3.4 * len(sizes)), layout="constrained")
    grid = figure.subplots(len(sizes), len(sizes), squeeze=False)
    palette = colormaps["Reds" if analysed == "io" else "Blues"]
    for row, own_size in enumerate(sizes):
        for column, other_size in enumerate(sizes):
            axes = grid[row][column]
            mine = [
                c
                for c in cases
                if c.params[f"{analysed}_size"] == own_size
                and c.params[f"{other}_size"] == other_size
            ]
            own_intervals = SURVEY_INTERVALS[own_size]
            other_intervals = SURVEY_INTERVALS[other_size]
            unit, f = latency_unit([_mean(c, analysed, "interference") for c in mine])
            width = 1.0 / (len(other_intervals) + 2)
            shown: list[float] = []
            for k, own in enumerate(own_intervals):
                cluster = [c for c in mine if c.params[f"{analysed}_interval"] == own]
                base = cluster[0].summary[analysed]["baseline"]["latency"]
                draw_box(axes, k, base, f, BASELINE_COLOR, width * 0.9, whisker=None)
                for c in cluster:
                    for run in ("baseline", "interference"):
                        latency = c.summary[analysed][run]["latency"]
                        shown += [latency[key] * f for key in ("q1", "q3", "mean")]
                for j, other_interval in enumerate(other_intervals):
                    case = next(
                        c for c in cluster if c.params[f"{other}_interval"] == other_interval
                    )
                    color = palette(0.45 + 0.5 * j / max(len(other_intervals) - 1, 1))
                    latency = case.summary[analysed]["interference"]["latency"]
                    draw_box(
                        axes, k + (j + 1) * width, latency, f, color, width * 0.9, whisker=None
                    )
            low, high = min(shown), max(shown)
            axes.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low) + 1e-12)
            axes.set_xticks(
                [k + width * len(other_intervals) / 2 for k in range(len(own_intervals))],
                [_fmt_interval(i) for i in own_intervals],
            )
            axes.set_xlabel(f"{'I/O' if analysed == 'io' else 'MPI'} interval")
            axes.set_ylabel(f"{own_size} latency ({unit})")
            axes.set_title(
                f"{other.upper() if other == 'mpi' else 'I/O'} {other_size} at "
                + ", ".join(_fmt_interval(i) for i in other_intervals),
                fontsize=9,
            )
    which = (
        "I/O requests under MPI traffic (paper Fig. 3)"
        if analysed == "io"
        else ("MPI messages under I/O traffic (paper Fig. 5)")
    )
    figure.suptitle(
        f"{which}: black baseline, colored with the other job (darker: shorter interval)"
    )
    figure.savefig(out, dpi=100)


def plot_job_sizes(cases: list[Case], out: Path) -> None:
    figure = Figure(figsize=(10, 4), layout="constrained")
    panels = figure.subplots(1, 2)
    for axes, job in zip(panels, ("io", "mpi"), strict=True):
        mine = [c for c in cases if c.params["job"] == job]
        xs = list(dict.fromkeys(c.params["x"] for c in mine))
        shares = sorted({c.params["share"] for c in mine})
        width = 0.8 / len(shares)
        for k, share in enumerate(shares):
            values = [
                next(
                    _slow(c, job) for c in mine if c.params["share"] == share and c.params["x"] == x
                )
                for x in xs
            ]
            axes.bar(np.arange(len(xs)) + k * width, values, width, label=f"{share:.0%} of nodes")
        labels = [_fmt_interval(x) if job == "io" else str(x) for x in xs]
        axes.set_xticks(np.arange(len(xs)) + width * (len(shares) - 1) / 2, labels)
        axes.axhline(1, color="grey", linestyle="--", linewidth=0.8)
        axes.set_ylabel("slowdown (mean)")
        axes.set_title("I/O job: 4 MiB requests, interval" if job == "io"
                       else "MPI job: message size, every 500 us", fontsize=10)  # fmt: skip
        axes.legend(fontsize=8)
    figure.suptitle("Job sizes (paper Fig. 7 and 8)")
    figure.savefig(out, dpi=110)


def write_plots(experiments: dict[str, list[Case]], out: Path) -> list[Path]:
    drawers: dict[str, tuple[str, Callable[[list[Case], Path], None]]] = {
        "threshold": ("threshold.png", plot_threshold),
        "job-placement": ("job-placement.png",
                          lambda c, p: plot_pairs(c, "Job placement (Fig. 9)", p)),
        "server-placement": ("server-placement.png",
                             lambda c, p: plot_pairs(c, "I/O server placement (Fig. 10)", p)),
        "throttle": ("throttle.png", plot_throttle),
        "job-sizes": ("job-sizes.png", plot_job_sizes),
        "survey": ("survey.png", plot_slowdown_grid),
    }  # fmt: skip
    written = []
    for experiment, cases in experiments.items():
        name, draw = drawers[experiment]
        draw(cases, out / name)
        written.append(out / name)
        if experiment == "survey":
            for analysed in ("io", "mpi"):
                path = out / f"survey-{analysed}.png"
                plot_survey_boxes(cases, analysed, path)
                written.append(path)
    return written


def select(names: list[str] | None, settings: Settings) -> dict[str, list[Case]]:
    """The cases of the named experiments (all when None); raises KeyError for unknown names."""
    chosen = names or list(EXPERIMENTS)
    for name in chosen:
        if name not in EXPERIMENTS:
            raise KeyError(name)
    return {name: EXPERIMENTS[name](copy.deepcopy(settings)) for name in chosen}
