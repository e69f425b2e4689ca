"""`harmonia import-darshan LOG`: a Darshan log turned into a workload file for scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.darshan_layers import LAYERS, lack_label
from harmonia.units import format_size

if TYPE_CHECKING:
    from harmonia.scenario import WorkloadFile


def show_summary(workload: WorkloadFile) -> None:
    """One row per application: what the log holds and what it lacks."""
    info = workload.workload
    table = Table(title=f"{info.source} ({info.layer} layer, timing from {info.timing})")
    for column in ("app", "ranks", "run time", "phases", "read", "written"):
        table.add_column(column, no_wrap=True)
    table.add_column("the log lacks", overflow="fold")
    lacks = "\n".join(lack_label(lack) for lack in info.lacks) or "nothing"
    for app in workload.apps:
        table.add_row(
            app.name,
            str(app.ranks),
            f"{app.run_time:.3g} s",
            f"{sum(p.op == 'write' for p in app.phases)} write,"
            f" {sum(p.op == 'read' for p in app.phases)} read",
            format_size(app.bytes_read),
            format_size(app.bytes_written),
            lacks,
        )
    Console().print(table)
    for lack in info.lacks:
        typer.echo(f"lacks: {lack}")
    for note in info.notes:
        typer.echo(f"note: {note}")


def import_darshan(
    log: Annotated[Path, typer.Argument(help="A Darshan log (.darshan).", show_default=False)],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Workload file to write (default: LOG's name with .toml, here)."
        ),
    ] = None,
    gap: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="Idle seconds that separate two phases (default: max(0.25 s, 0.1% of run time)).",
            show_default=False,
        ),
    ] = None,
    layer: Annotated[
        str | None,
        typer.Option(
            help=f"I/O layer to read: {', '.join(LAYERS)} (default: the first the log has).",
            show_default=False,
        ),
    ] = None,
    dxt: Annotated[
        bool, typer.Option("--dxt/--no-dxt", help="Use DXT traces when the log has them.")
    ] = True,
) -> None:
    """Read a Darshan log and write its applications and I/O phases as a workload file.

    Scenarios use the file with workload = "imported" (docs/formats.md, section 4).
    """
    from harmonia.darshan_import import (
        DarshanImportError,
        import_log,
        write_workload,
    )

    if layer is not None and layer not in LAYERS:
        fail([f'--layer: unknown layer "{layer}" (known: {", ".join(LAYERS)})'], EXIT_INVALID)
    try:
        imported = import_log(log, gap=gap, layer=layer, use_dxt=dxt)
    except DarshanImportError as error:
        fail([str(error)], EXIT_INVALID)
    target = out if out is not None else Path(log.name).with_suffix(".toml")
    try:
        write_workload(imported.document, target)
    except OSError as error:
        fail([f"{target}: cannot write: {error.strerror}"], EXIT_FAILED)
    show_summary(imported.workload)
    phases = sum(len(app.phases) for app in imported.workload.apps)
    typer.echo(f"wrote {target} ({phases} phases)")
