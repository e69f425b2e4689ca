"""`harmonia reproduce`: re-run the Harmonia paper's evaluation and compare with the paper."""

from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli.sim import run_scenario
from harmonia.experiments.reproduce import markdown_report, scenario_files, write_plots


def reproduce(
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("results/reproduction"),
    jobs: Annotated[int, typer.Option(min=1, help="Simulator processes run at once.")] = 2,
) -> None:
    """Simulate every scenario of the paper's section V with every policy, then write
    report.md (paper next to ours) and the figures into OUT."""
    files = scenario_files()
    dirs = {key: out / key for key in files}
    for number, (key, path) in enumerate(files.items(), start=1):
        typer.echo(f"[{number}/{len(files)}] {path.name}", err=True)
        run_scenario(path, "all", dirs[key], jobs)
    report = markdown_report(dirs)
    (out / "report.md").write_text(report, encoding="utf-8")
    plots = write_plots(dirs, out)
    typer.echo(report)
    typer.echo(f"report and figures in {out}: report.md, " + ", ".join(p.name for p in plots))
