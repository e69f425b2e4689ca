"""`harmonia bench`: interference between real MPI applications on this machine (BBIO, V-A)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harmonia.bench import BenchError, BenchSettings, plot_delta_graph, run_bench
from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.simulator import SimulatorNotFound, find_tool
from harmonia.units import parse_size


def bench(
    directory: Annotated[Path, typer.Option("--dir", help="Where the applications write.")] = Path(
        "results/bench/files"
    ),
    out: Annotated[Path, typer.Option(help="Where the table and plot go.")] = Path("results/bench"),
    processes: Annotated[int, typer.Option(min=1, help="MPI processes in all.")] = 4,
    apps: Annotated[int, typer.Option(min=1, help="Applications K.")] = 2,
    requests: Annotated[int, typer.Option(min=1, help="Requests N per process.")] = 16,
    size: Annotated[str, typer.Option(help="Request size S.")] = "4 MiB",
    delay: Annotated[float, typer.Option(min=0, help="Seconds d between requests.")] = 0.0,
    deltas: Annotated[str, typer.Option(help="Delays D between application starts (s).")] = (
        "0,0.1,0.2,0.4"
    ),
    repeat: Annotated[int, typer.Option(min=1, help="Runs per point (medians).")] = 3,
    api: Annotated[str, typer.Option(help="posix (write) or stdio (fwrite).")] = "posix",
    sync: Annotated[str, typer.Option(help="fsync, direct (O_DIRECT) or none.")] = "fsync",
) -> None:
    """Split MPI processes into applications that write at once, measure each one's I/O phase
    time alone and together, and plot I_f against the delay between them (a Delta-graph).
    Only the uncoordinated baseline runs here: the coordination strategies (docs/coordination.md)
    need the scheduler daemon, which is not built yet."""
    if processes < apps:
        fail([f"--processes ({processes}) must be at least --apps ({apps})"], EXIT_INVALID)
    try:
        request_size = int(parse_size(size))
        delta_values = tuple(float(d) for d in deltas.split(","))
    except ValueError as error:
        fail([f"--size/--deltas: {error}"], EXIT_INVALID)
    if any(d < 0 for d in delta_values):
        fail(["--deltas: delays must be >= 0"], EXIT_INVALID)
    try:
        binary = find_tool("harmonia-bench", "HARMONIA_BENCH", "src/tools/harmonia-bench")
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    settings = BenchSettings(
        directory, processes, apps, requests, request_size, delay, delta_values, repeat, api, sync
    )
    console = Console(stderr=True)
    try:
        points = run_bench(binary, settings, lambda what: console.print(what))
    except BenchError as error:
        fail([str(error)], EXIT_FAILED)
    table = Table(title=f"{apps} applications x {processes // apps} processes, {requests} x {size}")
    table.add_column("D (s)", justify="right")
    for k in range(apps):
        table.add_column(f"app {k} alone (s)", justify="right")
        table.add_column(f"app {k} together (s)", justify="right")
        table.add_column(f"app {k} I_f", justify="right")
    for point in points:
        row = [f"{point.delta:g}"]
        for k in range(apps):
            row += [
                f"{point.alone[k]:.3f}",
                f"{point.together[k]:.3f}",
                f"{point.interference(k):.2f}",
            ]
        table.add_row(*row)
    Console().print(table)
    out.mkdir(parents=True, exist_ok=True)
    plot_delta_graph(
        points, apps, f"Interference on {directory} (no coordination)", out / "delta.png"
    )
    typer.echo(f"Delta-graph in {out / 'delta.png'}")
