"""Price against completion time (docs/accounting.md): one mix of jobs, a share of them in a
patient I/O service class, over seeds.

For each share and seed the mix is redrawn: which jobs are patient (a seeded sample of
round(share x jobs)) and when each arrives (its arrival in the scenario plus a seeded offset of
up to `ARRIVAL_JITTER` seconds). Every run's accounting records (harmonia-sim --accounting) give
each job's completion (End - Submit) and charge; the report gives, per share, the mean over seeds
of each class's mean, and the range (min-max) of those means over seeds.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

from harmonia.accounting import load_accounting
from harmonia.simulator import run_policy

SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
# Seconds of arrival offset drawn per job and seed: one time slice of the example (8 s).
ARRIVAL_JITTER = 8.0


def draw_mix(base: dict[str, Any], share: float, seed: int, io_qos: str) -> dict[str, Any]:
    """`base` (a normalized scenario) with round(share x jobs) jobs, drawn from `seed`, in class
    `io_qos`, the others normal, and each arrival offset by a seeded draw."""
    rng = random.Random(seed)
    scenario = copy.deepcopy(base)
    apps = scenario["apps"]
    patient = set(rng.sample(range(len(apps)), round(share * len(apps))))
    for index, app in enumerate(apps):
        app["name"] = f"job-{index}"
        app["arrival"] = app["arrival"] + rng.uniform(0, ARRIVAL_JITTER)
        app.pop("io_qos", None)
        if index in patient:
            app["io_qos"] = io_qos
    scenario["seed"] = seed
    scenario["name"] = f"{base['name']}-share{round(share * 100)}-seed{seed}"
    return scenario


@dataclass(frozen=True)
class RunSummary:
    """One run: per class (normal / patient), the mean completion and charge of its jobs."""

    share: float
    seed: int
    completion: dict[str, float]
    charge: dict[str, float]
    total_charge: float
    makespan: float
    broken: int


def summarize_run(share: float, seed: int, records: list[dict[str, Any]]) -> RunSummary:
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault("normal" if record["QOS"] == "normal" else "patient", []).append(record)
    return RunSummary(
        share=share,
        seed=seed,
        completion={k: mean(r["End"] - r["Submit"] for r in g) for k, g in groups.items()},
        charge={k: mean(r["Charge"] for r in g) for k, g in groups.items()},
        total_charge=sum(r["Charge"] for r in records),
        makespan=max(r["End"] for r in records),
        broken=sum(1 for r in records if r["BoundBroken"]),
    )


def run_sweep(
    simulator: Path,
    base: dict[str, Any],
    policy: str,
    shares: tuple[float, ...],
    seeds: list[int],
    io_qos: str,
    out: Path,
    jobs: int,
    on_done: Callable[[str], None],
) -> list[RunSummary]:
    """Simulate every (share, seed) with `policy`, `jobs` processes at once, into `out`."""
    tasks = []
    for share in shares:
        for seed in seeds:
            directory = out / f"share-{round(share * 100)}" / f"seed-{seed}"
            directory.mkdir(parents=True, exist_ok=True)
            scenario = directory / "scenario.json"
            scenario.write_text(json.dumps(draw_mix(base, share, seed, io_qos), indent=1) + "\n")
            tasks.append((share, seed, directory, scenario))

    def simulate(task: tuple[float, int, Path, Path]) -> RunSummary:
        share, seed, directory, scenario = task
        prefix = directory / f"{policy}.accounting"
        outcome = run_policy(simulator, scenario, policy, directory / f"{policy}.json", prefix)
        if not outcome.ok:
            raise RuntimeError(f"{scenario}: harmonia-sim failed: {outcome.stderr.strip()}")
        on_done(f"share {round(share * 100)} %, seed {seed}: {outcome.seconds:.1f} s")
        return summarize_run(share, seed, load_accounting(Path(f"{prefix}.json")))

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(simulate, tasks))


@dataclass(frozen=True)
class Spread:
    mean: float
    low: float
    high: float

    def text(self, digits: int) -> str:
        return f"{self.mean:,.{digits}f} ({self.low:,.{digits}f}-{self.high:,.{digits}f})"


def spread(values: list[float]) -> Spread | None:
    return Spread(mean(values), min(values), max(values)) if values else None


@dataclass(frozen=True)
class ShareRow:
    share: float
    completion: dict[str, Spread | None]
    charge: dict[str, Spread | None]
    total_charge: Spread
    makespan: Spread
    broken: int


def by_share(runs: list[RunSummary]) -> list[ShareRow]:
    rows = []
    for share in sorted({r.share for r in runs}):
        group = [r for r in runs if r.share == share]
        classes = ("normal", "patient")
        rows.append(
            ShareRow(
                share=share,
                completion={
                    c: spread([r.completion[c] for r in group if c in r.completion])
                    for c in classes
                },
                charge={c: spread([r.charge[c] for r in group if c in r.charge]) for c in classes},
                total_charge=Spread(
                    mean(r.total_charge for r in group),
                    min(r.total_charge for r in group),
                    max(r.total_charge for r in group),
                ),
                makespan=Spread(
                    mean(r.makespan for r in group),
                    min(r.makespan for r in group),
                    max(r.makespan for r in group),
                ),
                broken=sum(r.broken for r in group),
            )
        )
    return rows


def markdown(rows: list[ShareRow], policy: str, io_qos: str, seeds: list[int]) -> str:
    def cell(value: Spread | None, digits: int) -> str:
        return "-" if value is None else value.text(digits)

    lines = [
        f"Policy {policy}; patient class `{io_qos}`; seeds {seeds[0]}-{seeds[-1]} "
        f"({len(seeds)} runs per row): mean over seeds of the per-run mean (min-max).",
        "",
        "| patient share | completion, normal (s) | completion, patient (s) | charge per job,"
        " normal | charge per job, patient | total charge | makespan (s) | bounds broken |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {round(row.share * 100)} % | {cell(row.completion['normal'], 1)}"
            f" | {cell(row.completion['patient'], 1)} | {cell(row.charge['normal'], 3)}"
            f" | {cell(row.charge['patient'], 3)} | {row.total_charge.text(3)}"
            f" | {row.makespan.text(1)} | {row.broken} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[ShareRow], policy: str, io_qos: str, out: Path) -> None:
    """Completion and charge per job against the patient share, one line per class, the bars
    the range over seeds."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4.5), layout="constrained")
    left, right = figure.subplots(1, 2)
    for axes, field, label in (
        (left, "completion", "mean completion per job (s)"),
        (right, "charge", "mean charge per job (node-hours x rate x factor)"),
    ):
        for cls, marker in (("normal", "o"), ("patient", "s")):
            points = [(r.share * 100, getattr(r, field)[cls]) for r in rows]
            present = [(x, s) for x, s in points if s is not None]
            if not present:
                continue
            xs = [x for x, _ in present]
            ys = [s.mean for _, s in present]
            errors = [[s.mean - s.low for _, s in present], [s.high - s.mean for _, s in present]]
            name = "normal" if cls == "normal" else io_qos
            axes.errorbar(xs, ys, yerr=errors, marker=marker, capsize=4, label=name)
        axes.set_xlabel(f"share of jobs in class {io_qos} (%)")
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle(f"Price against completion ({policy}; bars: min-max over seeds)")
    figure.savefig(out, dpi=110)
