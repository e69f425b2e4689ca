"""The bake-off (docs/bakeoff.md): every policy and peer on a grid of synthetic mixes x seeds,
each metric given as a mean with a 95 % confidence interval over seeds."""

import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from harmonia.darshan_import import SHARED_LOGS
from harmonia.plots import policy_color, slant_tick_labels
from harmonia.policies import EVERY_POLICY, PEERS
from harmonia.results import write_json
from harmonia.scenario import Scenario, normalize
from harmonia.simulator import RunOutcome, run_policy
from harmonia.workloads import GB, MixSpec, TraceSpec, synthetic_mix, trace_scenario

SMALL_SWF = Path(__file__).resolve().parents[3] / "examples" / "workloads" / "small.swf"
# Scenarios of the grid: the default mix, one where I/O dominates, one where compute does, the
# jobs of a small SWF trace (arrivals, sizes, run times, users, limits; I/O drawn), applications
# of the shared Darshan logs (up to 4x their bytes, arriving 10 s apart: enough to contend for the
# buffers), and, in the full grid only, a burst where every job arrives at once.
MIXES: tuple[MixSpec, ...] = (
    MixSpec(name="mixed"),
    MixSpec(name="io-heavy", ratio=(0.05, 1.0), phase_size=(8 * GB, 32 * GB)),
    MixSpec(name="compute-heavy", ratio=(2.0, 20.0)),
    MixSpec(name="swf-trace", trace=SMALL_SWF),
    MixSpec(name="darshan", darshan=SHARED_LOGS, darshan_scale=(1.0, 4.0), mean_interarrival=10.0),
    MixSpec(name="burst", mean_interarrival=0.0),
)
FULL_ONLY = ("burst",)
QUICK_JOBS, FULL_JOBS = 12, 32
QUICK_SEEDS, FULL_SEEDS = 5, 10
BOUNDED_SLOWDOWN_TAU = 10.0  # seconds: jobs shorter than this count as this long
# Kopanski and Rzadca's bounded slowdown threshold (Feitelson's longest, 10 minutes).
QUEUE_SLOWDOWN_TAU = 600.0


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    short: str  # terminal table header
    unit: str
    lower_is_better: bool


METRICS: tuple[Metric, ...] = (
    Metric("buffer_efficiency", "buffer efficiency (Eq. 4)", "buf.eff", "%", False),
    Metric("avg_phase_bandwidth", "phase bandwidth (Eq. 5)", "phaseBW", "MB/s", False),
    Metric("fairness", "fairness: last - first completion (Eq. 6)", "fair.", "s", True),
    Metric("avg_stall", "stall (Eq. 7)", "stall", "s", True),
    Metric("io_slowdown", "I/O slowdown", "I/O sd", "x", True),
    Metric("utilization", "buffer utilization", "util.", "%", False),
    Metric("mean_wait", "mean wait", "wait", "s", True),
    Metric("bounded_slowdown", "bounded slowdown", "bsld", "x", True),
    Metric("avg_completion", "completion", "compl.", "s", True),
)

# Two-sided 95 % Student t quantiles by degrees of freedom (1-30); the normal's beyond.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and half-width of its 95 % confidence interval (Student t; 0 for one value)."""
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return mean, 0.0
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return mean, t * float(np.std(values, ddof=1)) / math.sqrt(n)


def run_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The bake-off's metrics of one harmonia-sim result (docs/formats.md section 3)."""
    system = result["metrics"]
    phases: dict[str, list[dict[str, Any]]] = {}
    for phase in result["phases"]:
        phases.setdefault(phase["app"], []).append(phase)
    io_slowdowns, bounded = [], []
    for app in result["apps"]:
        own = phases.get(app["name"], [])
        alone = sum(p["io_alone"] for p in own)
        in_io = sum(p["wait"] + p["io"] for p in own)
        if alone > 0:
            io_slowdowns.append(in_io / alone)
        ideal = app["compute"] + alone
        bounded.append(max(1.0, app["completion"] / max(ideal, BOUNDED_SLOWDOWN_TAU)))
    return {
        "buffer_efficiency": system["buffer_efficiency"] * 100,
        "avg_phase_bandwidth": system["avg_phase_bandwidth"] / 1e6,
        "fairness": system["fairness"],
        "avg_stall": system["avg_stall"],
        "io_slowdown": float(np.mean(io_slowdowns)) if io_slowdowns else 1.0,
        "utilization": system["buffer_utilization"] * 100,
        "mean_wait": system["avg_wait"],
        "bounded_slowdown": float(np.mean(bounded)),
        "avg_completion": system["avg_completion"],
    }


# The batch-queue metrics of a trace replay, as Kopanski and Rzadca report them: the mean
# waiting time (submit to start) and the mean bounded slowdown, max(1, (wait + run) /
# max(run, 10 min)) with run = end - start.
QUEUE_METRICS: tuple[Metric, ...] = (
    Metric("queue_wait", "mean waiting time (submit to start)", "W", "s", True),
    Metric("queue_bsld", "mean bounded slowdown (10 min)", "BSLD", "x", True),
)


def queue_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The batch-queue metrics of one harmonia-sim result (a shared machine's)."""
    waits, slowdowns = [], []
    for app in result["apps"]:
        wait = app["start"] - app["arrival"]
        run = app["end"] - app["start"]
        waits.append(wait)
        slowdowns.append(max(1.0, (wait + run) / max(run, QUEUE_SLOWDOWN_TAU)))
    return {"queue_wait": float(np.mean(waits)), "queue_bsld": float(np.mean(slowdowns))}


Mix = MixSpec | TraceSpec


def mix_name(mix: Mix) -> str:
    return mix.label if isinstance(mix, TraceSpec) else mix.name


def mix_scenario(mix: Mix, seed: int) -> Scenario:
    """The scenario a mix draws with `seed`: a synthetic mix, or a trace's jobs with drawn I/O."""
    return trace_scenario(mix, seed) if isinstance(mix, TraceSpec) else synthetic_mix(mix, seed)


@dataclass(frozen=True)
class Grid:
    mixes: tuple[Mix, ...]
    seeds: tuple[int, ...]
    policies: tuple[str, ...]

    @property
    def metrics(self) -> tuple[Metric, ...]:
        """The metrics of its tables: a trace's adds the batch queue's."""
        traced = any(isinstance(m, TraceSpec) for m in self.mixes)
        return QUEUE_METRICS + METRICS if traced else METRICS

    @property
    def runs(self) -> int:
        return len(self.mixes) * len(self.seeds) * len(self.policies)


def make_grid(
    full: bool, seeds: tuple[int, ...] | None, policies: tuple[str, ...] | None = None
) -> Grid:
    """The grid to run: every policy and peer (or `policies`) on the quick or full mixes, over
    `seeds` (default: 1..5, or 1..10 with `full`). A Darshan mix whose logs are not on this
    machine is left out (`mixes_left_out` says so)."""
    jobs = FULL_JOBS if full else QUICK_JOBS
    if seeds is None:
        seeds = tuple(range(1, (FULL_SEEDS if full else QUICK_SEEDS) + 1))
    mixes = (
        tuple(m.scaled(jobs) for m in MIXES)
        if full
        else tuple(m for m in MIXES if m.name not in FULL_ONLY)
    )
    mixes = tuple(m for m in mixes if m.darshan is None or m.darshan.is_dir())
    return Grid(mixes, seeds, policies if policies is not None else EVERY_POLICY)


def make_trace_grid(
    trace: TraceSpec, seeds: tuple[int, ...] | None, policies: tuple[str, ...] | None = None
) -> Grid:
    """Every policy and peer (or `policies`) on a trace window x `seeds` (default 1..5) of its
    request model."""
    return Grid(
        (trace,),
        seeds if seeds is not None else tuple(range(1, QUICK_SEEDS + 1)),
        policies if policies is not None else EVERY_POLICY,
    )


def mixes_left_out(grid: Grid) -> list[str]:
    """Why mixes of MIXES are not in `grid` for lack of their Darshan logs on this machine."""
    present = {mix_name(m) for m in grid.mixes}
    return [
        f"mix {m.name} left out: no Darshan logs at {m.darshan}"
        for m in MIXES
        if m.darshan is not None and m.name not in present
    ]


# results[mix][policy][metric] -> one value per seed
Results = dict[str, dict[str, dict[str, list[float]]]]


def run_grid(
    grid: Grid,
    simulator: Path,
    out: Path,
    jobs: int,
    on_finished: Callable[[RunOutcome], None],
    on_progress: Callable[[str, str], None] | None = None,
) -> Results:
    """Simulate every (mix, seed, policy) into out/runs/<mix>/seed-<k>/<policy>.json;
    `on_progress` gets the progress lines of each simulation (policy, line).

    A result already there for the same scenario is reused (reported with 0 seconds), so an
    interrupted bake-off resumes.
    Raises RuntimeError naming the first run that failed.
    """
    tasks = []
    for mix in grid.mixes:
        for seed in grid.seeds:
            directory = out / "runs" / mix_name(mix) / f"seed-{seed}"
            directory.mkdir(parents=True, exist_ok=True)
            scenario_json = directory / "scenario.json"
            text = json.dumps(normalize(mix_scenario(mix, seed)), indent=2) + "\n"
            if not scenario_json.exists() or scenario_json.read_text(encoding="utf-8") != text:
                scenario_json.write_text(text, encoding="utf-8")
                for stale in directory.glob("*.json"):
                    if stale != scenario_json:
                        stale.unlink()
            for policy in grid.policies:
                name = mix_name(mix)
                tasks.append((name, seed, policy, scenario_json, directory / f"{policy}.json"))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending = {}
        for task in tasks:
            if task[4].exists():
                on_finished(RunOutcome(task[2], 0, "", 0.0))
                continue
            future = pool.submit(
                run_policy, simulator, task[3], task[2], task[4], None, on_progress
            )
            pending[future] = task
        for future in as_completed(pending):
            outcome = future.result()
            on_finished(outcome)
            if not outcome.ok:
                failed, seed, policy = pending[future][:3]
                for other in pending:
                    other.cancel()
                raise RuntimeError(
                    f"harmonia-sim failed for {failed} seed {seed} policy {policy} "
                    f"(exit {outcome.returncode}): {outcome.stderr.strip()}"
                )
    results: Results = {}
    traced = {mix_name(m) for m in grid.mixes if isinstance(m, TraceSpec)}
    for name, _seed, policy, _scenario, path in tasks:
        result = json.loads(path.read_text(encoding="utf-8"))
        metrics = run_metrics(result) | (queue_metrics(result) if name in traced else {})
        per_policy = results.setdefault(name, {}).setdefault(policy, {})
        for key, value in metrics.items():
            per_policy.setdefault(key, []).append(value)
    return results


def _fmt(mean: float, half: float) -> str:
    digits = 2 if abs(mean) < 10 else 0
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def markdown_tables(results: Results, grid: Grid) -> str:
    """One table per mix: a row per policy, a column per metric, mean ± 95 % CI half-width."""
    lines = []
    for mix, by_policy in results.items():
        lines += [
            f"### {mix} ({len(grid.seeds)} seeds)",
            "",
            "| policy | " + " | ".join(f"{m.label} ({m.unit})" for m in grid.metrics) + " |",
            "| --- |" + " ---: |" * len(grid.metrics),
        ]
        for policy, metrics in by_policy.items():
            name = f"{policy} (peer)" if policy in PEERS else policy
            cells = [_fmt(*interval(metrics[m.key])) for m in grid.metrics]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def relative_tables(results: Results, grid: Grid, baseline: str = "datawarp") -> str:
    """Each policy's metric divided by the baseline's on the same mix and seed (paired), as mean
    ± 95 % interval of the ratio: the spread between seeds' workloads cancels out."""
    lines = []
    for mix, by_policy in results.items():
        if baseline not in by_policy:
            continue
        base = by_policy[baseline]
        lines += [
            f"### {mix}: ratio to {baseline} on the same seed",
            "",
            "| policy | " + " | ".join(m.label for m in grid.metrics) + " |",
            "| --- |" + " ---: |" * len(grid.metrics),
        ]
        for policy, metrics in by_policy.items():
            if policy == baseline:
                continue
            cells = []
            for m in grid.metrics:
                pairs = [(v, b) for v, b in zip(metrics[m.key], base[m.key], strict=True) if b]
                if not pairs:
                    cells.append("n/a")
                    continue
                mean, half = interval([v / b for v, b in pairs])
                cells.append(f"{mean:.2f} ± {half:.2f}")
            name = f"{policy} (peer)" if policy in PEERS else policy
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


# Kopanski and Rzadca's headline (Euro-Par 2021, abstract): plan-based scheduling against the
# burst-buffer-aware SJF-EASY backfilling on KTH-SP2, change of the mean.
KOPANSKI_RZADCA_HEADLINE = {"queue_wait": -0.20, "queue_bsld": -0.27}


def paper_comparison(
    results: Results, policy: str = "plan-based", baseline: str = "slurm-easy-sjf"
) -> str:
    """`policy` against `baseline` on each trace of `results` (paired by seed: the change of the
    mean, mean and 95 % interval over seeds) next to Kopanski and Rzadca's headline; empty when
    a result lacks either policy or the queue metrics."""
    lines = []
    for mix, by_policy in results.items():
        if policy not in by_policy or baseline not in by_policy:
            continue
        if "queue_wait" not in by_policy[policy]:
            continue
        lines += [
            f"### {mix}: {policy} against {baseline}, paired by seed",
            "",
            f"| metric | {baseline} | {policy} | change (ours) | change (Kopanski and Rzadca) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for m in QUEUE_METRICS:
            ours = [
                v / b - 1
                for v, b in zip(by_policy[policy][m.key], by_policy[baseline][m.key], strict=True)
            ]
            change, half = interval(ours)
            theirs = KOPANSKI_RZADCA_HEADLINE[m.key]
            lines.append(
                f"| {m.label} ({m.unit}) | {_fmt(*interval(by_policy[baseline][m.key]))} |"
                f" {_fmt(*interval(by_policy[policy][m.key]))} |"
                f" {change * 100:+.1f} ± {half * 100:.1f} % | {theirs * 100:+.0f} % |"
            )
        lines.append("")
    return "\n".join(lines)


def best_per_metric(
    results: Results, metrics: tuple[Metric, ...] = METRICS
) -> dict[str, dict[str, str]]:
    """For each mix and metric, the policy with the best mean."""
    best: dict[str, dict[str, str]] = {}
    for mix, by_policy in results.items():
        for m in metrics:
            means = {p: float(np.mean(v[m.key])) for p, v in by_policy.items()}
            pick = min if m.lower_is_better else max
            best.setdefault(mix, {})[m.key] = pick(means, key=lambda p: means[p])
    return best


def write_plots(results: Results, out: Path, metrics: tuple[Metric, ...] = METRICS) -> list[Path]:
    """One PNG per metric: bars per policy grouped by mix, with 95 % intervals."""
    written = []
    mixes = list(results)
    for m in metrics:
        figure = Figure(figsize=(13, 4.8), layout="constrained")
        axes = figure.subplots()
        policies = list(next(iter(results.values())))
        width = 0.85 / len(policies)
        for k, policy in enumerate(policies):
            stats = [interval(results[mix][policy][m.key]) for mix in mixes]
            x = np.arange(len(mixes)) + k * width
            axes.bar(
                x,
                [s[0] for s in stats],
                width,
                yerr=[s[1] for s in stats],
                capsize=2,
                label=policy + (" (peer)" if policy in PEERS else ""),
                color=policy_color(policy),
                hatch="//" if policy in PEERS else None,
                edgecolor="white" if policy in PEERS else None,
            )
        axes.set_xticks(np.arange(len(mixes)) + 0.425 - width / 2, mixes)
        slant_tick_labels(axes)
        better = "lower is better" if m.lower_is_better else "higher is better"
        axes.set_ylabel(f"{m.label} ({m.unit})")
        axes.set_title(f"{m.label}: mean and 95 % interval over seeds ({better})")
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
        path = out / f"bakeoff-{m.key}.png"
        figure.savefig(path, dpi=90)
        written.append(path)
    return written


def write_summary(results: Results, grid: Grid, out: Path) -> None:
    write_json(
        out / "bakeoff.json",
        {
            "seeds": list(grid.seeds),
            "mixes": [mix_name(m) for m in grid.mixes],
            "results": results,
        },
    )
