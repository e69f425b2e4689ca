"""What the tests under a real Slurm (test_slurm.py, test_slurm_node_agent.py) share: the skip when
the machine cannot run Slurm, a cluster started by `harmonia cluster up` (harmonia.slurm) in a
directory of its own with jobs submitted as `nobody`, and a wait with a deadline."""

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from harmonia.slurm import SlurmCluster, SlurmClusterError, SlurmSettings

needs_slurm = pytest.mark.skipif(
    os.geteuid() != 0
    or shutil.which("slurmctld") is None
    or shutil.which("munged") is None,
    reason="needs root (sbatch --uid for a job user, munged) and slurmctld, slurmd, munge "
    "(scripts/install-deps.sh installs them)",
)
# Slurm's burst_buffer plugins refuse root's jobs: they run as this user.
USER, GROUP = "nobody", "nogroup"


class Cluster:
    """A cluster with `settings`; jobs run as USER and write their output to `out`."""

    def __init__(self, settings: SlurmSettings) -> None:
        self.cluster = SlurmCluster(settings)
        self.dir = settings.directory
        self.env = {**os.environ, **self.cluster.env()}
        self.out = self.dir / "out"

    @property
    def hooks(self) -> dict[str, Any]:
        """What `up` wrote for the burst-buffer hooks: the scheduler's socket and tools."""
        hooks: dict[str, Any] = json.loads(
            (self.dir / "etc" / "harmonia-bb.json").read_text()
        )
        return hooks

    def sbatch_script(self, name: str, script: str) -> subprocess.CompletedProcess[str]:
        """Submits `script` as USER (saved as `name`.sh); sbatch's answer."""
        path = self.dir / f"{name}.sh"
        path.write_text(script)
        return subprocess.run(
            ["sbatch", "--parsable", f"--uid={USER}", f"--gid={GROUP}", str(path)],
            capture_output=True, text=True, env=self.env, timeout=60, check=False,
        )  # fmt: skip

    def submit_script(self, name: str, script: str) -> str:
        """Submits `script` as sbatch does, which must accept it; the job's id."""
        done = self.sbatch_script(name, script)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def scontrol(self, *args: str) -> str:
        return subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, env=self.env, timeout=60,
            check=True,
        ).stdout  # fmt: skip

    def job_state(self, job: str) -> str:
        text = self.scontrol("show", "job", job, "-o")
        return text.split("JobState=", 1)[1].split()[0]

    def schedd_jobs(self) -> list[dict[str, Any]]:
        """harmonia-schedd's jobs, as `harmonia-schedctl status` shows them."""
        done = subprocess.run(
            [self.hooks["schedctl"], "--address", self.hooks["schedd"], "status", "--compact"],
            capture_output=True, text=True, check=True, timeout=20,
        )  # fmt: skip
        return [dict(entry) for entry in json.loads(done.stdout).get("jobs", [])]

    def cancel_all(self) -> None:
        """Cancels what a failed test left running and waits (at most 30 s) until Slurm has
        ended it: slurmstepd, the ranks and the agents outlive slurmd, the Epilog would not."""
        subprocess.run(["scancel", "-u", USER], env=self.env, timeout=30, check=False,
                       capture_output=True)  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            queue = subprocess.run(["squeue", "-h"], env=self.env, timeout=30, check=False,
                                   capture_output=True, text=True)  # fmt: skip
            if queue.returncode == 0 and not queue.stdout.strip():
                return
            time.sleep(0.3)


C = TypeVar("C", bound=Cluster)


@contextmanager
def running(make: Callable[[Path], C], prefix: str) -> Iterator[C]:
    """The cluster `make` makes in a new directory (named from `prefix`), up, with its `out`
    directory USER's; cancelled, down and removed afterwards."""
    try:
        pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER} to run jobs as")
    # Not pytest's tmp_path: the job's user must reach the PFS and the munge socket.
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    c = make(directory)
    try:
        c.cluster.up(progress=lambda _line: None)
    except SlurmClusterError as error:
        c.cluster.down(progress=lambda _line: None)
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(f"harmonia cluster up: {error}")
    try:
        c.out.mkdir()
        shutil.chown(c.out, USER, GROUP)
        yield c
    finally:
        c.cancel_all()
        c.cluster.down(progress=lambda _line: None)
        shutil.rmtree(directory, ignore_errors=True)


def wait(ready: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)
