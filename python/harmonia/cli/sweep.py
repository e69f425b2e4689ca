"""`harmonia sweep`: scenario x policy x seed on Dask, results in an SQLite or Parquet store."""

import re
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail, progress_bar
from harmonia.policies import parse_policies
from harmonia.simulator import SimulatorNotFound, find_simulator
from harmonia.units import parse_size

WALLTIME = re.compile(r"(\d+-)?\d{1,2}:\d{2}:\d{2}")


def sweep(
    scenarios: Annotated[
        list[Path] | None, typer.Argument(help="Scenario TOML files.", show_default=False)
    ] = None,
    mix: Annotated[
        list[str] | None,
        typer.Option(
            help="A generated mix of the bake-off (docs/workloads.md), drawn anew per seed; "
            "repeat for several.",
            show_default=False,
        ),
    ] = None,
    mix_jobs: Annotated[
        int | None, typer.Option(min=1, help="Jobs per mix (default: the mix's own).")
    ] = None,
    policy: Annotated[str, typer.Option(help='"all", "peers", "every" or names.')] = "every",
    seeds: Annotated[int, typer.Option(min=1, help="Seeds 1..N per scenario and policy.")] = 5,
    db: Annotated[
        Path, typer.Option(help="Store: SQLite, or a Parquet directory if it ends in .parquet.")
    ] = Path("results/sweep.sqlite"),
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="Dask scheduler address (default: a LocalCluster here).", show_default=False
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="LocalCluster worker processes.")] = 2,
    slurm_jobs: Annotated[
        int,
        typer.Option(min=0, help="Run the workers as this many Slurm jobs (dask-jobqueue)."),
    ] = 0,
    slurm_queue: Annotated[
        str | None, typer.Option(help="Slurm partition (default: the cluster's).")
    ] = None,
    slurm_cores: Annotated[int, typer.Option(min=1, help="Cores per Slurm job.")] = 1,
    slurm_memory: Annotated[str, typer.Option(help="Memory per Slurm job.")] = "1 GB",
    slurm_walltime: Annotated[str, typer.Option(help="Time limit per Slurm job.")] = "01:00:00",
    slurm_account: Annotated[
        str | None, typer.Option(help="Slurm account to charge.", show_default=False)
    ] = None,
) -> None:
    """Run every scenario (or mix) x policy x seed on Dask and keep each run's metrics in SQLite
    or Parquet; runs already stored are skipped, so an interrupted sweep resumes (docs/sweep.md)."""
    from harmonia.bakeoff.experiment import MIXES
    from harmonia.darshan_import import DarshanImportError
    from harmonia.scenario import ScenarioError
    from harmonia.sweep import SlurmWorkers, is_parquet, run_sweep, tasks_for

    try:
        policies = parse_policies(policy)
    except ValueError as error:
        fail([f"--policy: {error}"], EXIT_INVALID)
    known = {m.name: m for m in MIXES}
    unknown = [name for name in mix or [] if name not in known]
    if unknown:
        fail([f"--mix {name}: unknown (known: {', '.join(known)})" for name in unknown],
             EXIT_INVALID)  # fmt: skip
    if not scenarios and not mix:
        fail(["give scenario files, --mix NAME, or both"], EXIT_INVALID)
    if slurm_jobs and scheduler:
        fail(["--slurm-jobs and --scheduler exclude each other"], EXIT_INVALID)
    slurm = None
    if slurm_jobs:
        try:
            slurm_memory_bytes = parse_size(slurm_memory)
        except ValueError as error:
            fail([f"--slurm-memory {slurm_memory}: {error}"], EXIT_INVALID)
        if slurm_memory_bytes <= 0:
            fail([f"--slurm-memory {slurm_memory}: must be more than 0 bytes"], EXIT_INVALID)
        if not WALLTIME.fullmatch(slurm_walltime):
            fail([f"--slurm-walltime {slurm_walltime}: expected [D-]HH:MM:SS"], EXIT_INVALID)
        if shutil.which("sbatch") is None:
            fail(["--slurm-jobs: sbatch not found (Debian: slurm-client)"], EXIT_FAILED)
        slurm = SlurmWorkers(
            slurm_jobs, slurm_queue, slurm_cores, f"{slurm_memory_bytes}B", slurm_walltime,
            slurm_account, str(db.parent / "slurm-logs"),
        )  # fmt: skip
    mixes = tuple(known[name] if mix_jobs is None else known[name].scaled(mix_jobs)
                  for name in dict.fromkeys(mix or []))  # fmt: skip
    try:
        tasks = tasks_for(scenarios or [], policies, list(range(1, seeds + 1)), mixes)
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    except (ValueError, DarshanImportError) as error:
        fail([f"--mix: {error}"], EXIT_INVALID)
    try:
        simulator = find_simulator()
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    if is_parquet(db):
        if db.exists() and not db.is_dir():
            fail([f"--db {db}: a Parquet store is a directory, this is a file"], EXIT_INVALID)
    elif db.exists() and not db.is_file():
        fail([f"--db {db}: not a file"], EXIT_INVALID)
    db.parent.mkdir(parents=True, exist_ok=True)
    progress = progress_bar(Console(stderr=True))
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
                slurm,
            )
    except RuntimeError as error:
        fail([str(error)], EXIT_FAILED)
    query = "pandas.read_parquet" if is_parquet(db) else "sqlite3 (table runs)"
    typer.echo(f"{ran} runs done, {skipped} already in {db}; query it with {query}")
