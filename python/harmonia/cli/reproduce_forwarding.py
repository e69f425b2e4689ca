"""`harmonia reproduce forwarding`: the TWINS dissertation's experiments, simulated."""

import json
from pathlib import Path

import typer
from rich.console import Console

from harmonia.cli import EXIT_FAILED, Jobs, OutDir, fail
from harmonia.simulator import SimulatorNotFound


def reproduce_forwarding(
    out: OutDir = Path("results/reproduction-forwarding"), jobs: Jobs = 2
) -> None:
    """The TWINS dissertation's forwarding-layer experiments, simulated."""
    from harmonia.experiments.forwarding import markdown, run_grid
    from harmonia.forwarding import FwdsimFailed

    console = Console(stderr=True)
    try:
        report = run_grid(jobs, lambda what: console.print(what))
    except (FwdsimFailed, SimulatorNotFound) as error:
        fail([str(error)], EXIT_FAILED)
    out.mkdir(parents=True, exist_ok=True)
    (out / "forwarding.json").write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    (out / "report.md").write_text(text)
    typer.echo(text)
    typer.echo(f"report in {out / 'report.md'}")
