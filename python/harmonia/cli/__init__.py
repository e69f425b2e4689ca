"""The `harmonia` command line: one module per subcommand, assembled in main.py."""

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn

# Exit codes: 2 for a bad input the user can fix (docs/formats.md), 1 for a failed run.
EXIT_INVALID = 2
EXIT_FAILED = 1

# Options several commands share, each command giving its own default.
OutDir = Annotated[Path, typer.Option(help="Output directory.")]
Jobs = Annotated[int, typer.Option(min=1, help="Simulator processes run at once.")]
# The policies of an experiment run for real (`harmonia reproduce buffers`, `reads`).
OnlyPolicies = Annotated[
    str, typer.Option("--only", help="The policies, comma-separated, as harmonia sim --policy.")
]
Repeat = Annotated[int, typer.Option(min=1, help="Runs of each policy.")]


def fail(lines: Iterable[str], code: int) -> NoReturn:
    """Print error lines to stderr, as written (no markup), and exit with `code`."""
    for line in lines:
        typer.echo(line, err=True)
    raise typer.Exit(code)


def show_report(files: list[Path], out: Path) -> None:
    """Prints an experiment's report (the first of `files`, as write_report returns them) and
    the names of the outputs it wrote in `out`."""
    typer.echo(files[0].read_text())
    typer.echo(f"results in {out}: " + ", ".join(f.name for f in files))


def progress_bar(console: Console, spinner: bool = False) -> Progress:
    """The sub-commands' progress display on `console`: the task's description, a bar, done of
    total and the time elapsed; `spinner` puts a spinner first, for steps of unknown length."""
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    return Progress(*((SpinnerColumn(),) if spinner else ()), *columns, console=console)


def seeds_or_fail(text: str) -> list[int]:
    """The seeds `--seeds TEXT` names ("1-10", "1,2,5"); a bad list fails with EXIT_INVALID,
    naming the option."""
    from harmonia.experiments.reproduce import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as error:
        fail([f"--seeds {text}: {error}"], EXIT_INVALID)
