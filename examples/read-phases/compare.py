"""Read phases with prefetch: every paper policy, over seeds, with and without prefetching ahead.

Usage: python examples/read-phases/compare.py [--seeds 1-10] [--out DIR] (from the repository,
with the simulator built: HARMONIA_SIM or build/src/sim/harmonia-sim).

For each seed the jobs of read-phases.toml get new arrivals (each delayed by up to 60 s, drawn
from the seed, which also seeds the random-order policies). Every policy of the paper (DataWarp
and Harmonia's five) runs twice on the same draw: with read phases announced when the computation
before them begins (the stage-in overlaps it, `prefetch_ahead`, the default) and announced only
when requested (the read waits for the whole stage-in). Prints a markdown table of the mean over
seeds and the spread (min-max) of the mean completion, the mean stall (Eq. 7), the mean wait of a
read phase and the makespan, and writes the table and a PNG plot into --out.
"""

import argparse
import copy
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from harmonia.scenario import load_scenario, normalize
from harmonia.simulator import find_simulator, simulate_scenario

HERE = Path(__file__).resolve().parent
POLICIES = (
    "datawarp",
    "max-buffer-efficiency",
    "priority",
    "max-bandwidth",
    "fairness",
    "min-stall",
)
MODES = {"ahead": True, "on demand": False}
METRICS = ("avg_completion", "avg_stall", "read_wait", "makespan")


def parse_seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = (int(part) for part in text.split("-", 1))
        seeds = list(range(low, high + 1))
    else:
        seeds = [int(part) for part in text.split(",")]
    if not seeds or min(seeds) < 0:
        raise ValueError(f'expected "1-10" or "1,2,5" with seeds >= 0, got "{text}"')
    return seeds


def draw(base: dict[str, Any], seed: int, ahead: bool) -> dict[str, Any]:
    """The base scenario with the seed's arrivals."""
    rng = random.Random(seed)
    scenario = copy.deepcopy(base)
    scenario["seed"] = seed
    for app in scenario["apps"]:
        app["arrival"] += rng.uniform(0, 60)
    scenario["scheduler"]["prefetch_ahead"] = ahead
    return scenario


def simulate(
    simulator: Path, scenario: dict[str, Any], policy: str, work: Path
) -> dict[str, float]:
    try:
        results = simulate_scenario(simulator, scenario, policy, work)
    except RuntimeError as error:
        sys.exit(f"harmonia-sim failed on seed {scenario['seed']} ({policy}): {error}")
    metrics = {
        key: float(results["metrics"][key]) for key in METRICS if key != "read_wait"
    }
    reads = [phase["wait"] for phase in results["phases"] if phase["op"] == "read"]
    metrics["read_wait"] = statistics.mean(reads)
    return metrics


def table(
    results: dict[tuple[str, str], list[dict[str, float]]], seeds: list[int]
) -> str:
    lines = [
        f"Mean over seeds {seeds[0]}-{seeds[-1]} ({len(seeds)} seeds), (min-max), seconds.",
        "",
        "| policy | prefetch | " + " | ".join(METRICS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in METRICS) + " |",
    ]
    for (policy, mode), runs in results.items():
        cells = []
        for metric in METRICS:
            values = [run[metric] for run in runs]
            cells.append(
                f"{statistics.mean(values):.0f} ({min(values):.0f}-{max(values):.0f})"
            )
        lines.append(f"| {policy} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(results: dict[tuple[str, str], list[dict[str, float]]], path: Path) -> None:
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.38
    for axis, metric, title in (
        (axes[0], "avg_completion", "mean completion (s)"),
        (axes[1], "read_wait", "mean wait of a read phase (s)"),
    ):
        for shift, mode in enumerate(MODES):
            means, low, high = [], [], []
            for policy in POLICIES:
                values = [run[metric] for run in results[(policy, mode)]]
                mean = statistics.mean(values)
                means.append(mean)
                low.append(mean - min(values))
                high.append(max(values) - mean)
            axis.bar(
                [i + (shift - 0.5) * width for i in range(len(POLICIES))],
                means,
                width,
                yerr=[low, high],
                capsize=3,
                label=f"prefetch {mode}",
            )
        axis.set_xticks(range(len(POLICIES)), POLICIES, rotation=30, ha="right")
        axis.set_title(title)
    axes[0].legend()
    figure.suptitle("read-phases.toml: mean over seeds, bars from min to max")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", default="1-10", help='"1-10" or "1,2,5" (default 1-10)'
    )
    parser.add_argument("--out", type=Path, default=Path("results/read-phases"))
    args = parser.parse_args()
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as error:
        parser.error(f"--seeds: {error}")
    simulator = find_simulator()
    base = normalize(load_scenario(HERE / "read-phases.toml"))
    results: dict[tuple[str, str], list[dict[str, float]]] = {
        (policy, mode): [] for policy in POLICIES for mode in MODES
    }
    total = len(seeds) * len(results)
    done = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for mode, ahead in MODES.items():
                drawn = draw(base, seed, ahead)
                for policy in POLICIES:
                    results[(policy, mode)].append(
                        simulate(simulator, drawn, policy, Path(tmp))
                    )
                    done += 1
            print(f"[{done}/{total}] seed {seed} done", file=sys.stderr)
    text = table(results, seeds)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(text)
    plot(results, args.out / "read-phases.png")
    print(
        f"wrote {args.out / 'table.md'} and {args.out / 'read-phases.png'}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
