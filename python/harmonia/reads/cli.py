"""`harmonia reproduce reads`: read phases for real on this machine, a checkpoint job's files
read back by an analysis job with and without HARMONIA_PREFETCH (harmonia.reads.experiment)."""

import shutil
from pathlib import Path

import typer

from harmonia.buffers.cluster import ClusterError, device_directory
from harmonia.cli import EXIT_FAILED, EXIT_INVALID, OnlyPolicies, OutDir, Repeat, fail, show_report
from harmonia.policies import parse_policies
from harmonia.simulator import SimulatorNotFound


def reproduce_reads(
    out: OutDir = Path("results/reproduction-reads"),
    only: OnlyPolicies = "max-bandwidth,datawarp",
    repeat: Repeat = 5,
) -> None:
    """Read phases for real on this machine: a checkpoint's files read back by an analysis job
    with and without prefetch."""
    from harmonia.reads.experiment import ReadCase, run_case, write_outputs

    try:
        policies = tuple(parse_policies(only))
    except ValueError as error:
        fail([f"--only: {error}"], EXIT_INVALID)
    case = ReadCase(policies=policies, repeat=repeat)
    created = not out.exists()
    devices, _ = device_directory(4 * case.input_bytes)
    try:
        outcome = run_case(case, out, devices, lambda line: typer.echo(line, err=True))
    except (ClusterError, SimulatorNotFound, OSError) as error:
        # Nothing half-written: the failed run's work directory goes, and OUT if this made it.
        shutil.rmtree(out if created else out / "real", ignore_errors=True)
        fail([f"harmonia reproduce reads: {error}"], EXIT_FAILED)
    finally:
        shutil.rmtree(devices, ignore_errors=True)
    show_report(write_outputs(outcome, out), out)
