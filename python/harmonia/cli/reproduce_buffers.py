"""`harmonia reproduce buffers`: the VPIC buffer-draining case on this machine, real and
simulated (harmonia.experiments.buffers)."""

import shutil
from pathlib import Path

import typer

from harmonia.buffers import ClusterError, device_directory
from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail, show_report
from harmonia.policies import parse_policies
from harmonia.profiler import ProfileError
from harmonia.simulator import SimulatorNotFound


def reproduce_buffers(out: Path, only: str | None, repeat: int) -> None:
    from harmonia.experiments.buffers import DrainingCase, run_case, write_outputs
    from harmonia.scenario import ScenarioError

    try:
        policies = tuple(parse_policies(only or "all"))
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
