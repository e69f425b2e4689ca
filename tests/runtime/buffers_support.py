"""What the buffer-node tests share: their skip mark when a tool is not built or installed."""

import shutil

import pytest
from harmonia.simulator import SimulatorNotFound, find_tool

BBD = ("harmonia-bbd", "HARMONIA_BBD", "src/bbd/harmonia-bbd")
SIM = ("harmonia-sim", "HARMONIA_SIM", "src/sim/harmonia-sim")


def needs(*tools: tuple[str, str, str]) -> pytest.MarkDecorator:
    """Skip unless every tool (name, environment variable, build path) and mpirun are there."""
    missing = [] if shutil.which("mpirun") else ["mpirun"]
    for name, variable, path in tools:
        try:
            find_tool(name, variable, path)
        except SimulatorNotFound:
            missing.append(name)
    return pytest.mark.skipif(bool(missing), reason="missing: " + ", ".join(missing))
