"""`harmonia reproduce`: re-run the Harmonia paper's evaluation and compare with the paper."""

from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli import EXIT_INVALID, fail, seeds_or_fail
from harmonia.cli.reproduce_bakeoff import reproduce_bakeoff
from harmonia.cli.reproduce_buffers import reproduce_buffers
from harmonia.cli.reproduce_forwarding import reproduce_forwarding
from harmonia.cli.reproduce_network import reproduce_network
from harmonia.cli.reproduce_optimum import reproduce_optimum
from harmonia.cli.reproduce_phases import reproduce_phases
from harmonia.cli.reproduce_pricing import reproduce_pricing
from harmonia.cli.reproduce_reads import reproduce_reads
from harmonia.cli.reproduce_slurm import reproduce_slurm
from harmonia.cli.sim import run_scenario, trace_options
from harmonia.netsim_models import NetworkModelName
from harmonia.policies import parse_policies


def reproduce(
    paper: Annotated[
        str,
        typer.Argument(
            help='"harmonia" (section V), "buffers" (its VPIC draining case, for real on this '
            'machine), "reads" (read phases with and without prefetch, for real on this machine), '
            '"slurm" (that case as sbatch jobs, DataWarp and Harmonia mode), "network" '
            '(MPI/I/O on fat-trees), "forwarding" (TWINS), "phases" (the accuracy of phase '
            'detection), "bakeoff" (every policy and peer, docs/bakeoff.md), "optimum" (their '
            'gaps to the CP-SAT optimum on small instances) or "pricing" (price against '
            "completion, docs/accounting.md)."
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
    network: Annotated[
        NetworkModelName,
        typer.Option(help='network: "fluid" (max-min sharing) or "packet" (ns-3 queues) model.'),
    ] = "fluid",
    only: Annotated[
        str | None,
        typer.Option(
            help="network: experiments; buffers, reads: policies; slurm: modes (comma-separated); "
            "pricing: the policy (default min-stall).",
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="buffers, slurm: runs each (default 1); reads: repetitions (default 5).",
            show_default=False,
        ),
    ] = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            help='harmonia, bakeoff, optimum, pricing: the seeds, "1-10" or "1,2,5" (harmonia, '
            "pricing: 1-10; optimum and bakeoff: 1-5, "
            "--full 1-10); reports give the mean and range or 95 % interval over them.",
            show_default=False,
        ),
    ] = None,
    max_running_apps: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="harmonia: applications a policy runs at once (0: no limit; default: each "
            "policy's, from the paper).",
            show_default=False,
        ),
    ] = None,
    full: Annotated[
        bool, typer.Option(help="bakeoff: the large grid (32 jobs, 10 seeds).")
    ] = False,
    slots: Annotated[
        int, typer.Option(min=10, max=400, help="optimum: time slots of the CP-SAT model.")
    ] = 40,
    time_limit: Annotated[
        float, typer.Option(min=1, help="optimum: seconds per CP-SAT solve.")
    ] = 30.0,
    trace_file: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="bakeoff: every policy on this SWF trace (plain or .gz), on a machine the jobs "
            "share, instead of the mixes (docs/bakeoff.md).",
            show_default=False,
        ),
    ] = None,
    trace_jobs: Annotated[
        int | None,
        typer.Option(min=1, help="bakeoff --trace: the first N jobs.", show_default=False),
    ] = None,
    trace_window: Annotated[
        str | None,
        typer.Option(help='bakeoff --trace: the window "START:END".', show_default=False),
    ] = None,
    requests: Annotated[
        str | None,
        typer.Option(
            help='bakeoff --trace: the request model, "phases" or "kopanski-rzadca".',
            show_default=False,
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help="bakeoff: the policies (as harmonia sim --policy; default: every one).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Simulate every scenario of the paper's section V with every policy over SEEDS, then write
    report.md (paper next to ours, mean and range over the seeds) and the figures into OUT.
    `reproduce network` runs the experiments of the MPI/I-O interference paper instead
    (docs/reproduction.md)."""
    from harmonia.experiments.reproduce import (
        markdown_report,
        scenario_files,
        write_plots,
    )

    if paper == "network":
        default_out = "results/reproduction-network" + ("-packet" if network == "packet" else "")
        reproduce_network(out or Path(default_out), jobs, system, only, network)
        return
    if paper == "forwarding":
        reproduce_forwarding(out or Path("results/reproduction-forwarding"), jobs)
        return
    if paper == "buffers":
        reproduce_buffers(out or Path("results/reproduction-buffers"), only, repeat or 1)
        return
    if paper == "reads":
        reproduce_reads(out or Path("results/reproduction-reads"), only, repeat or 5)
        return
    if paper == "phases":
        reproduce_phases(out or Path("results/phase-accuracy"))
        return
    if paper == "slurm":
        reproduce_slurm(out or Path("results/reproduction-slurm"), only, repeat or 1)
        return
    trace = trace_options(trace_file, trace_jobs, trace_window, requests)
    if paper == "bakeoff":
        bakeoff_seeds = None if seeds is None else tuple(seeds_or_fail(seeds))
        try:
            chosen = None if policy is None else tuple(parse_policies(policy))
        except ValueError as error:
            fail([f"--policy: {error}"], EXIT_INVALID)
        reproduce_bakeoff(out or Path("results/bakeoff"), jobs, full, bakeoff_seeds, trace, chosen)
        return
    if trace is not None or policy is not None:
        fail(["--trace and --policy apply to `harmonia reproduce bakeoff` only"], EXIT_INVALID)
    if paper == "pricing":
        reproduce_pricing(
            out or Path("results/pricing"), jobs, seeds_or_fail(seeds or "1-10"), only
        )
        return
    if paper == "optimum":
        optimum_seeds = tuple(seeds_or_fail(seeds or "1-5"))
        reproduce_optimum(out or Path("results/optimum"), optimum_seeds, slots, time_limit)
        return
    if paper != "harmonia":
        fail(
            [
                f'PAPER: unknown "{paper}" '
                "(harmonia, buffers, reads, slurm, network, forwarding, phases, bakeoff, optimum, "
                "pricing)"
            ],
            EXIT_INVALID,
        )
    if only is not None or system != "scaled":
        fail(["--system and --only apply to `harmonia reproduce network` only"], EXIT_INVALID)
    seed_values = seeds_or_fail(seeds or "1-10")
    out = out or Path("results/reproduction")
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
