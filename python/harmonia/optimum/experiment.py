"""`harmonia reproduce optimum` (docs/bakeoff.md, "The optimum"): on small seeded instances, the
CP-SAT optimum of each objective and the gap of every policy, peer and `auto` to it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from harmonia.bakeoff.experiment import interval
from harmonia.optimum.model import OBJECTIVES, Instance, random_instance, run_policies, solve
from harmonia.policies import EVERY_POLICY

# Policies that admit whole jobs by reservation (and stage out at job end): the fluid runner
# starts every job at once and never ends one, so they are outside this comparison.
BATCH_POLICIES = ("datawarp", "slurm-easy")
HORIZON_FACTOR = 1.5  # the model's time line: this times the shortest policy makespan


def compared_policies() -> list[str]:
    return [p for p in EVERY_POLICY if p not in BATCH_POLICIES and p != "auto"]


@dataclass
class SeedResult:
    seed: int
    instance: dict[str, Any]
    values: dict[str, dict[str, float]]  # policy -> objective -> value
    optimum: dict[str, dict[str, Any]]  # objective -> value, status, slot, bound, seconds


def run_seed(
    seed: int,
    fluid: Path,
    slots: int,
    time_limit: float,
    instance_of: Callable[[int], Instance] = random_instance,
) -> SeedResult:
    instance = instance_of(seed)
    policies = compared_policies()
    runs = run_policies(instance, policies, fluid)
    values = {p: runs[p]["metrics"] for p in policies}
    for objective in OBJECTIVES:
        auto = run_policies(instance, ["auto"], fluid, auto_objective=objective)["auto"]
        values.setdefault("auto", {})[objective] = auto["metrics"][objective]
    horizon = HORIZON_FACTOR * min(v["makespan"] for p, v in values.items() if p != "auto")
    optimum: dict[str, dict[str, Any]] = {}
    for objective in OBJECTIVES:
        try:
            best = solve(instance, objective, horizon, slots=slots, time_limit=time_limit)
        except ValueError as error:  # no schedule found within the time limit
            optimum[objective] = {"value": None, "status": str(error)}
            continue
        optimum[objective] = {
            "value": best.value,
            "status": best.status,
            "slot": best.slot,
            "seconds": best.seconds,
            "widths": best.widths,
            "phases": [asdict(p) for p in best.phases],
        }
    return SeedResult(seed, instance.to_json(), values, optimum)


# Stall can be 0 at the optimum (no phase waits or shares): its gap is in seconds, not in %.
ABSOLUTE_GAPS = ("stall",)


def gap_unit(objective: str) -> str:
    return "s" if objective in ABSOLUTE_GAPS else "%"


def gaps(results: list[SeedResult]) -> dict[str, dict[str, list[float]]]:
    """policy -> objective -> gap per seed: value / optimum - 1 in %, or value - optimum in
    seconds for stall; over the seeds whose optimum CP-SAT proved within its time limit (a
    schedule it could not prove optimal is no reference)."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in results:
        for policy, values in r.values.items():
            for objective in OBJECTIVES:
                opt = r.optimum[objective]["value"]
                if r.optimum[objective]["status"] != "OPTIMAL":
                    continue
                value = values[objective]
                gap = value - opt if objective in ABSOLUTE_GAPS else 100 * (value / opt - 1)
                out.setdefault(policy, {}).setdefault(objective, []).append(gap)
    return out


def markdown(results: list[SeedResult]) -> str:
    g = gaps(results)
    lines = [
        "Gap to the CP-SAT optimum (mean ± 95 % interval over the seeds where it is proven, "
        "see the last rows; negative: the policy beat the model's optimum)",
        "",
        "| policy | " + " | ".join(f"{o} ({gap_unit(o)})" for o in OBJECTIVES) + " |",
        "| --- |" + " ---: |" * len(OBJECTIVES),
    ]
    for policy, by_objective in g.items():
        cells = []
        for objective in OBJECTIVES:
            if objective not in by_objective:
                cells.append("n/a")
                continue
            mean, half = interval(by_objective[objective])
            cells.append(f"{mean:.1f} ± {half:.1f}")
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    proven = [sum(r.optimum[o]["status"] == "OPTIMAL" for r in results) for o in OBJECTIVES]
    found = [sum(r.optimum[o]["value"] is not None for r in results) for o in OBJECTIVES]
    seconds = [
        float(np.mean([r.optimum[o].get("seconds", np.nan) for r in results])) for o in OBJECTIVES
    ]
    lines.append("| *schedule found* | " + " | ".join(f"{n}/{len(results)}" for n in found) + " |")
    lines.append("| *optimum proven* | " + " | ".join(f"{n}/{len(results)}" for n in proven) + " |")
    lines.append("| *solve time (s)* | " + " | ".join(f"{s:.1f}" for s in seconds) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(results: list[SeedResult], out: Path) -> list[Path]:
    """optimum.md, optimum.json and optimum-gaps.png into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "optimum.json").write_text(
        json.dumps([asdict(r) for r in results], indent=1), encoding="utf-8"
    )
    (out / "optimum.md").write_text(markdown(results), encoding="utf-8")
    g = gaps(results)
    fig = Figure(figsize=(12, 4.5))
    ax = fig.add_subplot()
    names = list(g)
    width = 0.8 / len(OBJECTIVES)
    for k, objective in enumerate(OBJECTIVES):
        stats = [interval(g[p][objective]) if objective in g[p] else (0.0, 0.0) for p in names]
        ax.bar(
            np.arange(len(names)) + k * width,
            [s[0] for s in stats],
            width,
            yerr=[s[1] for s in stats],
            label=objective,
            capsize=2,
        )
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=30, ha="right")
    ax.set_ylabel("gap to the optimum (% ; stall: s)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.legend()
    fig.tight_layout()
    plot = out / "optimum-gaps.png"
    fig.savefig(plot, dpi=120)
    return [out / "optimum.md", out / "optimum.json", plot]
