"""`harmonia reproduce CASE`: re-run a paper's evaluation, one command per case with its own
options, and set our numbers beside the paper's (docs/reproduction.md)."""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from harmonia.bakeoff.cli import reproduce_bakeoff
from harmonia.buffers.cli import reproduce_buffers
from harmonia.cli import Jobs, OutDir, seeds_or_fail
from harmonia.cli.reproduce_slurm import reproduce_slurm
from harmonia.cli.sim import run_scenario
from harmonia.forwarding.cli import reproduce_forwarding
from harmonia.network.cli import reproduce_network
from harmonia.optimum.cli import reproduce_optimum
from harmonia.phases.cli import reproduce_phases
from harmonia.pricing.cli import reproduce_pricing
from harmonia.reads.cli import reproduce_reads


def reproduce_harmonia(
    out: OutDir = Path("results/reproduction"),
    jobs: Jobs = 2,
    seeds: Annotated[
        str,
        typer.Option(help='The seeds, "1-10" or "1,2,5"; the report gives the mean and range.'),
    ] = "1-10",
    max_running_apps: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Applications a policy runs at once (0: no limit; default: each policy's, "
            "from the paper).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The Harmonia paper's section V: every scenario with every policy over the seeds, then
    report.md (the paper next to ours) and the figures."""
    from harmonia.experiments.reproduce import markdown_report, scenario_files, write_plots

    seed_values = seeds_or_fail(seeds)
    files = scenario_files()
    per_seed = [{key: out / f"seed-{seed}" / key for key in files} for seed in seed_values]
    total = len(files) * len(seed_values)
    number = 0
    for seed, dirs in zip(seed_values, per_seed, strict=True):
        for key, path in files.items():
            number += 1
            typer.echo(f"[{number}/{total}] seed {seed}: {path.name}", err=True)
            run_scenario(path, "all", dirs[key], jobs, seed, max_running_apps, quiet=True)
    report = markdown_report(per_seed, seed_values)
    (out / "report.md").write_text(report, encoding="utf-8")
    plots = write_plots(per_seed, out)
    typer.echo(report)
    typer.echo(f"report and figures in {out}: report.md, " + ", ".join(p.name for p in plots))


reproduce = typer.Typer(
    help="Re-run a paper's evaluation, or a case of it, and compare with the paper "
    "(docs/reproduction.md). Each case has its own options: harmonia reproduce CASE --help.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
# The cases, as `harmonia reproduce --help` lists them.
CASES: dict[str, tuple[Callable[..., None], str]] = {
    "harmonia": (reproduce_harmonia, "The Harmonia paper's section V, simulated over seeds."),
    "buffers": (reproduce_buffers, "The VPIC draining case (Fig. 9), for real on this machine."),
    "reads": (reproduce_reads, "Read phases with and without prefetch, for real here."),
    "slurm": (reproduce_slurm, "The VPIC draining case as sbatch jobs (DataWarp, Harmonia)."),
    "network": (reproduce_network, "MPI and I/O interference on fat-trees (ICPP 2018)."),
    "forwarding": (reproduce_forwarding, "TWINS request scheduling at forwarding nodes."),
    "phases": (reproduce_phases, "The accuracy of each phase-detection mode."),
    "bakeoff": (reproduce_bakeoff, "Every policy and peer on mixes or a trace."),
    "optimum": (reproduce_optimum, "The policies' gaps to the CP-SAT optimum."),
    "pricing": (reproduce_pricing, "Price against completion (docs/accounting.md)."),
}
for name, (command, summary) in CASES.items():
    reproduce.command(name, short_help=summary)(command)
