"""`harmonia netsim FILE.toml`: MPI and I/O traffic of two jobs on a fat-tree, each job alone
(baseline) and both together (interference), with the slowdown (docs/network-interference.md);
`harmonia reproduce network`: the experiments of the MPI/I-O interference paper (ICPP 2018)."""

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, Jobs, fail, progress_bar
from harmonia.network import NetworkModelName
from harmonia.simulator import SimulatorNotFound


def latency_table(summary: dict[str, Any], title: str, finite: dict[str, bool]) -> Table:
    """Latency mean, median, quartiles and max per traffic type and run, the completion time of
    finite jobs, and the slowdown."""
    from harmonia.network.plots import latency_unit

    table = Table(title=title)
    for column in ("traffic", "run", "transfers"):
        table.add_column(column)
    stats = ("mean", "q1", "median", "q3", "max")
    for stat in stats:
        table.add_column(stat, justify="right")
    table.add_column("completion", justify="right")
    table.add_column("slowdown (mean)", justify="right")
    for traffic, entry in summary.items():
        runs = [r for r in ("baseline", "interference") if r in entry]
        unit, factor = latency_unit([entry[r]["latency"]["mean"] for r in runs])
        for run in runs:
            latency = entry[run]["latency"]
            quota = entry[run]["quota_time"]
            slowdown = entry.get("slowdown", {}).get("mean") if run == "interference" else None
            table.add_row(
                "MPI" if traffic == "mpi" else "I/O",
                run,
                str(int(latency["count"])),
                *(f"{latency[s] * factor:.4g} {unit}" for s in stats),
                f"{quota:.4g} s" if quota is not None and finite[traffic] else "",
                f"{slowdown:.2f}x" if slowdown else "",
            )
    return table


def run_netsim(
    scenario_path: Path,
    out: Path | None,
    jobs: int,
    plots: bool = True,
    network: NetworkModelName | None = None,
) -> Path:
    """Validate, run every run of the scenario (on the `network` model if given, else the
    scenario's), then write summary.json, the table and plots. Returns the output directory.
    Nothing is written unless the scenario is valid."""
    from harmonia.network.model import (
        NetsimFailed,
        RunDone,
        find_netsim,
        load_netsim,
        load_run,
        normalize,
        run_all,
        summarize,
        write_json_atomically,
    )
    from harmonia.network.plots import plot_latency_boxes, plot_link_loads, plot_slowdown_bars
    from harmonia.scenario import ScenarioError

    try:
        scenario = load_netsim(scenario_path)
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    if network is not None:
        model = scenario.network.model_copy(update={"model": network})
        scenario = scenario.model_copy(update={"network": model})
    try:
        binary = find_netsim()
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    configs = normalize(scenario)
    name = scenario.scenario.name
    out_dir = out if out is not None else Path("results") / "netsim" / name
    console = Console(stderr=True)
    progress = progress_bar(console, spinner=True)
    with progress:
        task = progress.add_task(f"simulating {name}", total=len(configs))

        def finished(done: RunDone) -> None:
            rate = done.perf.get("transfers_per_s", 0)
            progress.console.print(
                f"{done.name}: {done.perf.get('transfers', 0)} transfers in {done.seconds:.1f} s"
                f" ({rate:,.0f} transfers/s)"
            )
            progress.advance(task)

        try:
            run_all(binary, configs, out_dir, jobs, finished)
        except NetsimFailed as error:
            fail([str(error)], EXIT_FAILED)
    results = {run: load_run(out_dir / f"{run}.json") for run in configs}
    summary = summarize(results, list(scenario.run.measure))
    truncated = [run for run, r in results.items() if r["truncated"]]
    write_json_atomically(
        out_dir / "summary.json", {"name": name, "truncated": truncated, "jobs": summary}
    )
    finite = {"mpi": scenario.mpi.finite, "io": scenario.io.finite}
    Console(width=max(Console().width, 120)).print(
        latency_table(summary, f"{name}: latency per transfer", finite)
    )
    for run in truncated:
        console.print(
            f"[yellow]warning[/]: run {run} stopped early ({results[run]['stop_reason']})"
        )
    if plots:
        plot_latency_boxes(summary, name, out_dir / "latency.png")
        if any("slowdown" in entry for entry in summary.values()):
            plot_slowdown_bars(summary, name, out_dir / "slowdown.png")
        shown = "interference" if "interference" in results else next(iter(results))
        if "link_load" in results[shown]:
            plot_link_loads(results[shown], f"{name} ({shown})", out_dir / "link-load.png")
    typer.echo(f"results in {out_dir}", err=True)
    return out_dir


def netsim(
    scenario: Annotated[Path, typer.Argument(help="Network scenario TOML file.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Output directory (default: results/netsim/<name>).", show_default=False),
    ] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Simulator processes run at once.")] = 2,
    network: Annotated[
        NetworkModelName | None,
        typer.Option(
            help='"fluid" (max-min sharing, fast) or "packet" (ns-3: packets in switch queues '
            "with credit flow control); default: the scenario's network.model, else fluid.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Simulate MPI and I/O traffic on a fat-tree, each job alone and both together, and report
    latencies, slowdowns and the per-link load map (docs/network-interference.md)."""
    run_netsim(scenario, out, jobs, network=network)


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
        typer.Option(
            help='"fluid" (max-min sharing) or "packet" (ns-3 queues with credits) model.'
        ),
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
    from harmonia.network.experiment import (
        EXPERIMENTS,
        Settings,
        markdown,
        run_cases,
        select,
        write_plots,
    )
    from harmonia.network.model import PRESETS, NetsimFailed, RunDone, find_netsim

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
