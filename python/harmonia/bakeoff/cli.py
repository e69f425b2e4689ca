"""`harmonia reproduce bakeoff`: every policy and peer on a grid of synthetic mixes x seeds."""

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, Jobs, OutDir, fail, progress_bar, seeds_or_fail
from harmonia.cli.sim import TraceJobs, TraceRequests, TraceWindow, trace_options
from harmonia.policies import parse_policies
from harmonia.simulator import RunOutcome, SimulatorNotFound, find_simulator


def reproduce_bakeoff(
    out: OutDir = Path("results/bakeoff"),
    jobs: Jobs = 2,
    full: Annotated[bool, typer.Option(help="The large grid (32 jobs, 10 seeds).")] = False,
    seeds: Annotated[
        str | None,
        typer.Option(
            help='The seeds, "1-10" or "1,2,5" (default 1-5, --full 1-10); the tables give the '
            "mean and 95 % interval over them.",
            show_default=False,
        ),
    ] = None,
    trace_file: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Every policy on this SWF trace (plain or .gz), on a machine the jobs share, "
            "instead of the mixes (docs/bakeoff.md).",
            show_default=False,
        ),
    ] = None,
    trace_jobs: TraceJobs = None,
    trace_window: TraceWindow = None,
    requests: TraceRequests = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help="The policies (as harmonia sim --policy; default: every one).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Every policy and peer on a grid of synthetic mixes x seeds (docs/bakeoff.md), or on a
    window of a real trace."""
    from harmonia.bakeoff.experiment import (
        best_per_metric,
        interval,
        make_grid,
        make_trace_grid,
        markdown_tables,
        mixes_left_out,
        paper_comparison,
        relative_tables,
        run_grid,
        write_plots,
        write_summary,
    )
    from harmonia.darshan_import import DarshanImportError
    from harmonia.policies import PEERS
    from harmonia.units import parse_duration
    from harmonia.workloads import TraceSpec

    trace = trace_options(trace_file, trace_jobs, trace_window, requests)
    seed_values = None if seeds is None else tuple(seeds_or_fail(seeds))
    try:
        policies = None if policy is None else tuple(parse_policies(policy))
    except ValueError as error:
        fail([f"--policy: {error}"], EXIT_INVALID)
    if seed_values is not None and len(seed_values) < 2:
        fail(["--seeds: at least 2 (a 95 % interval needs a spread)"], EXIT_INVALID)
    try:
        simulator = find_simulator()
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    if trace is None:
        grid = make_grid(full, seed_values, policies)
    else:
        try:
            spec = TraceSpec(
                Path(trace["file"]),
                trace.get("jobs"),
                parse_duration(trace["start"]) if "start" in trace else None,
                parse_duration(trace["end"]) if "end" in trace else None,
                trace.get("requests", "phases"),
            )
        except ValueError as error:
            fail([f"--trace: {error}"], EXIT_INVALID)
        grid = make_trace_grid(spec, seed_values, policies)
    metrics = grid.metrics
    if out.exists() and not out.is_dir():
        fail([f"--out {out}: not a directory"], EXIT_INVALID)
    console = Console(stderr=True)
    for line in mixes_left_out(grid) if trace is None else []:
        console.print(line)
    console.print(
        f"bake-off: {len(grid.mixes)} mixes x {len(grid.seeds)} seeds x "
        f"{len(grid.policies)} policies = {grid.runs} simulations, {jobs} at once"
    )
    started = time.monotonic()
    ran: list[bool] = []
    progress = progress_bar(console)
    try:
        with progress:
            task = progress.add_task("simulating", total=grid.runs)

            def finished(outcome: RunOutcome) -> None:
                ran.append(outcome.seconds > 0)  # a reused result takes no time
                progress.advance(task)

            def running(policy: str, line: str) -> None:
                progress.console.print(f"{policy}: {line}", markup=False, highlight=False)

            results = run_grid(grid, simulator, out, jobs, finished, running)
    except RuntimeError as error:
        fail([str(error)], EXIT_FAILED)
    except (DarshanImportError, ValueError) as error:  # a mix's logs or spec cannot be drawn
        fail([f"mix: {error}"], EXIT_INVALID)
    except OSError as error:
        fail([f"--out {out}: cannot write: {error.strerror or error}"], EXIT_FAILED)
    wall = time.monotonic() - started

    for mix, by_policy in results.items():
        table = Table(title=f"{mix}: mean ± 95 % interval over {len(grid.seeds)} seeds")
        table.add_column("policy")
        for m in metrics:
            table.add_column(f"{m.short}\n{m.unit}", justify="right")
        for policy, values in by_policy.items():
            cells = []
            for m in metrics:
                mean, half = interval(values[m.key])
                digits = 2 if abs(mean) < 10 else 0
                cells.append(f"{mean:.{digits}f}±{half:.{digits}f}")
            table.add_row(policy + (" *" if policy in PEERS else ""), *cells)
        Console().print(table)
    for mix, best in best_per_metric(results, metrics).items():
        Console().print(
            f"[bold]{mix}[/] best mean: " + "; ".join(f"{m.short} {best[m.key]}" for m in metrics)
        )
    report = markdown_tables(results, grid) + "\n" + relative_tables(results, grid)
    comparison = paper_comparison(results)
    if comparison:
        typer.echo(comparison)
        report += "\n" + comparison
    (out / "bakeoff.md").write_text(report, encoding="utf-8")
    write_summary(results, grid, out)
    plots = write_plots(results, out, metrics)
    typer.echo(
        f"* peer policy. {sum(ran)} simulations run in {wall:.0f} s, "
        f"{len(ran) - sum(ran)} results reused from {out / 'runs'}."
    )
    typer.echo(
        f"tables in {out / 'bakeoff.md'}, data in bakeoff.json, plots: "
        + ", ".join(p.name for p in plots)
    )
