"""`harmonia report DIR`: the comparison table and plots of a finished `sim` run, and its jobs'
accounting; `harmonia report FILE.json`: the jobs of one accounting file (harmonia-schedd's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_INVALID, fail

if TYPE_CHECKING:
    from harmonia.results import RunResult


# Table headers are shorter than the plot labels so the table fits about 100 columns.
TABLE_COLUMNS = {
    "avg_completion": "completion",
    "avg_wait": "wait",
    "avg_io": "I/O",
    "avg_stall": "stall",
    "fairness": "fairness",
    "buffer_efficiency": "buf. eff.",
    "avg_phase_bandwidth": "phase BW",
    "avg_interference_factor": "I_f",
}


def comparison_table(results: dict[str, RunResult]) -> Table:
    """One row per policy, one column per headline metric (averages over applications)."""
    from harmonia.results import METRIC_DISPLAYS

    first = next(iter(results.values()))
    table = Table(
        title=f"{first.scenario} (seed {first.seed}): averages over applications",
        box=box.SIMPLE_HEAD,
        padding=(0, 0, 0, 1),
        pad_edge=False,
    )
    table.add_column("policy", overflow="fold")
    displays = [METRIC_DISPLAYS[key] for key in TABLE_COLUMNS]
    for display, header in zip(displays, TABLE_COLUMNS.values(), strict=True):
        table.add_column(f"{header}\n{display.unit}", justify="right", min_width=len(header))
    for policy, run in results.items():
        table.add_row(policy, *(f"{d.value(run):,.{d.digits}f}" for d in displays))
    return table


def _buffer_count(directory: Path) -> int:
    from harmonia.results import ResultsError

    path = directory / "scenario.json"
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["buffers"]["count"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ResultsError(f"{path}: cannot read the buffer count: {error}") from error


def show_report(
    directory: Path, results: dict[str, RunResult], shown_as: Path | None = None
) -> None:
    """Print the comparison table; write metrics.png and timeline-<policy>.png into `directory`
    (named `shown_as` in the message when they are written in a staging directory)."""
    from harmonia.plots.metrics import plot_metrics
    from harmonia.plots.timeline import plot_timeline

    buffer_count = _buffer_count(directory)
    _print_wide(comparison_table(results))
    written = [directory / "metrics.png"]
    plot_metrics(results, written[0])
    for policy, run in results.items():
        written.append(directory / f"timeline-{policy}.png")
        plot_timeline(run, buffer_count, written[-1])
    typer.echo(f"plots in {shown_as or directory}: " + ", ".join(path.name for path in written))
    show_charges(directory, list(results), shown_as)


def show_charges(directory: Path, policies: list[str], shown_as: Path | None = None) -> None:
    """The charges per policy and I/O service class, from `<policy>.accounting.json` (runs made
    before accounting existed have none: nothing is printed)."""
    from harmonia.accounting import charges_table, load_accounting

    files = {policy: directory / f"{policy}.accounting.json" for policy in policies}
    present = {policy: path for policy, path in files.items() if path.exists()}
    if not present:
        return
    per_policy = {policy: load_accounting(path) for policy, path in present.items()}
    _print_wide(charges_table(per_policy))
    typer.echo(
        f"per-job accounting in {shown_as or directory}: <policy>.accounting.csv and .json"
        " (harmonia report DIR --jobs POLICY)"
    )


def _print_wide(table: Table) -> None:
    # Rich crops what does not fit; a terminal soft-wrapping a wide line is better than lost digits.
    console = Console()
    natural_width = console.measure(table, options=console.options.update_width(1000)).maximum
    Console(width=max(console.width, natural_width)).print(table)


def show_jobs(path: Path) -> None:
    """The per-job table of one accounting JSON file, and where its CSV twin is."""
    from harmonia.accounting import jobs_table, load_accounting

    records = load_accounting(path)
    _print_wide(jobs_table(records, f"{path}: {len(records)} jobs"))
    csv = path.with_suffix(".csv")
    if csv.exists():
        typer.echo(f"CSV: {csv}")


def report(
    directory: Annotated[
        Path,
        typer.Argument(
            help="Output directory of `harmonia sim` (holds <policy>.json), or an accounting"
            " JSON file (harmonia-schedd --accounting PREFIX writes PREFIX.json)."
        ),
    ],
    jobs: Annotated[
        str | None,
        typer.Option(
            help="List the accounting record of every job under this policy (sacct's columns"
            " and Harmonia's).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Re-print the comparison table, the charges, and redraw the plots from a run's result
    files; or list the jobs of an accounting file."""
    from harmonia.accounting import AccountingError
    from harmonia.results import ResultsError, load_results

    try:
        if directory.is_file():
            if jobs is not None:
                fail(
                    [f"--jobs applies to a run directory, not to the file {directory}"],
                    EXIT_INVALID,
                )
            show_jobs(directory)
        elif jobs is not None:
            path = directory / f"{jobs}.accounting.json"
            if not path.exists():
                fail([f"--jobs {jobs}: {path} does not exist"], EXIT_INVALID)
            show_jobs(path)
        else:
            show_report(directory, load_results(directory))
    except (ResultsError, AccountingError) as error:
        fail([str(error)], EXIT_INVALID)
