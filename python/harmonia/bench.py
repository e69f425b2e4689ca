"""`harmonia bench`: the BBIO paper's interference experiments (e-Science 2016, section V) with
real processes and real files on this machine: run `harmonia-bench` under MPI with each
application alone and then all together, for a sweep of inter-application delays D, and report
each application's interference factor I_f = phase time together / phase time alone (Eq. 2)."""

import json
import shutil
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure


@dataclass(frozen=True)
class BenchSettings:
    directory: Path
    processes: int = 4
    apps: int = 2
    requests: int = 16
    request_size: int = 4 << 20
    delay: float = 0.0  # seconds between requests
    deltas: tuple[float, ...] = (0.0, 0.1, 0.2, 0.4)  # start of application k = k * D
    repeat: int = 3
    api: str = "posix"
    sync: str = "fsync"


class BenchError(Exception):
    """MPI or the benchmark binary is missing, or a run failed."""


def _run(
    binary: Path, settings: BenchSettings, offsets: list[float], only: int | None
) -> dict[int, float]:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise BenchError("mpirun not found (Debian: openmpi-bin)")
    command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(settings.processes),
               str(binary), "--dir", str(settings.directory), "--apps", str(settings.apps),
               "--requests", str(settings.requests), "--size", str(settings.request_size),
               "--delay", str(settings.delay), "--api", settings.api, "--sync", settings.sync,
               "--offsets", ",".join(str(o) for o in offsets)]  # fmt: skip
    if only is not None:
        command += ["--only", str(only)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise BenchError(f"harmonia-bench failed (exit {done.returncode}): {done.stderr.strip()}")
    return {a["app"]: a["phase_time"] for a in json.loads(done.stdout)["apps"]}


@dataclass(frozen=True)
class DeltaPoint:
    delta: float
    alone: dict[int, float]  # median phase time of each application alone
    together: dict[int, float]  # median phase time with all applications

    def interference(self, app: int) -> float:
        return self.together[app] / self.alone[app]


def run_bench(
    binary: Path, settings: BenchSettings, on_run: Callable[[str], None]
) -> list[DeltaPoint]:
    """Every delta: each application alone (at its own offset), then all together; medians of
    `repeat` runs each."""
    settings.directory.mkdir(parents=True, exist_ok=True)
    points = []
    for delta in settings.deltas:
        offsets = [k * delta for k in range(settings.apps)]
        alone: dict[int, list[float]] = {k: [] for k in range(settings.apps)}
        together: dict[int, list[float]] = {k: [] for k in range(settings.apps)}
        for _ in range(settings.repeat):
            for k in range(settings.apps):
                alone[k].append(_run(binary, settings, offsets, k)[k])
                on_run(f"D={delta:g} s: application {k} alone")
            for k, time in _run(binary, settings, offsets, None).items():
                together[k].append(time)
            on_run(f"D={delta:g} s: all together")
        points.append(
            DeltaPoint(
                delta,
                {k: statistics.median(v) for k, v in alone.items()},
                {k: statistics.median(v) for k, v in together.items()},
            )
        )
    return points


def plot_delta_graph(points: list[DeltaPoint], apps: int, title: str, out: Path) -> None:
    """The paper's Delta-graph: each application's I_f against the delay between applications."""
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.subplots()
    deltas = [p.delta for p in points]
    for k in range(apps):
        axes.plot(deltas, [p.interference(k) for p in points], marker="o", label=f"application {k}")
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    axes.set_xlabel("delay D between application starts (s)")
    axes.set_ylabel("interference factor I_f")
    axes.legend()
    figure.suptitle(title)
    figure.savefig(out, dpi=110)
