"""`harmonia reproduce optimum`: every policy's gap to the CP-SAT optimum on small instances."""

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, OutDir, fail, progress_bar, seeds_or_fail
from harmonia.simulator import SimulatorNotFound, find_tool


def reproduce_optimum(
    out: OutDir = Path("results/optimum"),
    seeds: Annotated[
        str, typer.Option(help='The seeds, "1-5" or "1,2,5"; the report gives 95 % intervals.')
    ] = "1-5",
    slots: Annotated[
        int, typer.Option(min=10, max=400, help="Time slots of the CP-SAT model.")
    ] = 40,
    time_limit: Annotated[float, typer.Option(min=1, help="Seconds per CP-SAT solve.")] = 30.0,
) -> None:
    """Every policy's and peer's gap to the CP-SAT optimum on small instances."""
    from harmonia.optimum.experiment import markdown, run_seed, write_outputs

    seed_values = seeds_or_fail(seeds)
    if len(seed_values) < 2:
        fail(["--seeds: at least 2 (a 95 % interval needs a spread)"], EXIT_INVALID)
    if out.exists() and not out.is_dir():
        fail([f"--out {out}: not a directory"], EXIT_INVALID)
    try:
        fluid = find_tool("harmonia-fluid", "HARMONIA_FLUID", "src/tools/harmonia-fluid")
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    console = Console(stderr=True)
    started = time.monotonic()
    results = []
    progress = progress_bar(console)
    with progress:
        task = progress.add_task(
            "instances (policies, then 4 CP-SAT solves)", total=len(seed_values)
        )
        for seed in seed_values:
            try:
                results.append(run_seed(seed, fluid, slots, time_limit))
            except (RuntimeError, ValueError) as error:
                fail([f"seed {seed}: {error}"], EXIT_FAILED)
            progress.advance(task)
    try:
        written = write_outputs(results, out)
    except OSError as error:
        fail([f"--out {out}: cannot write: {error.strerror or error}"], EXIT_FAILED)
    typer.echo(markdown(results))
    typer.echo(
        f"{len(seed_values)} instances in {time.monotonic() - started:.0f} s; "
        + ", ".join(str(p) for p in written)
    )
