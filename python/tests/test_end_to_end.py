"""End to end with the real `harmonia-sim` binary; skipped when it is not built."""

import json
from pathlib import Path

import pytest
from support import EXAMPLES, assert_png
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.policies import POLICIES
from harmonia.simulator import SimulatorNotFound, find_simulator

try:
    find_simulator()
except SimulatorNotFound:
    pytest.skip("harmonia-sim is not built", allow_module_level=True)


def test_fig5_example_under_every_policy(tmp_path: Path) -> None:
    out = tmp_path / "fig5"
    result = CliRunner().invoke(
        app, ["sim", str(EXAMPLES / "fig5-example.toml"), "--policy", "all", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["policies"]) == sorted(POLICIES)
    assert_png(out / "metrics.png")
    for policy in POLICIES:
        assert_png(out / f"timeline-{policy}.png")
