"""`harmonia reproduce network`: the experiments of the MPI/I-O interference paper (ICPP 2018)."""

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, Jobs, fail, progress_bar
from harmonia.netsim_models import NetworkModelName
from harmonia.simulator import SimulatorNotFound


def reproduce_network(
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output directory (default: results/reproduction-network, with -packet on the "
            "packet model).",
            show_default=False,
        ),
    ] = None,
    jobs: Jobs = 2,
    system: Annotated[str, typer.Option(help='The fabric: "scaled" or "paper" preset.')] = "scaled",
    network: Annotated[
        NetworkModelName,
        typer.Option(help='"fluid" (max-min sharing) or "packet" (ns-3 queues) model.'),
    ] = "fluid",
    only: Annotated[
        str | None,
        typer.Option(
            help="The experiments, comma-separated (default: every one).", show_default=False
        ),
    ] = None,
) -> None:
    """The MPI/I-O interference paper (ICPP 2018) on fat-trees: run the selected experiments on
    the `system` preset and the `network` model, then write report.md and plots."""
    from harmonia.experiments.network import (
        EXPERIMENTS,
        Settings,
        markdown,
        run_cases,
        select,
        write_plots,
    )
    from harmonia.netsim import PRESETS, NetsimFailed, RunDone, find_netsim

    if system not in PRESETS:
        fail([f'--system: unknown "{system}" ({", ".join(PRESETS)})'], EXIT_INVALID)
    if out is None:
        out = Path("results/reproduction-network" + ("-packet" if network == "packet" else ""))
    names = [n.strip() for n in only.split(",")] if only else None
    settings = Settings.for_network(system, network)
    try:
        experiments = select(names, settings)
    except KeyError as error:
        fail([f"--only: unknown experiment {error} ({', '.join(EXPERIMENTS)})"], EXIT_INVALID)
    try:
        binary = find_netsim()
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    cases = [case for group in experiments.values() for case in group]
    console = Console(stderr=True)
    progress = progress_bar(console, spinner=True)
    started = time.monotonic()
    with progress:
        task = progress.add_task(
            f"{len(cases)} cases on the {system} system, {network} model", total=None
        )

        def start(total: int) -> None:
            progress.update(task, total=total)

        def done(run: RunDone) -> None:
            progress.advance(task)

        try:
            run_cases(binary, cases, out, jobs, start, done)
        except NetsimFailed as error:
            fail([str(error)], EXIT_FAILED)
    report = markdown(experiments, settings)
    tmp = out / "report.md.tmp"
    tmp.write_text(report, encoding="utf-8")
    tmp.replace(out / "report.md")
    plots = write_plots(experiments, out)
    typer.echo(report)
    typer.echo(
        f"report and figures in {out} after {time.monotonic() - started:.0f} s: report.md, "
        + ", ".join(p.name for p in plots),
        err=True,
    )
