"""`harmonia replay`: an imported workload's phases as real I/O, at a tiny scale."""

import json
from pathlib import Path

from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.scenario import load_workload

WORKLOADS = Path(__file__).parents[2] / "examples" / "workloads"


def test_replays_every_phase_with_the_scaled_bytes(tmp_path: Path) -> None:
    workload = WORKLOADS / "vpic-hdf5_192p_summit.workload"
    out = tmp_path / "replay.json"
    result = CliRunner().invoke(
        app,
        ["replay", str(workload), "--scale", "0.0005", "--time-scale", "0", "--processes", "3",
         "--dir", str(tmp_path / "files"), "--out", str(out), "--no-sync"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    phases = load_workload(workload).apps[0].phases
    replayed = json.loads(out.read_text())["phases"]
    assert [p["op"] for p in replayed] == [p.op for p in phases]
    for logged, done in zip(phases, replayed, strict=True):
        expected = round(logged.size * 0.0005)
        assert abs(done["bytes"] - expected) <= done["processes"], (logged, done)
        assert done["processes"] == 3 and done["measured_duration"] > 0
        assert done["request_size"] <= max(1, logged.request_size)
    assert list((tmp_path / "files").iterdir()) == [], "the replay removes its files"


def test_bad_inputs_are_refused(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["replay", str(tmp_path / "none.workload")])
    assert missing.exit_code == 2 and "cannot read" in missing.output
    broken = tmp_path / "broken.workload"
    broken.write_text("[workload]\nformat = 2\n")
    refused = runner.invoke(app, ["replay", str(broken)])
    assert refused.exit_code == 2 and f"{broken}: workload.format" in refused.output
    bad_scale = runner.invoke(
        app, ["replay", str(WORKLOADS / "mpi-io-test_32p.workload"), "--scale", "0"]
    )
    assert bad_scale.exit_code == 2 and "--scale" in bad_scale.output
