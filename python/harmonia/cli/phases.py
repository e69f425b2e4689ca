"""`harmonia phases --binary EXE`: the I/O entry points an executable calls (binary mode)."""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harmonia.binary_phases import BinaryError, inspect
from harmonia.cli import EXIT_INVALID, fail


def phases(
    binary: Annotated[Path, typer.Option("--binary", help="An ELF executable or library.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Find the I/O entry points (POSIX, stdio, MPI-IO, HDF5) in an executable's symbols."""
    try:
        report = inspect(binary)
    except BinaryError as error:
        fail([str(error)], EXIT_INVALID)
    if as_json:
        typer.echo(
            json.dumps(
                {"binary": str(binary), "stripped": report.stripped, "calls": report.calls,
                 "verdict": report.verdict()},
                indent=2,
            )
        )  # fmt: skip
        return
    table = Table(title=f"I/O entry points of {binary}")
    for column in ("interface", "kind", "functions"):
        table.add_column(column)
    for interface, kinds in report.calls.items():
        for kind, names in kinds.items():
            table.add_row(interface, kind, ", ".join(names))
    Console().print(table)
    typer.echo(report.verdict())
