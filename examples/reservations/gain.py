"""What temporary extensions (c) and lending write-only space (d) gain under DataWarp.

Usage: python examples/reservations/gain.py [--seeds N] (from the repository, with the
simulator built: HARMONIA_SIM or build/src/sim/harmonia-sim).

For each seed, the jobs of reservations.toml get new arrivals (each delayed by up to 60 s) and
write 0.9-1.3 times each declared phase, drawn from the seed. Four configurations run on the same
draws: padded reservations (130 GB, the most a job writes) or tight ones (100 GB, what it declares,
with `extend_reservations`), each with and without `lend_write_only`. Prints the mean over seeds
and the spread (min-max) of the mean job completion, the mean batch-queue wait and the makespan.
"""

import argparse
import copy
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from harmonia.scenario import load_scenario, normalize
from harmonia.simulator import find_simulator, simulate_scenario

HERE = Path(__file__).resolve().parent
DECLARED = 100e9
OVERSHOOT = (0.9, 1.3)
CONFIGS = {
    "padded": {"reservation": DECLARED * OVERSHOOT[1], "extend": False, "lend": False},
    "tight + extension (c)": {"reservation": DECLARED, "extend": True, "lend": False},
    "padded + lending (d)": {
        "reservation": DECLARED * OVERSHOOT[1],
        "extend": False,
        "lend": True,
    },
    "tight + extension + lending": {
        "reservation": DECLARED,
        "extend": True,
        "lend": True,
    },
}
METRICS = ("avg_completion", "avg_wait", "makespan")


def draw(base: dict[str, Any], seed: int) -> dict[str, Any]:
    """The base scenario with the seed's arrivals and phase sizes."""
    rng = random.Random(seed)
    scenario = copy.deepcopy(base)
    scenario["seed"] = seed
    for app in scenario["apps"]:
        app["arrival"] += rng.uniform(0, 60)
        for phase in app["phases"]:
            phase["size"] *= rng.uniform(*OVERSHOOT)
    return scenario


def configure(scenario: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(scenario)
    out["scheduler"]["extend_reservations"] = config["extend"]
    out["scheduler"]["lend_write_only"] = config["lend"]
    for app in out["apps"]:
        app["reservation"] = config["reservation"]
    return out


def simulate(
    simulator: Path, scenario: dict[str, Any], work: Path, label: str
) -> dict[str, float]:
    try:
        metrics = simulate_scenario(simulator, scenario, "datawarp", work)["metrics"]
    except RuntimeError as error:
        sys.exit(f"harmonia-sim failed on seed {scenario['seed']} ({label}): {error}")
    return {key: float(metrics[key]) for key in METRICS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    simulator = find_simulator()
    base = normalize(load_scenario(HERE / "reservations.toml"))
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, args.seeds + 1):
            drawn = draw(base, seed)
            for name, config in CONFIGS.items():
                results[name].append(
                    simulate(simulator, configure(drawn, config), Path(tmp), name)
                )
            print(f"seed {seed}/{args.seeds} done", file=sys.stderr)
    print(f"datawarp, {args.seeds} seeds: mean (min-max) in seconds")
    print(f"{'configuration':<30}" + "".join(f"{m:>26}" for m in METRICS))
    for name, runs in results.items():
        cells = []
        for metric in METRICS:
            values = [run[metric] for run in runs]
            cells.append(
                f"{statistics.mean(values):>8.0f} ({min(values):>6.0f}-{max(values):>6.0f})"
            )
        print(f"{name:<30}" + "".join(f"{cell:>26}" for cell in cells))


if __name__ == "__main__":
    main()
