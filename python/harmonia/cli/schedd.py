"""`harmonia schedd --config site.toml`: run the scheduler daemon."""

import os
from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.simulator import SimulatorNotFound


def schedd(
    config: Annotated[
        Path | None, typer.Option(help="Site file (TOML, [schedd] table; docs/control.md).")
    ] = None,
    print_command: Annotated[
        bool, typer.Option(help="Print the daemon's command line instead of running it.")
    ] = False,
) -> None:
    """Run harmonia-schedd in the foreground until SIGINT or SIGTERM. Jobs started with
    `harmonia run` (or LD_PRELOAD=libharmonia.so and HARMONIA_SCHEDD) register with it."""
    from harmonia.coordination import SiteConfig, daemon_command, load_site_config
    from harmonia.scenario import ScenarioError

    try:
        site = load_site_config(config) if config else SiteConfig()
        command = daemon_command(site)
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    if print_command:
        typer.echo(" ".join(command))
        return
    os.execv(command[0], command)
