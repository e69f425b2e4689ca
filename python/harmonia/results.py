"""Results that `harmonia-sim` writes, one JSON file per policy (docs/formats.md section 3).

Only the keys the front end uses are modelled; others are ignored so the simulator can add keys
without breaking older front ends.
"""

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harmonia.policies import EVERY_POLICY


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Metrics(_Record):
    # Metrics the front end does not know yet still reach summary.json.
    model_config = ConfigDict(extra="allow", frozen=True)

    buffer_efficiency: float
    buffer_utilization: float
    remaining_capacity: float
    avg_phase_bandwidth: float
    fairness: float
    avg_stall: float
    avg_completion: float
    min_completion: float
    max_completion: float
    avg_wait: float
    avg_io: float
    avg_compute: float
    makespan: float
    avg_app_bandwidth: float
    avg_interference_factor: float


@dataclass(frozen=True)
class MetricDisplay:
    """How a metric is shown in tables and plots."""

    key: str
    label: str
    unit: str
    scale: float = 1.0  # from the result's SI unit to `unit`
    digits: int = 1  # decimals shown in tables

    def value(self, run: "RunResult") -> float:
        """The metric of one run, in `unit`."""
        return float(getattr(run.metrics, self.key)) * self.scale


METRIC_DISPLAYS: dict[str, MetricDisplay] = {
    display.key: display
    for display in (
        MetricDisplay("avg_completion", "avg completion", "s"),
        MetricDisplay("avg_wait", "avg wait", "s"),
        MetricDisplay("avg_io", "avg I/O", "s"),
        MetricDisplay("avg_compute", "avg compute", "s"),
        MetricDisplay("avg_stall", "avg stall", "s"),
        MetricDisplay("fairness", "fairness", "s"),
        MetricDisplay("buffer_efficiency", "buffer efficiency", "%", 100.0),
        MetricDisplay("avg_phase_bandwidth", "avg phase bandwidth", "MB/s", 1e-6),
        MetricDisplay("avg_interference_factor", "I_f", "x", digits=2),
    )
}


class AppRecord(_Record):
    name: str


class PhaseRecord(_Record):
    app: str
    index: int
    granted: float
    end: float
    buffers: list[int]


class DrainRecord(_Record):
    buffer: int
    start: float
    end: float


class RunResult(_Record):
    scenario: str
    policy: str
    seed: int
    metrics: Metrics
    apps: list[AppRecord]
    phases: list[PhaseRecord]
    drains: list[DrainRecord]


class ResultsError(Exception):
    """A result file that is missing or does not follow docs/formats.md."""


def load_run(path: Path) -> RunResult:
    """Read one policy's result file."""
    try:
        return RunResult.model_validate_json(path.read_bytes())
    except OSError as error:
        raise ResultsError(f"{path}: cannot read: {error.strerror}") from error
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        raise ResultsError(f"{path}: not a harmonia-sim result: {problems}") from error


def load_results(directory: Path, policies: list[str] | None = None) -> dict[str, RunResult]:
    """Results in a run directory, keyed by policy.

    With `policies`, each of them must have a `<policy>.json`; without, every policy that has one
    is loaded, in the order of EVERY_POLICY.
    """
    if policies is None:
        policies = [policy for policy in EVERY_POLICY if (directory / f"{policy}.json").exists()]
        if not policies:
            raise ResultsError(f"{directory}: no result files (<policy>.json) found")
    return {policy: load_run(directory / f"{policy}.json") for policy in policies}


def summary(results: dict[str, RunResult]) -> dict[str, Any]:
    """The content of summary.json: scenario, seed and every policy's metrics."""
    first = next(iter(results.values()))
    return {
        "scenario": first.scenario,
        "seed": first.seed,
        "policies": {policy: run.metrics.model_dump() for policy, run in results.items()},
    }


def write_json(path: Path, content: dict[str, Any]) -> None:
    """Write a JSON document the way every front-end output file is written."""
    path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


@contextmanager
def staged_directory(final: Path) -> Iterator[Path]:
    """A new directory beside `final` for a run's files, published as `final` when the block ends
    normally and removed, with any parent directory made for it, when it raises (a failed run
    leaves no output behind).

    Publishing renames the directory when `final` does not exist yet (all files appear at once);
    otherwise each file replaces its namesake in `final` by a rename (each file whole).
    """
    missing = [path for path in (final.parent, *final.parent.parents) if not path.exists()]
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for path in missing:  # the deepest first
            try:
                path.rmdir()
            except OSError:
                break
        raise
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp makes it private
    try:
        os.rename(staging, final)
        return
    except OSError:
        if not final.is_dir():
            shutil.rmtree(staging, ignore_errors=True)
            raise
    for path in staging.iterdir():
        os.replace(path, final / path.name)
    staging.rmdir()
