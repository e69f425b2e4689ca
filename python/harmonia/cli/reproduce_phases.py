"""`harmonia reproduce phases`: precision and recall of each phase-detection mode."""

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, OutDir, fail
from harmonia.simulator import SimulatorNotFound


def reproduce_phases(out: OutDir = Path("results/phase-accuracy")) -> None:
    """The precision and recall of each phase-detection mode against known phases."""
    from harmonia.experiments.phase_accuracy import markdown, run_all, to_json

    console = Console(stderr=True)
    try:
        scores = run_all(lambda what: console.print(what))
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    table = Table(title="Phase detection against known phases")
    for column in ("mode", "case", "true", "detected", "matched", "precision", "recall"):
        table.add_column(column, justify="left" if column in ("mode", "case") else "right")
    for s in scores:
        table.add_row(
            s.mode, s.case, str(s.true_phases), str(s.detected), str(s.matched),
            f"{s.precision:.2f}", f"{s.recall:.2f}",
        )  # fmt: skip
    Console().print(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / "accuracy.json").write_text(json.dumps(to_json(scores), indent=1) + "\n")
    (out / "report.md").write_text(markdown(scores))
    typer.echo(f"report in {out / 'report.md'} and {out / 'accuracy.json'}")
