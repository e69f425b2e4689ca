"""Discounted scheduling and accounting (docs/accounting.md): the scenario's `io_qos` and
`[pricing]`, the per-job accounting records of the real simulator, `harmonia report` on them, and
the price-against-completion experiment's mix."""

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support import BASE_SCENARIO, EXAMPLES, SYNTHETIC_APP
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.pricing.experiment import by_share, draw_mix, summarize_run
from harmonia.scenario import ScenarioError, load_scenario, normalize
from harmonia.simulator import SimulatorNotFound, find_simulator

PRICED = """
[pricing]
node_hour_rate = 2.0
[pricing.classes.normal]
slowdown = 1
usage_factor = 1.0
[pricing.classes.cheap]
slowdown = 3
usage_factor = 0.4
"""


def simulator_built() -> bool:
    try:
        find_simulator()
    except SimulatorNotFound:
        return False
    return True


needs_simulator = pytest.mark.skipif(not simulator_built(), reason="harmonia-sim is not built")


def test_io_qos_and_pricing_reach_the_normalized_scenario(
    write_toml: Callable[[str], Path],
) -> None:
    text = (
        BASE_SCENARIO
        + PRICED
        + SYNTHETIC_APP.replace(
            'workload = "synthetic"', 'io_qos = "cheap"\nworkload = "synthetic"'
        )
    )
    normalized = normalize(load_scenario(write_toml(text)))
    assert normalized["apps"][0]["io_qos"] == "cheap"
    assert normalized["pricing"] == {
        "node_hour_rate": 2.0,
        "classes": [
            {"name": "normal", "slowdown": 1.0, "usage_factor": 1.0},
            {"name": "cheap", "slowdown": 3.0, "usage_factor": 0.4},
        ],
    }
    numeric = text.replace('io_qos = "cheap"', "io_qos = 2.5")
    assert normalize(load_scenario(write_toml(numeric)))["apps"][0]["io_qos"] == "2.5"


def test_without_io_qos_or_pricing_the_normalized_scenario_is_unchanged(
    write_toml: Callable[[str], Path],
) -> None:
    normalized = normalize(load_scenario(write_toml(BASE_SCENARIO + SYNTHETIC_APP)))
    assert "pricing" not in normalized
    assert "io_qos" not in normalized["apps"][0]


@pytest.mark.parametrize("bad", ['"fast"', "0.5", '"nan"', '"relaxed"'])
def test_an_unknown_io_qos_names_the_key(write_toml: Callable[[str], Path], bad: str) -> None:
    # "relaxed" is a default class, but this scenario's classes replace the defaults.
    text = (
        BASE_SCENARIO
        + PRICED
        + SYNTHETIC_APP.replace('workload = "synthetic"', f'io_qos = {bad}\nworkload = "synthetic"')
    )
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write_toml(text))
    assert "apps[0].io_qos" in str(caught.value)
    assert "normal, cheap" in str(caught.value)


def test_a_bad_pricing_class_names_the_key(write_toml: Callable[[str], Path]) -> None:
    text = BASE_SCENARIO + PRICED.replace("slowdown = 3", "slowdown = 0.5") + SYNTHETIC_APP
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write_toml(text))
    assert "pricing.classes.cheap.slowdown" in str(caught.value)


def test_the_mix_draws_the_share_of_patient_jobs_from_the_seed() -> None:
    base = normalize(load_scenario(EXAMPLES / "pricing" / "relaxed-mix.toml"))
    jobs = len(base["apps"])
    for share, patient in ((0.0, 0), (0.25, 2), (0.5, 3), (1.0, jobs)):
        mix = draw_mix(base, share, seed=3, io_qos="relaxed")
        assert sum(1 for a in mix["apps"] if a.get("io_qos") == "relaxed") == patient
        assert mix["seed"] == 3
    assert draw_mix(base, 0.5, 3, "relaxed") == draw_mix(base, 0.5, 3, "relaxed")
    assert [a.get("io_qos") for a in draw_mix(base, 0.5, 3, "relaxed")["apps"]] != [
        a.get("io_qos") for a in draw_mix(base, 0.5, 4, "relaxed")["apps"]
    ]


def test_the_report_averages_each_class_over_seeds() -> None:
    def record(qos: str, end: float, charge: float) -> dict[str, object]:
        return {"QOS": qos, "Submit": 0.0, "End": end, "Charge": charge, "BoundBroken": False}

    runs = [
        summarize_run(0.5, 1, [record("normal", 100, 4), record("relaxed", 300, 2)]),
        summarize_run(0.5, 2, [record("normal", 200, 6), record("relaxed", 500, 3)]),
    ]
    (row,) = by_share(runs)
    assert row.completion["normal"] is not None and row.completion["patient"] is not None
    assert (row.completion["normal"].mean, row.completion["normal"].low) == (150, 100)
    assert (row.completion["patient"].mean, row.completion["patient"].high) == (400, 500)
    assert row.charge["patient"] is not None and row.charge["patient"].mean == 2.5
    assert (row.total_charge.low, row.total_charge.high) == (6, 9)


@needs_simulator
def test_the_simulator_writes_one_record_per_job_and_charges_by_class(tmp_path: Path) -> None:
    out = tmp_path / "mix"
    result = CliRunner().invoke(
        app,
        [
            "sim",
            str(EXAMPLES / "pricing" / "relaxed-mix.toml"),
            "--policy",
            "min-stall",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "charges per I/O service class" in result.output
    records = json.loads((out / "min-stall.accounting.json").read_text())
    assert len(records) == 6
    with (out / "min-stall.accounting.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["JobName"] for row in rows] == [r["JobName"] for r in records]
    assert list(rows[0])[:12] == [
        "JobID", "JobName", "User", "Account", "QOS", "Submit", "Start", "End", "Elapsed",
        "ElapsedRaw", "State", "NNodes",
    ]  # fmt: skip
    for r in records:
        assert r["State"] == "COMPLETED"
        assert r["NNodes"] == 4 and r["NCPUS"] == 128
        assert r["WriteBytes"] == 8 * 16e9
        factor = 0.7 if r["QOS"] == "relaxed" else 1.0
        assert r["UsageFactor"] == factor
        assert r["BilledNodeHours"] == pytest.approx(4 * (r["ElapsedRaw"] - r["Refunded"]) / 3600)
        assert r["Charge"] == pytest.approx(r["BilledNodeHours"] * factor)
    assert {r["QOS"] for r in records} == {"normal", "relaxed"}

    listed = CliRunner().invoke(app, ["report", str(out), "--jobs", "min-stall"])
    assert listed.exit_code == 0, listed.output
    for r in records:
        assert r["JobName"] in listed.output
    assert "min-stall.accounting.csv" in listed.output


def test_report_lists_an_accounting_file_and_refuses_a_broken_one(tmp_path: Path) -> None:
    record = {
        "JobID": "42", "JobName": "vpic", "User": "1000", "Account": "1000", "QOS": "relaxed",
        "Submit": 1.7e9, "Start": 1.7e9, "End": None, "Elapsed": "00:01:40", "ElapsedRaw": 100.0,
        "State": "RUNNING", "NNodes": 1, "NCPUS": 8, "WriteBytes": 2e9, "ReadBytes": 0.0,
        "IOTime": 4.0, "StallTime": 1.0, "IOSlowdown": 1.25, "PromisedSlowdown": 2.0,
        "BilledNodeHours": 100 / 3600, "Refunded": 0.0, "UsageFactor": 0.7,
        "Charge": 0.7 * 100 / 3600, "BoundBroken": False,
    }  # fmt: skip
    path = tmp_path / "acct.json"
    path.write_text(json.dumps([record]))
    listed = CliRunner().invoke(app, ["report", str(path)])
    assert listed.exit_code == 0, listed.output
    assert "vpic" in listed.output and "RUNNING" in listed.output and "relaxed" in listed.output
    del record["Charge"]
    path.write_text(json.dumps([record]))
    broken = CliRunner().invoke(app, ["report", str(path)])
    assert broken.exit_code == 2
    assert "acct.json: record 0: missing Charge" in broken.output


def test_the_default_classes_come_from_the_policy_core(write_toml: Callable[[str], Path]) -> None:
    text = BASE_SCENARIO + SYNTHETIC_APP.replace(
        'workload = "synthetic"', 'io_qos = "scavenger"\nworkload = "synthetic"'
    )
    assert normalize(load_scenario(write_toml(text)))["apps"][0]["io_qos"] == "scavenger"
    with pytest.raises(ScenarioError, match="normal, relaxed, scavenger"):
        load_scenario(write_toml(text.replace('"scavenger"', '"gold"')))


@pytest.mark.usefixtures("fake_simulator")
def test_reproduce_pricing_writes_the_table_and_the_plot(tmp_path: Path) -> None:
    out = tmp_path / "pricing"
    result = CliRunner().invoke(app, ["reproduce", "pricing", "--seeds", "1-2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    # One row per share (the fake simulator charges every job the normal price).
    for share in ("0 %", "25 %", "50 %", "75 %", "100 %"):
        assert f"| {share} |" in report
    assert "seeds 1-2" in report
    assert (out / "price-vs-completion.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "share-50" / "seed-2" / "min-stall.accounting.csv").exists()
