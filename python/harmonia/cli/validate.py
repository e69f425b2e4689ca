"""`harmonia validate FILE.toml`: check a scenario without running anything."""

from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli import EXIT_INVALID, fail


def validate(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file.")],
) -> None:
    """Check a scenario file and count the applications and I/O phases it expands to."""
    from harmonia.scenario import ScenarioError, load_scenario, normalize

    try:
        normalized = normalize(load_scenario(scenario))
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    apps = normalized["apps"]
    phases = sum(len(app["phases"]) for app in apps)
    typer.echo(f"ok: {len(apps)} applications, {phases} phases")
