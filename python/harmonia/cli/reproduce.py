"""`harmonia reproduce`: re-run the Harmonia paper's evaluation and compare with the paper."""

from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli import EXIT_INVALID, fail
from harmonia.cli.reproduce_buffers import reproduce_buffers
from harmonia.cli.reproduce_forwarding import reproduce_forwarding
from harmonia.cli.reproduce_network import reproduce_network
from harmonia.cli.reproduce_phases import reproduce_phases
from harmonia.cli.reproduce_slurm import reproduce_slurm
from harmonia.cli.sim import run_scenario


def reproduce(
    paper: Annotated[
        str,
        typer.Argument(
            help='"harmonia" (section V), "buffers" (its VPIC draining case, for real on this '
            'machine), "slurm" (that case as sbatch jobs, DataWarp and Harmonia mode), "network" '
            '(MPI/I/O on fat-trees), "forwarding" (TWINS) or "phases" (the accuracy of phase '
            "detection)."
        ),
    ] = "harmonia",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output directory (default: results/reproduction[-network]).", show_default=False
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Simulator processes run at once.")] = 2,
    system: Annotated[str, typer.Option(help='network: "scaled" or "paper" preset.')] = "scaled",
    only: Annotated[
        str | None,
        typer.Option(
            help="network: experiments; buffers: policies; slurm: modes (comma-separated).",
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="buffers, slurm: runs each.")] = 1,
) -> None:
    """Simulate every scenario of the paper's section V with every policy, then write
    report.md (paper next to ours) and the figures into OUT. `reproduce network` runs the
    experiments of the MPI/I-O interference paper instead (docs/reproduction.md)."""
    from harmonia.experiments.reproduce import markdown_report, scenario_files, write_plots

    if paper == "network":
        reproduce_network(out or Path("results/reproduction-network"), jobs, system, only)
        return
    if paper == "forwarding":
        reproduce_forwarding(out or Path("results/reproduction-forwarding"), jobs)
        return
    if paper == "buffers":
        reproduce_buffers(out or Path("results/reproduction-buffers"), only, repeat)
        return
    if paper == "phases":
        reproduce_phases(out or Path("results/phase-accuracy"))
        return
    if paper == "slurm":
        reproduce_slurm(out or Path("results/reproduction-slurm"), only, repeat)
        return
    if paper != "harmonia":
        fail(
            [f'PAPER: unknown "{paper}" (harmonia, buffers, slurm, network, forwarding, phases)'],
            EXIT_INVALID,
        )
    if only is not None or system != "scaled":
        fail(["--system and --only apply to `harmonia reproduce network` only"], EXIT_INVALID)
    out = out or Path("results/reproduction")
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
