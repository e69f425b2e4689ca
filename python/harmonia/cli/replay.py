"""`harmonia replay WORKLOAD`: an imported workload's I/O, for real, on this machine."""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.units import format_size


def replay_command(
    workload: Annotated[Path, typer.Argument(help="A workload file (harmonia import-darshan).")],
    directory: Annotated[
        Path, typer.Option("--dir", help="Where the files are written (removed at the end).")
    ] = Path("results/replay/files"),
    scale: Annotated[float, typer.Option(help="Multiplies every phase's bytes.")] = 0.01,
    time_scale: Annotated[
        float, typer.Option(help="Multiplies the compute time between phases (0: none).")
    ] = 1.0,
    processes: Annotated[
        int, typer.Option(min=1, help="Processes standing for the ranks (at most the ranks).")
    ] = 4,
    app_name: Annotated[
        str | None, typer.Option("--app", help="The application, when the file holds several.")
    ] = None,
    sync: Annotated[bool, typer.Option(help="fsync each file after a write phase.")] = True,
    out: Annotated[Path | None, typer.Option(help="Also write the results as JSON here.")] = None,
) -> None:
    """Regenerate the workload's I/O pattern with real files: per phase its bytes (times
    --scale), request size, read or write, split over processes standing for the ranks, with
    the compute time between phases (times --time-scale) as sleep. Prints the time each phase
    took here next to the time the log recorded. Run it under libharmonia (`harmonia run --
    harmonia replay ...` or LD_PRELOAD) to replay it coordinated or staged."""
    from harmonia.replay import ReplayError, replay, select_app

    try:
        app = select_app(workload, app_name)
    except ReplayError as error:
        fail([str(error)], EXIT_INVALID)
    console = Console(stderr=True)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"replaying {app.name}", total=len(app.phases))

        def on_phase(index: int, phase: object) -> None:
            progress.update(task, completed=index, description=f"phase {index + 1}")

        try:
            results = replay(app, directory, scale, processes, time_scale, sync, on_phase)
        except ReplayError as error:
            fail([str(error)], EXIT_INVALID if "must be" in str(error) else EXIT_FAILED)
        except OSError as error:
            fail([f"{directory}: {error.strerror}"], EXIT_FAILED)
    table = Table(title=f"{app.name} replayed at scale {scale:g} ({workload.name})")
    for column in ("phase", "op", "bytes", "request", "processes", "logged (s)", "here (s)",
                   "here (MB/s)"):  # fmt: skip
        table.add_column(column, justify="left" if column == "op" else "right")
    for r in results:
        table.add_row(
            str(r.index + 1), r.op, format_size(r.bytes), format_size(r.request_size),
            str(r.processes), f"{r.logged_duration:.3f}", f"{r.measured_duration:.3f}",
            f"{r.bandwidth / 1e6:.1f}",
        )  # fmt: skip
    Console().print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "workload": str(workload), "app": app.name, "scale": scale,
            "time_scale": time_scale, "phases": [asdict(r) for r in results],
        }  # fmt: skip
        out.write_text(json.dumps(document, indent=1) + "\n")
