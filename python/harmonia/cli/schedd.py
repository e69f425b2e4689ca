"""`harmonia schedd --config harmonia.toml`: run the scheduler daemon."""

import os
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.simulator import SimulatorNotFound


def schedd(
    config: Annotated[
        Path | None,
        typer.Option(
            help="Site file (harmonia.toml; docs/configuration.md). Default: "
            "$HARMONIA_CONFIG, else the installed /etc/harmonia/harmonia.toml."
        ),
    ] = None,
    print_command: Annotated[
        bool, typer.Option(help="Print the daemon's command line instead of running it.")
    ] = False,
) -> None:
    """Run harmonia-schedd in the foreground until SIGINT or SIGTERM. Jobs started with
    `harmonia run` (or LD_PRELOAD=libharmonia.so and HARMONIA_SCHEDD) register with it. The
    file is checked before anything starts: a bad one is refused naming the file, key and
    reason."""
    from harmonia.coordination import daemon_command

    try:
        command = daemon_command(config)
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    checked = subprocess.run(
        [*command, "--show-config"], capture_output=True, text=True, check=False
    )
    if checked.returncode != 0:
        fail(checked.stderr.strip().splitlines() or ["harmonia-schedd refused the settings"],
             EXIT_INVALID)  # fmt: skip
    if print_command:
        typer.echo(" ".join(command))
        return
    os.execv(command[0], command)
