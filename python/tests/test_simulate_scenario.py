"""harmonia.simulator.simulate_scenario: one run of a scenario given as a dict, as the example
scripts use it (examples/read-phases/compare.py, examples/reservations/gain.py)."""

import json
from pathlib import Path

import pytest
from fake_sim import fake_result

from harmonia.scenario import load_scenario, normalize
from harmonia.simulator import simulate_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fig5-example.toml"


def test_returns_what_the_simulator_wrote_for_that_scenario(
    fake_simulator: Path, tmp_path: Path
) -> None:
    scenario = normalize(load_scenario(EXAMPLE))
    scenario["seed"] = 7
    results = simulate_scenario(fake_simulator, scenario, "min-stall", tmp_path)
    assert results == json.loads(json.dumps(fake_result(scenario, "min-stall")))
    assert json.loads((tmp_path / "scenario.json").read_text())["seed"] == 7


def test_a_failed_run_raises_with_the_simulators_message(
    fake_simulator: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SIM_FAIL", "fairness")
    scenario = normalize(load_scenario(EXAMPLE))
    with pytest.raises(RuntimeError, match="policy fairness crashed on purpose"):
        simulate_scenario(fake_simulator, scenario, "fairness", tmp_path)
    assert not (tmp_path / "results.json").exists()
