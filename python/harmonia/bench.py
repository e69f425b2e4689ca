"""`harmonia bench`: the BBIO paper's interference experiments (e-Science 2016, section V) with
real processes and real files on this machine: run `harmonia-bench` under MPI with each
application alone and then all together, for a sweep of inter-application delays D, and report
each application's interference factor I_f = phase time together / phase time alone (Eq. 2)."""

import json
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from harmonia.sockets import accepting


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


def _mpirun() -> str:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise BenchError("mpirun not found (Debian: openmpi-bin)")
    return mpirun


def _run(
    binary: Path, settings: BenchSettings, offsets: list[float], only: int | None
) -> dict[int, float]:
    command = [_mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", str(settings.processes),
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
            for k, seconds in _run(binary, settings, offsets, None).items():
                together[k].append(seconds)
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
    from matplotlib.figure import Figure

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


# ---- Coordinated runs: each application a job of its own, under harmonia-schedd ----------------

# Strategies whose directives place files on PFS servers: the benchmark directory gets server
# subdirectories for libharmonia's placement (docs/control.md).
PARTITIONING = ("3a", "3b")
# Seconds between launching the applications' mpiruns and their common start.
LAUNCH_SLACK = 3.0


@dataclass(frozen=True)
class Coordination:
    schedd: Path  # the harmonia-schedd binary
    library: Path  # libharmonia.so
    flush_order: str = "free"
    pfs_servers: int = 8


@contextmanager
def scheduler(coordination: Coordination, strategy: str) -> Iterator[Path]:
    """A harmonia-schedd on a temporary socket for one strategy; yields its address."""
    with tempfile.TemporaryDirectory(prefix="harmonia-bench-") as scratch:
        address = Path(scratch) / "schedd.sock"
        daemon = subprocess.Popen(
            [str(coordination.schedd), "--socket", str(address), "--strategy", strategy,
             "--flush-order", coordination.flush_order,
             "--pfs-servers", str(coordination.pfs_servers), "--tick", "0.01"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while not accepting(address):
                if daemon.poll() is not None or time.monotonic() > deadline:
                    error = daemon.stderr.read() if daemon.stderr else ""
                    raise BenchError(f"harmonia-schedd did not start: {error}")
                time.sleep(0.02)
            yield address
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=10)


def _run_jobs(
    binary: Path,
    settings: BenchSettings,
    coordination: Coordination,
    address: Path,
    strategy: str,
    offsets: list[float],
    apps: list[int],
) -> dict[int, float]:
    """Applications `apps` as separate mpiruns under libharmonia, each registering as job
    app-K, started together at one wall-clock time (application k at offsets[k] after it)."""
    per_app = settings.processes // settings.apps
    start_at = time.time() + LAUNCH_SLACK
    exported = {
        "LD_PRELOAD": str(coordination.library),
        "HARMONIA_SCHEDD": str(address),
        "HARMONIA_BYTES_PER_PROCESS": str(settings.requests * settings.request_size),
        # A whole phase fits in the staging area, as in the paper's runs.
        "HARMONIA_STAGE_SIZE": str(max(settings.requests * settings.request_size, 1 << 20)),
    }
    if strategy in PARTITIONING:
        exported["HARMONIA_PFS_ROOT"] = str(settings.directory)
    launched = []
    # Concurrent mpiruns racing to create the same session directory fail ("File exists"): each
    # gets its own.
    sessions = Path(tempfile.mkdtemp(prefix="harmonia-bench-mpi-"))
    for k in apps:
        (sessions / str(k)).mkdir()
        command = [_mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", str(per_app),
                   "--mca", "orte_tmpdir_base", str(sessions / str(k))]  # fmt: skip
        for name, value in {**exported, "HARMONIA_JOB": f"app-{k}"}.items():
            command += ["-x", f"{name}={value}"]
        command += [str(binary), "--dir", str(settings.directory), "--apps", "1",
                    "--first-app", str(k), "--requests", str(settings.requests),
                    "--size", str(settings.request_size), "--delay", str(settings.delay),
                    "--api", settings.api, "--sync", settings.sync,
                    "--offsets", str(offsets[k]), "--start-at", f"{start_at:.6f}"]  # fmt: skip
        launched.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    times: dict[int, float] = {}
    outputs = [job.communicate(timeout=600) for job in launched]
    shutil.rmtree(sessions, ignore_errors=True)
    for k, job, (out, err) in zip(apps, launched, outputs, strict=True):
        if job.returncode != 0:
            raise BenchError(f"application {k} failed (exit {job.returncode}): {err.strip()}")
        result = json.loads(out)
        if result["late"]:
            raise BenchError(
                f"application {k} started after the common start: the machine is too loaded "
                f"to launch {len(apps)} mpiruns within {LAUNCH_SLACK} s"
            )
        # Wall-clock origin: the phase runs from the common start plus its offset.
        times[k] = result["apps"][0]["phase_time"]
    return times


@dataclass(frozen=True)
class StrategyResult:
    strategy: str
    points: list[DeltaPoint]


def run_coordinated(
    binary: Path,
    settings: BenchSettings,
    coordination: Coordination,
    strategies: list[str],
    on_run: Callable[[str], None],
) -> list[StrategyResult]:
    """For every delta, each application alone (under a daemon running `none`, with no other
    job), then all of them together under each strategy; medians of `repeat` runs. The runs are
    interleaved (every repeat goes through every configuration) so that a device whose speed
    drifts during the benchmark biases no strategy."""
    settings.directory.mkdir(parents=True, exist_ok=True)
    for server in range(coordination.pfs_servers):
        (settings.directory / f"ost{server}").mkdir(exist_ok=True)
    everyone = list(range(settings.apps))
    alone: dict[float, dict[int, list[float]]] = {
        d: {k: [] for k in everyone} for d in settings.deltas
    }
    together: dict[str, dict[float, dict[int, list[float]]]] = {
        s: {d: {k: [] for k in everyone} for d in settings.deltas} for s in strategies
    }
    with ExitStack() as daemons:
        addresses = {
            s: daemons.enter_context(scheduler(coordination, s)) for s in {"none", *strategies}
        }
        for r in range(settings.repeat):
            for delta in settings.deltas:
                offsets = [k * delta for k in everyone]
                for k in everyone:
                    seconds = _run_jobs(
                        binary, settings, coordination, addresses["none"], "none", offsets, [k]
                    )[k]
                    alone[delta][k].append(seconds)
                    on_run(f"run {r + 1}/{settings.repeat}, D={delta:g} s: application {k} alone")
                for strategy in strategies:
                    times = _run_jobs(
                        binary, settings, coordination, addresses[strategy], strategy, offsets,
                        everyone,
                    )  # fmt: skip
                    for k, seconds in times.items():
                        together[strategy][delta][k].append(seconds)
                    on_run(f"run {r + 1}/{settings.repeat}, D={delta:g} s: {strategy}, together")
    median = statistics.median
    return [
        StrategyResult(
            strategy,
            [
                DeltaPoint(
                    delta,
                    {k: median(v) for k, v in alone[delta].items()},
                    {k: median(v) for k, v in together[strategy][delta].items()},
                )
                for delta in settings.deltas
            ],
        )
        for strategy in strategies
    ]


def plot_strategies(results: list[StrategyResult], apps: int, title: str, out: Path) -> None:
    """Phase time of each application together, per strategy, at the first delay (Fig. 4-8)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    width = 0.8 / (apps + 1)
    names = [r.strategy for r in results]
    first = [r.points[0] for r in results]
    for k in range(apps):
        axes.bar(
            [i + k * width for i in range(len(names))],
            [p.together[k] for p in first],
            width,
            label=f"application {k}",
        )
    axes.bar(
        [i + apps * width for i in range(len(names))],
        [max(p.together.values()) for p in first],
        width,
        label="all done",
        color="grey",
    )
    for k in range(apps):
        axes.axhline(first[0].alone[k], linestyle="--", linewidth=0.8, color=f"C{k}")
    axes.set_xticks([i + apps * width / 2 for i in range(len(names))], names)
    axes.set_xlabel("strategy (dashed: each application alone)")
    axes.set_ylabel("I/O phase time (s)")
    axes.legend()
    figure.suptitle(title)
    figure.savefig(out, dpi=110)


def plot_strategy_deltas(results: list[StrategyResult], apps: int, title: str, out: Path) -> None:
    """Delta-graphs side by side: each application's I_f against D, one line per strategy."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5 * apps, 4.2), layout="constrained")
    axes_list = figure.subplots(1, apps, sharey=True, squeeze=False)[0]
    for k, axes in enumerate(axes_list):
        for index, result in enumerate(results):
            axes.plot(
                [p.delta for p in result.points],
                [p.interference(k) for p in result.points],
                marker="o",
                color=f"C{index}",
                label=result.strategy,
            )
        axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        axes.set_title(f"application {k}")
        axes.set_xlabel("delay D between application starts (s)")
    axes_list[0].set_ylabel("interference factor I_f")
    axes_list[-1].legend()
    figure.suptitle(title)
    figure.savefig(out, dpi=110)
