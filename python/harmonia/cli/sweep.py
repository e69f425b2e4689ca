"""`harmonia sweep`: scenario x policy x seed on Dask, results in an SQLite store."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.policies import parse_policies
from harmonia.simulator import SimulatorNotFound, find_simulator


def sweep(
    scenarios: Annotated[list[Path], typer.Argument(help="Scenario TOML files.")],
    policy: Annotated[str, typer.Option(help='"all", "peers", "every" or names.')] = "every",
    seeds: Annotated[int, typer.Option(min=1, help="Seeds 1..N per scenario and policy.")] = 5,
    db: Annotated[Path, typer.Option(help="SQLite store (created; reused to resume).")] = Path(
        "results/sweep.sqlite"
    ),
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="Dask scheduler address (default: a LocalCluster here).", show_default=False
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="LocalCluster worker processes.")] = 2,
) -> None:
    """Run every scenario x policy x seed on Dask and keep each run's metrics in SQLite; runs
    already stored are skipped, so an interrupted sweep resumes (docs/sweep.md)."""
    from harmonia.scenario import ScenarioError
    from harmonia.sweep import run_sweep, tasks_for

    try:
        policies = parse_policies(policy)
    except ValueError as error:
        fail([f"--policy: {error}"], EXIT_INVALID)
    try:
        tasks = tasks_for(scenarios, policies, list(range(1, seeds + 1)))
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    try:
        simulator = find_simulator()
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    if db.exists() and not db.is_file():
        fail([f"--db {db}: not a file"], EXIT_INVALID)
    db.parent.mkdir(parents=True, exist_ok=True)
    progress = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )
    try:
        with progress:
            bar = progress.add_task("sweep", total=len(tasks))
            ran, skipped = run_sweep(
                tasks,
                db,
                simulator,
                scheduler,
                workers,
                lambda done, total: progress.update(bar, completed=done, total=total),
            )
    except RuntimeError as error:
        fail([str(error)], EXIT_FAILED)
    typer.echo(f"{ran} runs done, {skipped} already in {db}; query it with sqlite3 (table runs)")
