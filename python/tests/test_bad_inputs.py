"""Bad inputs of issue 20 item 10: each is refused naming the key or option, with a non-zero exit
and no output left behind."""

from pathlib import Path

import pytest
from support import BASE_SCENARIO, EXAMPLES, SYNTHETIC_APP
from typer.testing import CliRunner

from harmonia.cli.main import app

runner = CliRunner()
FIG5 = EXAMPLES / "fig5-example.toml"
APP_WITH_RANKS = """
[[apps]]
name = "wide"
ranks = 2147483648
workload = "explicit"
[[apps.phases]]
compute = 0
size = "1 GB"
"""


@pytest.mark.parametrize(
    ("old", "new", "key", "value"),
    [
        # Integers the simulator keeps in 32 bits (src/sim/scenario.cpp).
        ("count = 2\n", "count = 99999999999999999999\n", "buffers.count", "99999999999999999999"),
        ("servers = 2\n", "servers = 4294967297\n", "pfs.servers", "4294967297"),
        ("compute_nodes = 16", "compute_nodes = 2147483648", "platform.compute_nodes", ""),
        ("seed = 7", "seed = 2147483648", "scenario.seed", "2147483648"),
        ("phases = 2\n", "phases = 2147483648\n", "apps[0].synthetic.phases", "2147483648"),
    ],
)
def test_out_of_range_integers_name_the_key(
    tmp_path: Path, old: str, new: str, key: str, value: str
) -> None:
    text = BASE_SCENARIO + SYNTHETIC_APP
    assert old in text
    scenario = tmp_path / "s.toml"
    scenario.write_text(text.replace(old, new, 1))
    result = runner.invoke(app, ["validate", str(scenario)])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"{key}: Input should be less than or equal to 2147483647" in result.stderr
    assert value in result.stderr


def test_ranks_of_2_to_the_31_are_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(BASE_SCENARIO + APP_WITH_RANKS)
    result = runner.invoke(app, ["validate", str(scenario)])
    assert result.exit_code == 2
    assert "apps[0].ranks: Input should be less than or equal to 2147483647" in result.stderr


def test_a_scenario_too_large_to_expand_is_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        (BASE_SCENARIO + SYNTHETIC_APP).replace("phases = 2\n", "phases = 2000000000\n")
    )
    result = runner.invoke(app, ["validate", str(scenario)])
    assert result.exit_code == 2
    assert "apps: the applications expand to 2000000000 phases" in result.stderr


@pytest.mark.usefixtures("fake_simulator")
def test_sim_of_a_huge_count_writes_nothing(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        (BASE_SCENARIO + SYNTHETIC_APP).replace("count = 2\n", "count = 99999999999999999999\n")
    )
    out = tmp_path / "out" / "run"
    result = runner.invoke(app, ["sim", str(scenario), "--out", str(out)])
    assert result.exit_code == 2 and "buffers.count" in result.stderr
    assert not (tmp_path / "out").exists()


def _left_behind(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != "fake-harmonia-sim")


@pytest.mark.usefixtures("fake_simulator")
def test_a_failed_sim_leaves_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SIM_FAIL", "priority")
    out = tmp_path / "new" / "out"
    result = runner.invoke(app, ["sim", str(FIG5), "--out", str(out), "--jobs", "1"])
    assert result.exit_code == 1
    assert "harmonia-sim failed for policy priority" in result.stderr
    assert _left_behind(tmp_path) == [], "no scenario.json, no staging directory, no parents"


@pytest.mark.usefixtures("fake_simulator")
def test_a_failed_sim_keeps_the_previous_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["sim", str(FIG5), "--out", str(out)]).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "scenario.json" in before and "summary.json" in before
    monkeypatch.setenv("FAKE_SIM_FAIL", "fairness")
    changed = tmp_path / "changed.toml"
    changed.write_text(FIG5.read_text().replace("seed = 5", "seed = 6"))
    assert runner.invoke(app, ["sim", str(changed), "--out", str(out)]).exit_code == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _left_behind(tmp_path) == ["changed.toml", "out"]


@pytest.mark.parametrize(("directory", "reason"), [("/proc/x", "No such file or directory")])
def test_up_in_an_unusable_directory_says_so(directory: str, reason: str) -> None:
    result = runner.invoke(app, ["up", "--dir", directory, "--buffers", "1"])
    assert result.exit_code == 2, result.output
    assert f"--dir {directory}: cannot write there: {reason}" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_up_under_a_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = runner.invoke(app, ["up", "--dir", str(tmp_path / "file" / "x")])
    assert result.exit_code == 2
    assert "cannot write there: Not a directory" in result.stderr
