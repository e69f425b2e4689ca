"""`harmonia run -- CMD`: run a job under libharmonia, coordinated by harmonia-schedd."""

import os
import shutil
from typing import Annotated

import typer

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.simulator import SimulatorNotFound


def run(
    command: Annotated[list[str], typer.Argument(help="The job's command line (after --).")],
    schedd: Annotated[
        str | None, typer.Option(help="Daemon address (default $HARMONIA_SCHEDD or the socket).")
    ] = None,
    job: Annotated[
        str | None, typer.Option(help="Job key (default: Slurm or MPI job id, else per process).")
    ] = None,
    priority: Annotated[int | None, typer.Option(help="Priority for priority flushing.")] = None,
) -> None:
    """Run CMD with libharmonia preloaded and HARMONIA_SCHEDD set: it registers with the daemon,
    reports its I/O phases and follows the daemon's directives. All processes CMD starts (MPI
    ranks under mpirun -x, forks) inherit the settings."""
    from harmonia.coordination import default_address, job_environment

    program = shutil.which(command[0])
    if program is None:
        fail([f"{command[0]}: command not found"], EXIT_INVALID)
    try:
        env = job_environment(schedd or default_address(), job, priority)
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    os.execve(program, command, {**os.environ, **env})
