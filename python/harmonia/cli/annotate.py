"""`harmonia annotate`: turn `#pragma harmonia` markers into libharmonia calls, as a filter
(FILE -> stdout) or as a compiler wrapper (`harmonia annotate --cc -- gcc -c app.c ...`)."""

import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from harmonia.annotate import SOURCE_SUFFIXES, AnnotateError, annotate
from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.simulator import REPO_ROOT


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        fail([f"{path}: cannot read: {error}"], EXIT_INVALID)


def annotate_command(
    args: Annotated[
        list[str], typer.Argument(help="A source file, or with --cc the compiler command.")
    ],
    cc: Annotated[
        bool,
        typer.Option("--cc", help="Wrap a compiler command: annotate its sources, then run it."),
    ] = False,
) -> None:
    """Replace `#pragma harmonia io_begin(NAME[, BYTES])` and `#pragma harmonia io_end` with calls
    to harmonia_io_begin/harmonia_io_end (include/harmonia/bbio.h)."""
    try:
        if not cc:
            if len(args) != 1:
                fail(["give one source file (or --cc -- COMPILER ARGS...)"], EXIT_INVALID)
            path = Path(args[0])
            typer.echo(annotate(_read(path), str(path)).text, nl=False)
            return
        with tempfile.TemporaryDirectory(prefix="harmonia-annotate-") as scratch:
            command = [args[0], f"-I{REPO_ROOT / 'include'}"]
            for arg in args[1:]:
                path = Path(arg)
                if path.suffix in SOURCE_SUFFIXES and path.is_file():
                    result = annotate(_read(path), str(path))
                    if result.markers:
                        copy = Path(scratch) / f"{len(command)}-{path.name}"
                        copy.write_text(result.text, encoding="utf-8")
                        arg = str(copy)
                command.append(arg)
            code = subprocess.run(command, check=False).returncode
    except AnnotateError as error:
        fail([str(error)], EXIT_INVALID)
    except FileNotFoundError:
        fail([f"compiler not found: {args[0]}"], EXIT_FAILED)
    if code != 0:
        raise typer.Exit(code)
