"""The `harmonia` command line: one module per subcommand, assembled in main.py."""

from collections.abc import Iterable
from typing import NoReturn

import typer

# Exit codes: 2 for a bad input the user can fix (docs/formats.md), 1 for a failed run.
EXIT_INVALID = 2
EXIT_FAILED = 1


def fail(lines: Iterable[str], code: int) -> NoReturn:
    """Print error lines to stderr, as written (no markup), and exit with `code`."""
    for line in lines:
        typer.echo(line, err=True)
    raise typer.Exit(code)
