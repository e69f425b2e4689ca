"""`harmonia sweep --slurm-jobs` for real: dask-jobqueue's SLURMCluster submits its workers as
jobs to the project's own Slurm (`harmonia cluster`, docs/slurm.md) on this machine, and the runs
they simulate land in the store (docs/sweep.md)."""

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harmonia.simulator import SimulatorNotFound, find_simulator
from harmonia.slurm import SlurmCluster, SlurmClusterError, SlurmSettings
from harmonia.sweep import SlurmWorkers, done_keys, run_sweep, store, tasks_for
from slurm_support import needs_slurm

pytestmark = needs_slurm
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A one-node Slurm cluster with two CPUs; its directory. sbatch finds it via SLURM_CONF."""
    directory = Path(tempfile.mkdtemp(prefix="harmonia-sweep-slurm-"))
    cluster = SlurmCluster(SlurmSettings(directory, nodes=1, cpus=2, buffers=1))
    try:
        cluster.up(progress=lambda _line: None)
    except SlurmClusterError as error:
        cluster.down(progress=lambda _line: None)
        pytest.fail(f"harmonia cluster up: {error}")
    for key, value in cluster.env().items():
        monkeypatch.setenv(key, value)
    try:
        yield directory
    finally:
        cluster.down(progress=lambda _line: None)
        shutil.rmtree(directory, ignore_errors=True)


def test_sweep_runs_on_workers_started_as_slurm_jobs(
    slurm: Path, tmp_path: Path
) -> None:
    try:
        simulator = find_simulator()
    except SimulatorNotFound:
        pytest.skip("harmonia-sim is not built")
    database = tmp_path / "sweep.sqlite"
    logs = tmp_path / "slurm-logs"
    semaphores = set(Path("/dev/shm").glob("sem.mp-*"))
    tasks = tasks_for([EXAMPLES / "fig5-example.toml"], ["datawarp", "io-sets"], [1, 2])
    workers = SlurmWorkers(2, walltime="00:10:00", log_directory=str(logs))
    assert run_sweep(
        tasks, database, simulator, None, 1, lambda d, t: None, workers
    ) == (4, 0)
    with store(database) as connection:
        assert done_keys(connection) == {
            ("fig5-example", p, s) for p in ("datawarp", "io-sets") for s in (1, 2)
        }
    # The work was done by Dask workers that ran as Slurm jobs: each job's output names it.
    outputs = sorted(logs.glob("harmonia-sweep-*.err"))
    assert len(outputs) == 2, list(logs.iterdir())
    assert all("Registered to" in path.read_text() for path in outputs)
    # SLURMCluster.close() cancelled the jobs: none is left pending or running.
    queue = subprocess.run(
        ["squeue", "-h", "-o", "%j %T"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("\n")
    assert not [
        line for line in queue if line.split()[1:] in (["PENDING"], ["RUNNING"])
    ], queue
    # Nothing of the cancelled workers stays behind in the node's shared memory.
    left = set(Path("/dev/shm").glob("sem.mp-*")) - semaphores
    assert not left, sorted(path.name for path in left)
