"""`harmonia bench` on a tiny configuration: real MPI processes, real files, a table and a plot."""

import json
import shutil
from pathlib import Path

import pytest
from support import assert_png
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.simulator import BUILD_TREE

BENCH = BUILD_TREE / "src" / "tools" / "harmonia-bench"


def test_bench_measures_each_application_alone_and_together(tmp_path: Path) -> None:
    if not shutil.which("mpirun") or not BENCH.is_file():
        pytest.skip("needs MPI and the harmonia-bench binary")
    result = CliRunner().invoke(
        app,
        ["bench", "--dir", str(tmp_path / "files"), "--out", str(tmp_path / "out"),
         "--processes", "2", "--apps", "2", "--requests", "2", "--size", "64 KiB",
         "--deltas", "0,0.05", "--repeat", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    for text in ("application 0 alone", "application 1 alone", "all together", "I_f"):
        assert text in result.output
    assert_png(tmp_path / "out" / "delta.png")
    assert list((tmp_path / "files").iterdir()) == [], "the benchmark removes its files"


def test_bench_rejects_bad_arguments(tmp_path: Path) -> None:
    runner = CliRunner()
    few = runner.invoke(app, ["bench", "--processes", "1", "--apps", "2"])
    assert few.exit_code == 2 and "--processes" in few.output
    bad = runner.invoke(app, ["bench", "--deltas", "0,soon"])
    assert bad.exit_code == 2 and "--deltas" in bad.output


def test_bench_compares_coordination_strategies(tmp_path: Path) -> None:
    if not shutil.which("mpirun") or not BENCH.is_file():
        pytest.skip("needs MPI and the harmonia-bench binary")
    result = CliRunner().invoke(
        app,
        ["bench", "--dir", str(tmp_path / "files"), "--out", str(tmp_path / "out"),
         "--processes", "2", "--apps", "2", "--requests", "4", "--size", "256 KiB",
         "--deltas", "0", "--repeat", "1", "--strategies", "none,2a,3a", "--pfs-servers", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    for text in ("alone", "none", "2a", "3a", "app 1 I_f", "all done"):
        assert text in result.output
    assert_png(tmp_path / "out" / "strategies.png")
    assert_png(tmp_path / "out" / "delta.png")
    summary = json.loads((tmp_path / "out" / "strategies.json").read_text())
    assert [entry["strategy"] for entry in summary] == ["none", "2a", "3a"]
    assert all(t > 0 for entry in summary for t in entry["points"][0]["together"].values())
    leftovers = [p for p in (tmp_path / "files").rglob("*") if p.is_file() or p.is_symlink()]
    assert leftovers == [], "the benchmark removes its files, on the servers too"


def test_bench_rejects_unknown_strategies(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "--strategies", "2a,4c"])
    assert result.exit_code == 2 and "4c" in result.output
