"""`harmonia profile DIR`: measure the device behind DIR as the Harmonia paper does (III-A)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail, progress_bar
from harmonia.profiler import Point, ProfileError, ProfileSettings, device_toml, profile
from harmonia.units import parse_size


def _size(text: str, option: str) -> int:
    try:
        size = int(parse_size(text))
    except ValueError as error:
        fail([f"{option}: {error}"], EXIT_INVALID)
    if size <= 0:
        fail([f"{option}: must be > 0, got {text!r}"], EXIT_INVALID)
    return size


def profile_device(
    directory: Annotated[Path, typer.Argument(help="A directory on the device to measure.")],
    name: Annotated[str, typer.Option(help="Device name in the model file.")] = "measured",
    max_streams: Annotated[
        int, typer.Option(min=1, max=256, help="Largest k (powers of two up to it).")
    ] = 32,
    request_size: Annotated[
        str, typer.Option(help="Bytes per request (paper: 64 MiB).")
    ] = "16 MiB",
    size_per_stream: Annotated[
        str, typer.Option(help="Bytes each stream writes (paper: 2 GB in total).")
    ] = "128 MiB",
    op: Annotated[str, typer.Option(help='"write", "read" or "both".')] = "both",
    buffered: Annotated[bool, typer.Option(help="Do not use O_DIRECT.")] = False,
    out: Annotated[Path | None, typer.Option(help="Output directory (default: DIR).")] = None,
) -> None:
    """Concurrent file-per-process streams from 1 to MAX_STREAMS; writes NAME.toml (a device model
    for scenario files) and NAME.png (bandwidth, MSCA and I_f against k) into OUT."""
    from harmonia.plots.profile import plot_profile

    if not directory.is_dir():
        fail([f"{directory}: not a directory"], EXIT_INVALID)
    if op not in ("write", "read", "both"):
        fail([f'--op: must be "write", "read" or "both", got {op!r}'], EXIT_INVALID)
    ops = ["write", "read"] if op == "both" else [op]
    writers = [1 << i for i in range(max_streams.bit_length()) if 1 << i <= max_streams]
    try:
        settings = ProfileSettings(
            directory,
            writers,
            _size(request_size, "--request-size"),
            _size(size_per_stream, "--size-per-stream"),
            direct=not buffered,
        )
    except ValueError as error:
        fail([f"--request-size: {error}"], EXIT_INVALID)
    out_dir = out if out is not None else directory
    console = Console(stderr=True)
    progress = progress_bar(console)
    with progress:
        task = progress.add_task(f"profiling {directory}", total=len(writers) * len(ops))

        def measured(point: Point) -> None:
            progress.console.print(
                f"{point.op} k={point.streams}: {point.bandwidth / 1e6:,.0f} MB/s"
            )
            progress.advance(task)

        try:
            result = profile(settings, ops, measured)
        except ProfileError as error:
            fail([str(error)], EXIT_FAILED)
    if not result.direct_io and not buffered:
        console.print(f"warning: {directory} refuses O_DIRECT; measured buffered I/O with fsync")

    table = Table(title=f"{directory} ({'direct' if result.direct_io else 'buffered'} I/O)")
    for column in ("op", "k", "MB/s", "of peak", "MSCA", "I_f"):
        table.add_column(column, justify="right")
    for operation in ops:
        rows = zip(
            [p for p in result.points if p.op == operation],
            result.curve(operation),
            result.msca(operation),
            result.interference(operation),
            strict=True,
        )
        for point, (_, fraction), (_, msca), (_, i_f) in rows:
            table.add_row(
                operation,
                str(point.streams),
                f"{point.bandwidth / 1e6:,.0f}",
                f"{fraction:.0%}",
                f"{msca:.2f}",
                f"{i_f:.2f}",
            )
    Console().print(table)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.toml").write_text(device_toml(result, name), encoding="utf-8")
    plot_profile(result, f"{name}: {directory}", out_dir / f"{name}.png")
    typer.echo(f"device model in {out_dir / (name + '.toml')}, curves in {name}.png")
