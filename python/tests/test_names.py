"""The front end takes its names and defaults from the C++ registries (harmonia-describe)."""

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.names import described
from harmonia.policies import parse_policies
from harmonia.scenario import Scheduler


@pytest.fixture
def fresh_names() -> Iterator[None]:
    described.cache_clear()
    yield
    described.cache_clear()


def fake_describe(tmp_path: Path, change: dict[str, object]) -> Path:
    """A harmonia-describe that answers the real one's JSON with `change` applied."""
    real = dict(described())
    real.update(change)
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(real))
    program = tmp_path / "harmonia-describe"
    program.write_text(f"#!/bin/sh\nexec cat {answer}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def test_a_policy_registered_in_cpp_is_known_to_the_front_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_names: None
) -> None:
    policies = [*described()["policies"], {"name": "brand-new", "family": "harmonia"}]
    peer = {"name": "someone-else", "family": "peer"}
    program = fake_describe(tmp_path, {"policies": [*policies, peer]})
    described.cache_clear()
    monkeypatch.setenv("HARMONIA_DESCRIBE", str(program))
    assert "brand-new" in parse_policies("all")
    assert "someone-else" not in parse_policies("all"), '"all" is the paper\'s policies'
    assert parse_policies("someone-else") == ["someone-else"]
    with pytest.raises(ValueError, match='unknown policy "gone"'):
        parse_policies("gone")


def test_defaults_come_from_cpp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_names: None
) -> None:
    real = described()
    defaults = {**real["scheduler_defaults"], "if_limit": 7.5}
    program = fake_describe(tmp_path, {"scheduler_defaults": defaults})
    described.cache_clear()
    monkeypatch.setenv("HARMONIA_DESCRIBE", str(program))
    assert Scheduler().if_limit == 7.5


def test_a_missing_describe_program_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_names: None
) -> None:
    monkeypatch.setenv("HARMONIA_DESCRIBE", str(tmp_path / "nowhere"))
    result = CliRunner().invoke(app, ["describe"])
    assert result.exit_code == 1
    assert "HARMONIA_DESCRIBE=" in result.output and "not an executable file" in result.output


def test_describe_lists_every_registry(fresh_names: None) -> None:
    result = CliRunner().invoke(app, ["describe", "--json"])
    assert result.exit_code == 0, result.output
    names = json.loads(result.output)
    assert {p["family"] for p in names["policies"]} >= {"baseline", "harmonia"}
    assert "twins" in [s["name"] for s in names["request_schedulers"]]
    twins = next(s for s in names["request_schedulers"] if s["name"] == "twins")
    assert {"name": "twins.servers", "min": 1, "max": 1 << 20, "required": True} in twins["options"]
    table = CliRunner().invoke(app, ["describe"], env={**os.environ, "COLUMNS": "120"})
    assert table.exit_code == 0
    assert "[scheduler]" in table.output and "max-buffer-efficiency" in table.output
