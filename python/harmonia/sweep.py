"""Sweeps of scenario x policy x seed on Dask (docs/sweep.md), kept in an SQLite store.

Each run is one `harmonia-sim` process on a Dask worker; its metrics become a row of the store,
keyed by (scenario, policy, seed), written as soon as the run ends. A sweep run again skips every
key already stored, so an interrupted sweep resumes where it stopped.
"""

import json
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distributed import Client, LocalCluster, as_completed

from harmonia.experiments.bakeoff import METRICS, run_metrics
from harmonia.scenario import load_scenario, normalize
from harmonia.simulator import run_policy

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (scenario TEXT NOT NULL, policy TEXT NOT NULL, "
    "seed INTEGER NOT NULL, wall_s REAL NOT NULL, "
    + ", ".join(f"{m.key} REAL NOT NULL" for m in METRICS)
    + ", PRIMARY KEY (scenario, policy, seed))"
)


@dataclass(frozen=True)
class Task:
    scenario: str  # the scenario's name
    scenario_json: str  # its normalized JSON with the seed set
    policy: str
    seed: int


def tasks_for(scenarios: list[Path], policies: list[str], seeds: list[int]) -> list[Task]:
    """Every (scenario, policy, seed) of the grid. Raises ScenarioError for a bad scenario."""
    tasks = []
    for path in scenarios:
        normalized = normalize(load_scenario(path))
        for seed in seeds:
            text = json.dumps({**normalized, "seed": seed})
            tasks += [Task(normalized["name"], text, policy, seed) for policy in policies]
    return tasks


def simulate(task: Task, simulator: str) -> dict[str, Any]:
    """Run on a worker: one simulation, its metrics (raises RuntimeError if it fails)."""
    with tempfile.TemporaryDirectory(prefix="harmonia-sweep-") as tmp:
        scenario = Path(tmp) / "scenario.json"
        scenario.write_text(task.scenario_json, encoding="utf-8")
        out = Path(tmp) / "result.json"
        outcome = run_policy(Path(simulator), scenario, task.policy, out)
        if not outcome.ok:
            raise RuntimeError(
                f"{task.scenario} {task.policy} seed {task.seed}: harmonia-sim exit "
                f"{outcome.returncode}: {outcome.stderr.strip()}"
            )
        metrics = run_metrics(json.loads(out.read_text(encoding="utf-8")))
    return {"wall_s": outcome.seconds, **metrics}


@contextmanager
def store(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(path)
    try:
        connection.execute(SCHEMA)
        yield connection
    finally:
        connection.close()


def done_keys(connection: sqlite3.Connection) -> set[tuple[str, str, int]]:
    return {
        (s, p, int(k)) for s, p, k in connection.execute("SELECT scenario, policy, seed FROM runs")
    }


def save(connection: sqlite3.Connection, task: Task, row: dict[str, Any]) -> None:
    columns = ["scenario", "policy", "seed", "wall_s", *(m.key for m in METRICS)]
    values = [task.scenario, task.policy, task.seed, row["wall_s"], *(row[m.key] for m in METRICS)]
    with connection:  # one transaction per run: a crash loses at most the run in flight
        connection.execute(
            f"INSERT OR REPLACE INTO runs ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})",
            values,
        )


def run_sweep(
    tasks: list[Task],
    database: Path,
    simulator: Path,
    scheduler: str | None,
    workers: int,
    on_progress: Callable[[int, int], None],
) -> tuple[int, int]:
    """Run the tasks not yet in `database` on Dask: a LocalCluster of `workers` processes, or the
    scheduler at `scheduler`. Returns (runs done now, runs found already done)."""
    with store(database) as connection:
        done = done_keys(connection)
        todo = [t for t in tasks if (t.scenario, t.policy, t.seed) not in done]
        skipped = len(tasks) - len(todo)
        on_progress(skipped, len(tasks))
        if not todo:
            return 0, skipped
        cluster = (
            None
            if scheduler
            else LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)
        )
        try:
            with Client(scheduler or cluster) as client:
                futures = {client.submit(simulate, t, str(simulator), pure=False): t for t in todo}
                finished = skipped
                for future in as_completed(futures):
                    save(connection, futures[future], future.result())
                    finished += 1
                    on_progress(finished, len(tasks))
        finally:
            if cluster is not None:
                cluster.close()
    return len(todo), skipped
