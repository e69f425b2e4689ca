"""`harmonia recover DIR`: replay the staging logs a killed application left in DIR."""

import json
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.simulator import SimulatorNotFound, find_tool


def recover(
    stage_dir: Annotated[Path, typer.Argument(help="The HARMONIA_STAGE_DIR of the application.")],
) -> None:
    """Write every complete staged record to its file, ignore torn tails, remove the logs.

    Safe to run again: logs that were replayed are gone, and replaying is idempotent."""
    if not stage_dir.is_dir():
        fail([f"{stage_dir}: not a directory"], EXIT_INVALID)
    try:
        tool = find_tool("harmonia-recover", "HARMONIA_RECOVER", "src/storage/harmonia-recover")
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    done = subprocess.run([str(tool), str(stage_dir)], capture_output=True, text=True, check=False)
    logs = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if not logs:
        typer.echo(f"{stage_dir}: no staging logs, nothing to recover")
    else:
        table = Table(title=f"recovery of {stage_dir}")
        for column in ("log", "target", "records", "bytes", "torn tail", "status"):
            table.add_column(column, justify="right" if column in ("records", "bytes") else "left")
        for log in logs:
            table.add_row(
                Path(log["log"]).name,
                log["target"],
                str(log["records"]),
                f"{log['bytes']:,}",
                "yes" if log["torn_tail"] else "no",
                log["status"],
            )
        Console().print(table)
    if done.returncode != 0:
        fail([done.stderr.strip() or "some logs could not be replayed"], EXIT_FAILED)
