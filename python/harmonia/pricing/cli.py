"""`harmonia reproduce pricing`: price against completion time, over seeds (docs/accounting.md)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, Jobs, OutDir, fail, seeds_or_fail

# The source checkout's example, as `harmonia reproduce harmonia` finds section V's.
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pricing" / "relaxed-mix.toml"


def reproduce_pricing(
    out: OutDir = Path("results/pricing"),
    jobs: Jobs = 2,
    seeds: Annotated[
        str, typer.Option(help='The seeds, "1-10" or "1,2,5"; the report gives the mean and range.')
    ] = "1-10",
    policy: Annotated[str, typer.Option("--only", help="The policy priced.")] = "min-stall",
) -> None:
    """Price against completion time over the seeds, one share of relaxed jobs at a time."""
    from harmonia.pricing.experiment import SHARES, by_share, markdown, plot, run_sweep
    from harmonia.results import staged_directory
    from harmonia.scenario import ScenarioError, load_scenario, normalize
    from harmonia.simulator import SimulatorNotFound, find_simulator

    if "," in policy:
        fail([f"--only {policy}: pricing takes one policy"], EXIT_INVALID)
    seed_values = seeds_or_fail(seeds)
    try:
        base = normalize(load_scenario(EXAMPLE))
        simulator = find_simulator()
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    # The class the example's patient jobs name is the one the sweep gives to each share.
    io_qos = next(app["io_qos"] for app in base["apps"] if "io_qos" in app)
    console = Console(stderr=True)
    total = len(SHARES) * len(seed_values)
    done = 0

    def progress(line: str) -> None:
        nonlocal done
        done += 1
        console.print(f"[{done}/{total}] {line}")

    with staged_directory(out) as staging:
        try:
            runs = run_sweep(
                simulator, base, policy, SHARES, seed_values, io_qos, staging, jobs, progress
            )
        except RuntimeError as error:
            fail([str(error)], EXIT_FAILED)
        rows = by_share(runs)
        report = markdown(rows, policy, io_qos, seed_values)
        (staging / "report.md").write_text(report, encoding="utf-8")
        plot(rows, policy, io_qos, staging / "price-vs-completion.png")
    typer.echo(report)
    typer.echo(f"report and plot in {out}: report.md, price-vs-completion.png")
