"""`harmonia reproduce slurm`: the VPIC buffer-draining case as sbatch jobs on a `harmonia
cluster`, in DataWarp and Harmonia mode, next to the simulator (harmonia.experiments.slurm)."""

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer

from harmonia.buffers.cluster import ClusterError
from harmonia.cli import EXIT_FAILED, EXIT_INVALID, OutDir, fail, show_report
from harmonia.profiler import ProfileError
from harmonia.simulator import SimulatorNotFound
from harmonia.slurm import SlurmClusterError


def reproduce_slurm(
    out: OutDir = Path("results/reproduction-slurm"),
    only: Annotated[
        str | None,
        typer.Option(
            help='The modes, comma-separated: "datawarp", "harmonia" (default: both).',
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Runs of each mode.")] = 1,
) -> None:
    """The VPIC draining case as sbatch jobs on a harmonia cluster, in DataWarp and Harmonia
    mode, next to the simulator (as root)."""
    from harmonia.buffers.experiment import DrainingCase
    from harmonia.experiments.slurm import MODES, run_case, write_outputs
    from harmonia.scenario import ScenarioError

    modes = tuple(only.split(",")) if only else tuple(MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        fail([f"--only {unknown[0]}: expected modes among {', '.join(MODES)}"], EXIT_INVALID)
    if os.geteuid() != 0:
        fail(["harmonia reproduce slurm: needs root (munged, slurmd, jobs submitted as nobody)"],
             EXIT_INVALID)  # fmt: skip
    if shutil.which("slurmctld") is None:
        fail(["harmonia reproduce slurm: slurmctld not found (scripts/install-deps.sh)"],
             EXIT_FAILED)  # fmt: skip
    case = DrainingCase(policies=tuple(MODES[m] for m in modes), repeat=repeat)
    out = out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    try:
        outcome = run_case(case, out, modes, lambda line: typer.echo(line, err=True))
    except (ClusterError, SlurmClusterError, ProfileError, ScenarioError, SimulatorNotFound,
            OSError) as error:  # fmt: skip
        fail([f"harmonia reproduce slurm: {error}"], EXIT_FAILED)
    show_report(write_outputs(outcome, out), out)
