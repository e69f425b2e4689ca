"""The `harmonia` command line, run in-process with typer's CliRunner."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import EXAMPLES, assert_png, make_result_dir
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.policies import POLICIES
from harmonia.scenario import load_scenario, normalize

runner = CliRunner()
FIG5 = EXAMPLES / "fig5-example.toml"
BAD = EXAMPLES / "bad" / "negative-size.toml"


def test_validate_ok() -> None:
    result = runner.invoke(app, ["validate", str(EXAMPLES / "section-v" / "balanced-8.toml")])
    assert result.exit_code == 0
    assert result.stdout == "ok: 8 applications, 96 phases\n"


def test_validate_prints_errors_and_exits_2() -> None:
    result = runner.invoke(app, ["validate", str(EXAMPLES / "bad" / "unknown-key.toml")])
    assert result.exit_code == 2
    assert "apps[0].synthetic.phase_sise: unknown key" in result.stderr
    assert result.stdout == ""


def test_sim_on_a_bad_file_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    for extra in ([], ["--out", str(out)]):
        result = runner.invoke(app, ["sim", str(BAD), *extra])
        assert result.exit_code == 2
        assert 'apps[0].synthetic.phase_size: must be > 0, got "-1 GB"' in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_sim_with_an_unknown_policy_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["sim", str(FIG5), "--policy", "datawarp,fifo", "--out", str(out)])
    assert result.exit_code == 2
    assert '--policy: unknown policy "fifo"' in result.stderr
    assert not out.exists()


def test_sim_without_a_simulator_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARMONIA_SIM", str(tmp_path / "missing"))
    out = tmp_path / "out"
    result = runner.invoke(app, ["sim", str(FIG5), "--out", str(out)])
    assert result.exit_code == 1
    assert "HARMONIA_SIM" in result.stderr and "is not an executable file" in result.stderr
    assert not out.exists()


@pytest.mark.usefixtures("fake_simulator")
def test_sim_runs_every_policy_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["sim", str(FIG5), "--out", str(out), "--jobs", "3"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "scenario.json").read_text()) == normalize(load_scenario(FIG5))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "fig5-example" and summary["seed"] == 5
    assert list(summary["policies"]) == list(POLICIES)
    assert "avg_completion" in summary["policies"]["fairness"]
    for policy in POLICIES:
        assert policy in result.stdout
        assert_png(out / f"timeline-{policy}.png")
    assert_png(out / "metrics.png")


@pytest.mark.usefixtures("fake_simulator")
def test_sim_defaults_to_results_dir_and_takes_a_policy_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["sim", str(FIG5), "--policy", "fairness,datawarp"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "results" / "fig5-example"
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["policies"]) == ["fairness", "datawarp"]
    assert sorted(p.name for p in out.glob("*.json")) == [
        "datawarp.accounting.json",
        "datawarp.json",
        "fairness.accounting.json",
        "fairness.json",
        "scenario.json",
        "summary.json",
    ]


@pytest.mark.usefixtures("fake_simulator")
def test_sim_failure_prints_the_simulator_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SIM_FAIL", "priority")
    out = tmp_path / "out"
    result = runner.invoke(app, ["sim", str(FIG5), "--out", str(out), "--jobs", "1"])
    assert result.exit_code == 1
    assert "harmonia-sim failed for policy priority (exit 3)" in result.stderr
    assert "fake-sim: policy priority crashed on purpose" in result.stderr
    assert not (out / "summary.json").exists()


def test_report_prints_the_table_and_draws_the_plots(tmp_path: Path) -> None:
    scenario = normalize(load_scenario(FIG5))
    out = make_result_dir(tmp_path / "run", scenario)
    result = runner.invoke(app, ["report", str(out)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "fig5-example (seed 5)" in result.stdout
    for policy in POLICIES:
        assert policy in result.stdout
        assert_png(out / f"timeline-{policy}.png")
    assert_png(out / "metrics.png")


def test_report_reads_only_the_policies_present(tmp_path: Path) -> None:
    scenario = normalize(load_scenario(FIG5))
    out = make_result_dir(tmp_path / "run", scenario, policies=("min-stall", "datawarp"))
    result = runner.invoke(app, ["report", str(out)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    rows = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert "min-stall" in rows and "datawarp" in rows and "fairness" not in rows
    assert sorted(p.name for p in out.glob("*.png")) == [
        "metrics.png",
        "timeline-datawarp.png",
        "timeline-min-stall.png",
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({}, "no result files"),
        ({"fairness.json": "{}"}, "fairness.json: not a harmonia-sim result"),
    ],
)
def test_report_on_a_directory_without_results(
    tmp_path: Path, content: dict[str, str], expected: str
) -> None:
    for name, text in content.items():
        (tmp_path / name).write_text(text)
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert expected in result.stderr


REPRODUCE_CASES = (
    "harmonia", "buffers", "reads", "slurm", "network", "forwarding", "phases", "bakeoff",
    "optimum", "pricing",
)  # fmt: skip


@pytest.mark.parametrize("argv", [["reproduce"], ["reproduce", "--help"]])
def test_reproduce_lists_every_case(argv: list[str]) -> None:
    result = runner.invoke(app, argv)
    commands = result.output.partition("Commands:")[2].splitlines()
    assert [line.split()[0] for line in commands if line.strip()] == list(REPRODUCE_CASES)


@pytest.mark.parametrize(
    ("case", "option"),
    [
        ("forwarding", ["--network", "packet"]),
        ("harmonia", ["--only", "survey"]),
        ("buffers", ["--system", "paper"]),
        ("network", ["--seeds", "1-2"]),
        ("optimum", ["--full"]),
        ("phases", ["--jobs", "2"]),
        ("bakeoff", ["--repeat", "2"]),
    ],
)
def test_reproduce_refuses_another_cases_option(
    tmp_path: Path, case: str, option: list[str]
) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["reproduce", case, *option, "--out", str(out)])
    assert result.exit_code == 2
    assert f"No such option: {option[0]}" in result.stderr
    assert f"reproduce {case} --help" in result.stderr
    assert not out.exists()


def test_reproduce_refuses_an_unknown_case() -> None:
    result = runner.invoke(app, ["reproduce", "nonsense"])
    assert result.exit_code == 2
    assert "No such command 'nonsense'" in result.stderr


# Packages that take a tenth of a second or more to import: `harmonia --help` and each command's
# help must not load them, because each command imports what it uses when it runs. Typer itself
# loads pydantic to parse a command's options, so only the top-level help can do without it.
HEAVY_PACKAGES = ("matplotlib", "numpy", "elftools", "darshan", "h5py")


@pytest.mark.parametrize(
    ("argv", "heavy"),
    [
        (["--help"], (*HEAVY_PACKAGES, "pydantic")),
        (["sim", "--help"], HEAVY_PACKAGES),
        (["import-darshan", "--help"], HEAVY_PACKAGES),
        (["reproduce", "--help"], HEAVY_PACKAGES),
    ],
)
def test_help_loads_no_heavy_package(argv: list[str], heavy: tuple[str, ...]) -> None:
    program = (
        "import sys\n"
        "from harmonia.cli.main import app\n"
        "try:\n"
        f"    app({argv!r}, prog_name='harmonia')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(','.join(p for p in {heavy!r} if p in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert "Usage: harmonia" in done.stdout
    assert done.stdout.splitlines()[-1] == "", f"{argv} loaded {done.stdout.splitlines()[-1]}"
