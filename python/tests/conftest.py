"""Fixtures shared by the front-end tests."""

import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def write_toml(tmp_path: Path) -> Callable[[str], Path]:
    """Write TOML text to a file in tmp_path and return its path."""

    def write(text: str) -> Path:
        path = tmp_path / "scenario.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def fake_simulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HARMONIA_SIM at an executable wrapper around fake_sim.py."""
    wrapper = tmp_path / "fake-harmonia-sim"
    fake = Path(__file__).with_name("fake_sim.py")
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n', encoding="utf-8")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("HARMONIA_SIM", str(wrapper))
    return wrapper
