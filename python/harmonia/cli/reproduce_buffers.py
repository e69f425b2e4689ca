"""`harmonia reproduce buffers`: the VPIC buffer-draining case on this machine, real and
simulated (harmonia.experiments.buffers)."""

import shutil
from pathlib import Path
from typing import Annotated

import typer

from harmonia.buffers import ClusterError, device_directory
from harmonia.cli import EXIT_FAILED, EXIT_INVALID, OutDir, fail, show_report
from harmonia.policies import parse_policies
from harmonia.profiler import ProfileError
from harmonia.simulator import SimulatorNotFound


def reproduce_buffers(
    out: OutDir = Path("results/reproduction-buffers"),
    only: Annotated[
        str, typer.Option(help="The policies, comma-separated, as harmonia sim --policy.")
    ] = "all",
    repeat: Annotated[int, typer.Option(min=1, help="Runs of each policy.")] = 1,
) -> None:
    """The paper's VPIC draining case (Fig. 9) for real on this machine, next to the
    simulator's prediction."""
    from harmonia.experiments.buffers import DrainingCase, run_case, write_outputs
    from harmonia.scenario import ScenarioError

    try:
        policies = tuple(parse_policies(only))
    except ValueError as error:
        fail([f"--only: {error}"], EXIT_INVALID)
    case = DrainingCase(policies=policies, repeat=repeat)
    devices, _ = device_directory(4 << 30)
    try:
        outcome = run_case(case, out, devices, lambda line: typer.echo(line, err=True))
    except (ClusterError, ProfileError, ScenarioError, SimulatorNotFound, OSError) as error:
        fail([f"harmonia reproduce buffers: {error}"], EXIT_FAILED)
    finally:
        shutil.rmtree(devices, ignore_errors=True)
    show_report(write_outputs(outcome, out), out)
