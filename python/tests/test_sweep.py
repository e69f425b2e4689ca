"""`harmonia sweep` on a Dask LocalCluster with its SQLite and Parquet stores, and the Slurm
workers it would start (docs/sweep.md); tests/runtime/test_sweep_slurm.py runs them for real."""

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from support import EXAMPLES
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.simulator import SimulatorNotFound, find_simulator
from harmonia.sweep import ParquetStore, SlurmWorkers, done_keys, run_sweep, store, tasks_for
from harmonia.workloads import MixSpec


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


def simulator_or_skip() -> Path:
    try:
        return find_simulator()
    except SimulatorNotFound:
        pytest.skip("harmonia-sim is not built")


def test_parquet_store_keeps_every_run_and_resumes(tmp_path: Path) -> None:
    import pandas as pd  # type: ignore[import-untyped]

    simulator = simulator_or_skip()
    database = tmp_path / "sweep.parquet"
    tasks = tasks_for([EXAMPLES / "fig5-example.toml"], ["datawarp", "io-sets"], [1, 2])
    assert run_sweep(tasks[:3], database, simulator, None, 1, lambda d, t: None) == (3, 0)
    # A run that died while writing leaves only a hidden temporary file, which readers skip.
    (database / ".run-deadbeef.parquet.1.tmp").write_bytes(b"PAR1 half a file")
    assert ParquetStore(database).done_keys() == {(t.scenario, t.policy, t.seed) for t in tasks[:3]}
    assert run_sweep(tasks, database, simulator, None, 1, lambda d, t: None) == (1, 3)
    frame = pd.read_parquet(database)
    assert len(frame) == 4
    assert set(zip(frame.policy, frame.seed, strict=True)) == {
        (p, s) for p in ("datawarp", "io-sets") for s in (1, 2)
    }
    assert (frame.scenario == "fig5-example").all() and (frame.avg_completion > 0).all()


def test_mix_tasks_draw_a_new_mix_per_seed() -> None:
    mix = MixSpec(name="small", jobs=3, phases=(1, 2))
    tasks = tasks_for([], ["datawarp", "fairness"], [1, 2], (mix,))
    assert [(t.scenario, t.policy, t.seed) for t in tasks] == [
        ("small", p, s) for s in (1, 2) for p in ("datawarp", "fairness")
    ]
    by_seed = {t.seed: json.loads(t.scenario_json) for t in tasks}
    assert by_seed[1]["seed"] == 1 and by_seed[2]["seed"] == 2
    assert by_seed[1]["apps"] != by_seed[2]["apps"]  # a fresh draw, not the same jobs reseeded


def test_sweep_of_a_mix_from_the_command_line(tmp_path: Path) -> None:
    simulator_or_skip()
    database = tmp_path / "m.parquet"
    arguments = ["sweep", "--mix", "mixed", "--mix-jobs", "3", "--policy", "datawarp,priority"]
    result = CliRunner().invoke(
        app, [*arguments, "--seeds", "2", "--workers", "1", "--db", str(database)]
    )
    assert result.exit_code == 0, result.output
    assert f"4 runs done, 0 already in {database}" in result.output
    assert ParquetStore(database).done_keys() == {
        ("mixed", p, s) for p in ("datawarp", "priority") for s in (1, 2)
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--mix", "nope"], "--mix nope: unknown (known: mixed, "),
        ([], "give scenario files, --mix NAME, or both"),
        (["--mix", "mixed", "--slurm-jobs", "1", "--scheduler", "tcp://x:1"], "exclude each other"),
        (["--mix", "mixed", "--slurm-jobs", "1", "--slurm-walltime", "1h"], "--slurm-walltime 1h"),
        (["--mix", "mixed", "--slurm-jobs", "1", "--slurm-memory", "lots"], "--slurm-memory lots"),
    ],
    ids=["unknown-mix", "nothing", "slurm-and-scheduler", "walltime", "memory"],
)
def test_bad_sweep_arguments_are_refused(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    database = tmp_path / "s.sqlite"
    result = CliRunner().invoke(app, ["sweep", *arguments, "--db", str(database)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not database.exists()


def test_a_parquet_store_must_be_a_directory(tmp_path: Path) -> None:
    simulator_or_skip()
    database = tmp_path / "s.parquet"
    database.write_text("not a directory")
    result = CliRunner().invoke(app, ["sweep", "--mix", "mixed", "--db", str(database)])
    assert result.exit_code == 2
    assert "a Parquet store is a directory" in result.output
    assert database.read_text() == "not a directory"


def test_slurm_workers_job_script() -> None:
    """What dask-jobqueue would submit: the partition, cores, memory, limit and account asked
    for, one worker process per job, started by this environment's Python."""
    workers = SlurmWorkers(3, "debug", 4, "2000000000B", "00:30:00", "proj")
    cluster = workers.cluster()
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "#SBATCH -p debug" in script
    assert "#SBATCH --cpus-per-task=4" in script
    assert "#SBATCH --mem=2G" in script
    assert "--memory-limit 1.86GiB" in script  # the same 2 GB, as the worker's limit
    assert "#SBATCH -t 00:30:00" in script
    assert "#SBATCH -A proj" in script
    assert "#SBATCH -J harmonia-sweep" in script
    assert f"{sys.executable} -m distributed.cli.dask_worker" in script
    assert "--nthreads 4" in script and "--nworkers" not in script  # one process, 4 threads
    assert "--no-nanny" in script  # the job's own process: nothing left when scancel kills it
    assert ":8787" not in cluster.dashboard_link  # never the well-known port
