"""Fixtures for running the harmonia-sim binary on hand-written normalized scenarios."""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sim_support import RunSim, sim_command


@pytest.fixture(scope="session")
def simulator() -> Path:
    path = Path(os.environ.get("HARMONIA_SIM", "build/src/sim/harmonia-sim"))
    if not path.is_file():
        pytest.skip(f"simulator binary not built: {path}")
    return path


@pytest.fixture
def run_sim(simulator: Path, tmp_path: Path) -> RunSim:
    def run(doc: dict[str, Any], policy: str, *options: str) -> dict[str, Any]:
        src = tmp_path / "scenario.json"
        out = tmp_path / f"{policy}.json"
        src.write_text(json.dumps(doc))
        done = subprocess.run(
            sim_command(simulator, src, policy, out, *options),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(out.read_text())
        return result

    return run
