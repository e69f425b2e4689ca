"""`harmonia fwdsim FILE`: a forwarding-layer scenario with every scheduler it names;
`harmonia reproduce forwarding`: the TWINS dissertation's experiments, simulated."""

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, Jobs, OutDir, fail
from harmonia.simulator import SimulatorNotFound


def fwdsim(
    scenario: Annotated[Path, typer.Argument(help="A forwarding scenario (TOML, [forwarding]).")],
    out: Annotated[Path | None, typer.Option(help="Output directory.")] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Simulator processes run at once.")] = 2,
) -> None:
    """Simulate clients, I/O forwarding nodes running a request scheduler, and data servers
    (docs/forwarding-simulation.md): bandwidth per application, interference, mean aggregated
    request size and data-server concurrency for each scheduler ("none": no forwarding)."""
    from harmonia.forwarding.model import FwdsimFailed, load_forwarding, run_scenario, summarize
    from harmonia.forwarding.plots import plot_bandwidth, plot_concurrency
    from harmonia.scenario import ScenarioError

    try:
        f = load_forwarding(scenario)
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    out = out or Path("results") / f.name
    console = Console(stderr=True)
    try:
        results = run_scenario(f, jobs, lambda name: console.print(f"done: {name}"))
    except (FwdsimFailed, SimulatorNotFound) as error:
        fail([f"{scenario}: {error}"], EXIT_FAILED)
    rows = summarize(f, results)
    print_table(f.name, rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"scenario": f.name, "rows": rows}, indent=1))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    plot_bandwidth(rows, f"{f.name}: bandwidth by scheduler", out / "bandwidth.png")
    plot_concurrency(results, f.schedulers, f"{f.name}: requests at each data server",
                     out / "concurrency.png")  # fmt: skip
    typer.echo(f"results in {out}: summary.json, results.json, bandwidth.png, concurrency.png")


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    apps = list(rows[0]["apps"])
    table = Table(title=title)
    table.add_column("scheduler")
    for app in apps:
        table.add_column(f"{app} MB/s", justify="right")
        if "interference" in rows[0]["apps"][app]:
            table.add_column(f"{app} I_f", justify="right")
    table.add_column("vs fifo", justify="right")
    table.add_column("mean request sent", justify="right")
    table.add_column("server concurrency", justify="right")
    baseline = next((r for r in rows if r["scheduler"] == "fifo"), None)
    for row in rows:
        cells = [row["scheduler"]]
        for app in apps:
            entry = row["apps"][app]
            cells.append(f"{entry['bandwidth'] / 1e6:.1f}")
            if "interference" in entry:
                cells.append(f"{entry['interference']:.2f}")
        cells.append(f"{baseline['makespan'] / row['makespan']:.2f}x" if baseline else "")
        size = row["mean_dispatch_bytes"]
        cells.append(f"{size / 1024:.0f} KiB" if size else "(direct)")
        cells.append(f"{row['server_concurrency']:.2f}")
        table.add_row(*cells)
    Console().print(table)


def reproduce_forwarding(
    out: OutDir = Path("results/reproduction-forwarding"), jobs: Jobs = 2
) -> None:
    """The TWINS dissertation's forwarding-layer experiments, simulated."""
    from harmonia.forwarding.experiment import markdown, run_grid
    from harmonia.forwarding.model import FwdsimFailed

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
