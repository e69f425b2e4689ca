"""`harmonia demo`: the paper's balanced 8-instance experiment under every policy."""

from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli.sim import run_scenario
from harmonia.simulator import REPO_ROOT

DEMO_SCENARIO = REPO_ROOT / "examples" / "section-v" / "balanced-8.toml"


def demo(
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("results/demo"),
) -> None:
    """Run examples/section-v/balanced-8.toml under all policies (paper Fig. 6-8)."""
    run_scenario(DEMO_SCENARIO, "all", out, jobs=2)
