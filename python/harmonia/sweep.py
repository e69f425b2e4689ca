"""Sweeps of scenario x policy x seed on Dask (docs/sweep.md), kept in an SQLite or Parquet store.

Each run is one `harmonia-sim` process on a Dask worker (a LocalCluster here, any scheduler by
address, or workers started as Slurm jobs by dask-jobqueue); its metrics become a row of the
store, keyed by (scenario, policy, seed), written as soon as the run ends. A sweep run again skips
every key already stored, so an interrupted sweep resumes where it stopped.
"""

import hashlib
import json
import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from distributed import Client, LocalCluster, as_completed

from harmonia.bakeoff.experiment import METRICS, run_metrics
from harmonia.scenario import load_scenario, normalize
from harmonia.simulator import run_policy
from harmonia.workloads import MixSpec, synthetic_mix

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


def tasks_for(
    scenarios: list[Path], policies: list[str], seeds: list[int], mixes: tuple[MixSpec, ...] = ()
) -> list[Task]:
    """Every (scenario, policy, seed) of the grid: scenario files, whose seed is set per run, and
    generated mixes (docs/workloads.md), drawn anew for each seed and stored under the mix's name.
    Raises ScenarioError for a bad scenario file, ValueError or DarshanImportError for a mix that
    cannot be drawn."""
    tasks = []
    for path in scenarios:
        normalized = normalize(load_scenario(path))
        for seed in seeds:
            text = json.dumps({**normalized, "seed": seed})
            tasks += [Task(normalized["name"], text, policy, seed) for policy in policies]
    for mix in mixes:
        for seed in seeds:
            text = json.dumps(normalize(synthetic_mix(mix, seed)))
            tasks += [Task(mix.name, text, policy, seed) for policy in policies]
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


class Store(Protocol):
    """Where runs are kept: the keys already done, and one row saved per finished run."""

    def done_keys(self) -> set[tuple[str, str, int]]: ...

    def save(self, task: Task, row: dict[str, Any]) -> None: ...


COLUMNS = ("scenario", "policy", "seed", "wall_s", *(m.key for m in METRICS))


def _values(task: Task, row: dict[str, Any]) -> list[Any]:
    return [task.scenario, task.policy, task.seed, row["wall_s"], *(row[m.key] for m in METRICS)]


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
    with connection:  # one transaction per run: a crash loses at most the run in flight
        connection.execute(
            f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(COLUMNS))})",
            _values(task, row),
        )


@dataclass
class SqliteStore:
    """Table `runs` of an SQLite database, one row per run, one transaction per row."""

    connection: sqlite3.Connection

    def done_keys(self) -> set[tuple[str, str, int]]:
        return done_keys(self.connection)

    def save(self, task: Task, row: dict[str, Any]) -> None:
        save(self.connection, task, row)


@dataclass
class ParquetStore:
    """A Parquet dataset: a directory with one file per run, named by a hash of its key.

    Each file is written under a name starting with "." (which Parquet readers skip) and renamed
    into place, so a crash leaves whole runs only; a key run again replaces its own file. Read it
    whole with `pandas.read_parquet(directory)` or `pyarrow.dataset.dataset(directory)`.
    """

    directory: Path

    def done_keys(self) -> set[tuple[str, str, int]]:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        keys = set()
        for part in self.directory.glob("run-*.parquet"):
            table = pq.read_table(part, columns=["scenario", "policy", "seed"])
            for s, p, k in zip(
                *(table.column(c).to_pylist() for c in table.column_names), strict=True
            ):
                keys.add((s, p, int(k)))
        return keys

    def save(self, task: Task, row: dict[str, Any]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema(
            [("scenario", pa.string()), ("policy", pa.string()), ("seed", pa.int64())]
            + [(column, pa.float64()) for column in COLUMNS[3:]]
        )
        table = pa.Table.from_pylist(
            [dict(zip(COLUMNS, _values(task, row), strict=True))], schema=schema
        )
        key = json.dumps([task.scenario, task.policy, task.seed]).encode()
        target = self.directory / f"run-{hashlib.sha256(key).hexdigest()[:24]}.parquet"
        temporary = self.directory / f".{target.name}.{os.getpid()}.tmp"
        try:
            pq.write_table(table, temporary)
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


def is_parquet(path: Path) -> bool:
    """Whether the store at `path` is a Parquet dataset (by its name) rather than SQLite."""
    return path.suffix == ".parquet"


@contextmanager
def open_store(path: Path) -> Iterator[Store]:
    """The store at `path`: a Parquet directory if its name ends in .parquet, else SQLite."""
    if is_parquet(path):
        path.mkdir(parents=True, exist_ok=True)
        yield ParquetStore(path)
        return
    with store(path) as connection:
        yield SqliteStore(connection)


@dataclass(frozen=True)
class SlurmWorkers:
    """Dask workers started as Slurm jobs by dask-jobqueue's SLURMCluster, one worker a job."""

    jobs: int
    queue: str | None = None  # partition; None: the cluster's default
    cores: int = 1
    memory: str = "1 GB"
    walltime: str = "01:00:00"
    account: str | None = None
    log_directory: str | None = None

    def cluster(self) -> Any:
        """A SLURMCluster, its scheduler running here; no job is submitted before `scale`."""
        from dask_jobqueue import SLURMCluster

        return SLURMCluster(
            queue=self.queue,
            account=self.account,
            cores=self.cores,
            processes=1,  # one worker process per job, running `cores` simulations at once
            # The worker is the job's own process, without a nanny: the nanny's multiprocessing
            # semaphores would stay in the node's /dev/shm when scancel kills the job.
            nanny=False,
            memory=self.memory.replace(" ", ""),
            walltime=self.walltime,
            job_name="harmonia-sweep",
            python=sys.executable,  # the workers import harmonia from this same environment
            log_directory=self.log_directory,
            scheduler_options={"dashboard_address": ":0"},  # any free port, not 8787
        )


def run_sweep(
    tasks: list[Task],
    database: Path,
    simulator: Path,
    scheduler: str | None,
    workers: int,
    on_progress: Callable[[int, int], None],
    slurm: SlurmWorkers | None = None,
) -> tuple[int, int]:
    """Run the tasks not yet in the store at `database` (SQLite, or Parquet by its name) on Dask:
    Slurm jobs started by dask-jobqueue with `slurm`, the scheduler at `scheduler`, else a
    LocalCluster of `workers` processes. Returns (runs done now, runs found already done)."""
    with open_store(database) as kept:
        done = kept.done_keys()
        todo = [t for t in tasks if (t.scenario, t.policy, t.seed) not in done]
        skipped = len(tasks) - len(todo)
        on_progress(skipped, len(tasks))
        if not todo:
            return 0, skipped
        if slurm is not None:
            cluster = slurm.cluster()
            cluster.scale(jobs=slurm.jobs)
        elif scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)
        else:
            cluster = None
        try:
            with Client(scheduler or cluster) as client:
                futures = {client.submit(simulate, t, str(simulator), pure=False): t for t in todo}
                finished = skipped
                for future in as_completed(futures):
                    kept.save(futures[future], future.result())
                    finished += 1
                    on_progress(finished, len(tasks))
        finally:
            if cluster is not None:
                cluster.close()
    return len(todo), skipped
