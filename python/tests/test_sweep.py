"""`harmonia sweep` on a Dask LocalCluster with its SQLite store (docs/sweep.md)."""

import sqlite3
from pathlib import Path

import pytest
from support import EXAMPLES
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.simulator import SimulatorNotFound, find_simulator
from harmonia.sweep import done_keys, run_sweep, store, tasks_for


def test_sweep_stores_every_run_and_resumes(tmp_path: Path) -> None:
    try:
        simulator = find_simulator()
    except SimulatorNotFound:
        pytest.skip("harmonia-sim is not built")
    database = tmp_path / "sweep.sqlite"
    tasks = tasks_for([EXAMPLES / "fig5-example.toml"], ["datawarp", "io-sets"], [1, 2])
    assert len(tasks) == 4
    # An interrupted sweep: two runs made it to the store before it stopped.
    progress: list[tuple[int, int]] = []
    ran, skipped = run_sweep(tasks[:2], database, simulator, None, 1, lambda d, t: None)
    assert (ran, skipped) == (2, 0)
    ran, skipped = run_sweep(
        tasks, database, simulator, None, 1, lambda d, t: progress.append((d, t))
    )
    assert (ran, skipped) == (2, 2), "only what is missing runs again"
    assert progress[0] == (2, 4) and progress[-1] == (4, 4)
    with store(database) as connection:
        assert done_keys(connection) == {
            ("fig5-example", p, s) for p in ("datawarp", "io-sets") for s in (1, 2)
        }
        rows = connection.execute(
            "SELECT policy, avg_completion, bounded_slowdown FROM runs ORDER BY policy, seed"
        ).fetchall()
    assert all(completion > 0 and bsld >= 1 for _, completion, bsld in rows)


def test_bad_scenario_writes_no_store(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[scenario]\nname = 'x'\n", encoding="utf-8")
    database = tmp_path / "out" / "s.sqlite"
    result = CliRunner().invoke(app, ["sweep", str(bad), "--db", str(database)])
    assert result.exit_code == 2
    assert "bad.toml" in result.output
    assert not database.exists()
    with pytest.raises(sqlite3.OperationalError):
        sqlite3.connect(f"file:{database}?mode=ro", uri=True).execute("SELECT 1")
