"""`harmonia phases`: I/O phases from an executable (--binary) or from source code (--source);
`harmonia annotate`: turn `#pragma harmonia` markers into libharmonia calls, as a filter (FILE ->
stdout) or as a compiler wrapper (`harmonia annotate --cc -- gcc -c app.c ...`); `harmonia
reproduce phases`: precision and recall of each phase-detection mode."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, OutDir, fail
from harmonia.phases.annotate import SOURCE_SUFFIXES, AnnotateError, annotate
from harmonia.simulator import REPO_ROOT, SimulatorNotFound

if TYPE_CHECKING:
    from harmonia.phases.source import Block, SourceReport


def phases(
    binary: Annotated[
        Path | None, typer.Option("--binary", help="An ELF executable or library.")
    ] = None,
    source: Annotated[
        Path | None, typer.Option("--source", help="A directory of C, C++ and Fortran code.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    min_score: Annotated[
        int, typer.Option(min=1, help="--source: smallest block score reported.")
    ] = 3,
    do_inject: Annotated[
        bool,
        typer.Option("--inject", help="--source: write a marked copy of the code to --out."),
    ] = False,
    out: Annotated[Path | None, typer.Option(help="--inject: where the marked copy goes.")] = None,
) -> None:
    """Find I/O phases without running the program: the I/O entry points in an executable's
    symbols (--binary), or the I/O-intensive loops in its source code (--source), which
    --inject can mark for libharmonia (docs/phase-detection.md)."""
    from harmonia.phases.binary import BinaryError, inspect

    if (binary is None) == (source is None):
        fail(["give exactly one of --binary EXE and --source DIR"], EXIT_INVALID)
    if source is not None:
        _source_mode(source, as_json, min_score, do_inject, out)
        return
    assert binary is not None
    try:
        report = inspect(binary)
    except BinaryError as error:
        fail([str(error)], EXIT_INVALID)
    if as_json:
        typer.echo(
            json.dumps(
                {"binary": str(binary), "stripped": report.stripped, "calls": report.calls,
                 "verdict": report.verdict()},
                indent=2,
            )
        )  # fmt: skip
        return
    table = Table(title=f"I/O entry points of {binary}")
    for column in ("interface", "kind", "functions"):
        table.add_column(column)
    for interface, kinds in report.calls.items():
        for kind, names in kinds.items():
            table.add_row(interface, kind, ", ".join(names))
    Console().print(table)
    typer.echo(report.verdict())


def _source_mode(
    directory: Path, as_json: bool, min_score: int, do_inject: bool, out: Path | None
) -> None:
    from harmonia.phases.source import SourceError, analyze, inject

    if do_inject and out is None:
        fail(["--inject needs --out DIR (the input is never modified)"], EXIT_INVALID)
    try:
        report = analyze(directory, min_score)
        marked = inject(report, out) if do_inject and out is not None else []
    except SourceError as error:
        fail([str(error)], EXIT_INVALID)
    for path, reason in report.unparsed:
        typer.echo(f"skipped {path}: {reason}", err=True)
    if as_json:
        typer.echo(json.dumps(_as_json(report, marked, out), indent=2))
        return
    table = Table(title=f"I/O-intensive blocks in {directory} ({report.files} files)")
    for column in ("file", "lines", "function", "score", "I/O calls", "marked"):
        table.add_column(column, justify="right" if column == "score" else "left")
    for block in report.blocks:
        calls = ", ".join(sorted({f"{c.name} ({c.kind})" for c in block.calls}))
        state = (
            "yes" if block in marked else ("" if not do_inject else "no: not alone on its lines")
        )
        table.add_row(
            str(block.path), f"{block.start_line}-{block.end_line}", block.function,
            str(block.score), calls, state,
        )  # fmt: skip
    Console().print(table)
    if do_inject:
        typer.echo(f"{len(marked)} blocks marked in {out}")


def _as_json(report: SourceReport, marked: list[Block], out: Path | None) -> dict[str, Any]:
    return {
        "directory": str(report.directory),
        "files": report.files,
        "unparsed": [{"file": str(p), "reason": r} for p, r in report.unparsed],
        "blocks": [
            {
                "file": str(b.path),
                "language": b.language,
                "function": b.function,
                "start_line": b.start_line,
                "end_line": b.end_line,
                "score": b.score,
                "name": b.name,
                "markable": b.markable,
                "marked": b in marked,
                "calls": [
                    {"name": c.name, "kind": c.kind, "line": c.line, "loop_depth": c.depth}
                    for c in b.calls
                ],
            }  # fmt: skip
            for b in report.blocks
        ],
        "out": str(out) if out else None,
    }


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


def reproduce_phases(out: OutDir = Path("results/phase-accuracy")) -> None:
    """The precision and recall of each phase-detection mode against known phases."""
    from harmonia.phases.experiment import markdown, run_all, to_json

    console = Console(stderr=True)
    try:
        scores = run_all(lambda what: console.print(what))
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    table = Table(title="Phase detection against known phases")
    for column in ("mode", "case", "true", "detected", "matched", "precision", "recall"):
        table.add_column(column, justify="left" if column in ("mode", "case") else "right")
    for s in scores:
        table.add_row(
            s.mode, s.case, str(s.true_phases), str(s.detected), str(s.matched),
            f"{s.precision:.2f}", f"{s.recall:.2f}",
        )  # fmt: skip
    Console().print(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / "accuracy.json").write_text(json.dumps(to_json(scores), indent=1) + "\n")
    (out / "report.md").write_text(markdown(scores))
    typer.echo(f"report in {out / 'report.md'} and {out / 'accuracy.json'}")
