"""`harmonia bench`: interference between real MPI applications on this machine (BBIO, V-A)."""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harmonia.bench import (
    BenchError,
    BenchSettings,
    Coordination,
    DeltaPoint,
    StrategyResult,
    plot_delta_graph,
    plot_strategies,
    plot_strategy_deltas,
    run_bench,
    run_coordinated,
)
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
    strategies: Annotated[
        str | None,
        typer.Option(
            help="Coordination strategies to compare (e.g. none,1a,1b,2a,2b,3a,3b,throttle): "
            "each application becomes a job of its own under libharmonia and harmonia-schedd."
        ),
    ] = None,
    flush_order: Annotated[
        str, typer.Option(help="With --strategies: free, token, window or priority.")
    ] = "free",
    pfs_servers: Annotated[
        int, typer.Option(min=1, help="With --strategies: server directories for 3a/3b.")
    ] = 8,
) -> None:
    """Split MPI processes into applications that write at once, measure each one's I/O phase
    time alone and together, and plot I_f against the delay between them (a Delta-graph).
    With --strategies, compare the coordination strategies (docs/control.md) on the same runs:
    a table of phase times and I_f per strategy, and a bar plot like the paper's Fig. 4-8."""
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
    if strategies is not None:
        chosen = [name.strip() for name in strategies.split(",") if name.strip()]
        known = ("none", "1a", "1b", "2a", "2b", "3a", "3b", "throttle")
        unknown = [name for name in chosen if name not in known]
        if unknown or not chosen:
            fail([f"--strategies: unknown {', '.join(unknown)} (known: {', '.join(known)})"],
                 EXIT_INVALID)  # fmt: skip
        if flush_order not in ("free", "token", "window", "priority"):
            fail([f"--flush-order: {flush_order}: free, token, window or priority"], EXIT_INVALID)
        if processes % apps:
            fail([f"--processes ({processes}) must be a multiple of --apps ({apps})"],
                 EXIT_INVALID)  # fmt: skip
        try:
            coordination = Coordination(
                find_tool("harmonia-schedd", "HARMONIA_SCHEDD_BIN", "src/schedd/harmonia-schedd"),
                find_tool(
                    "libharmonia.so", "HARMONIA_LIBRARY", "src/runtime/bbio/libharmonia.so"
                ).resolve(),
                flush_order,
                pfs_servers,
            )
            results = run_coordinated(
                binary, settings, coordination, chosen, lambda what: console.print(what)
            )
        except (BenchError, SimulatorNotFound) as error:
            fail([str(error)], EXIT_FAILED)
        _report_strategies(results, apps, processes, requests, size, directory, flush_order, out)
        return
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


def _report_strategies(
    results: list[StrategyResult],
    apps: int,
    processes: int,
    requests: int,
    size: str,
    directory: Path,
    flush_order: str,
    out: Path,
) -> None:
    table = Table(
        title=f"{apps} jobs x {processes // apps} processes, {requests} x {size} each, "
        f"flush order {flush_order}"
    )
    table.add_column("strategy")
    table.add_column("D (s)", justify="right")
    for k in range(apps):
        table.add_column(f"app {k} (s)", justify="right")
        table.add_column(f"app {k} I_f", justify="right")
    table.add_column("all done (s)", justify="right")
    first: list[DeltaPoint] = results[0].points
    for point in first:
        table.add_row(
            "alone",
            f"{point.delta:g}",
            *[cell for k in range(apps) for cell in (f"{point.alone[k]:.3f}", "1.00")],
            "",
        )
    for result in results:
        for point in result.points:
            cells = []
            for k in range(apps):
                cells += [f"{point.together[k]:.3f}", f"{point.interference(k):.2f}"]
            ends = [point.delta * k + point.together[k] for k in range(apps)]
            table.add_row(result.strategy, f"{point.delta:g}", *cells, f"{max(ends):.3f}")
    Console().print(table)
    out.mkdir(parents=True, exist_ok=True)
    plot_strategies(results, apps, f"Coordinated jobs on {directory}", out / "strategies.png")
    plot_strategy_deltas(
        results, apps, f"Interference under each strategy on {directory}", out / "delta.png"
    )
    summary = [
        {
            "strategy": r.strategy,
            "points": [
                {"delta": p.delta, "alone": p.alone, "together": p.together} for p in r.points
            ],
        }
        for r in results
    ]
    (out / "strategies.json").write_text(json.dumps(summary, indent=1) + "\n")
    typer.echo(
        f"table in {out / 'strategies.json'}, plots in {out / 'strategies.png'} and"
        f" {out / 'delta.png'}"
    )
