"""Seeded synthetic workload mixes (docs/workloads.md).

A mix is a list of jobs drawn from distributions: Poisson arrivals, node counts, numbers and sizes
of I/O phases, a compute/I/O ratio per job, users with Zipf-like activity and padded time limits.
Or the jobs come from a Standard Workload Format trace (arrivals, sizes, run times, users, time
limits) and only their I/O phases are drawn. Or each job is an application drawn from a directory
of Darshan logs (its ranks, phases, sizes and compute between them), scaled by a drawn factor.
The same spec and seed give the same scenario, byte for byte, on any machine (numpy's PCG64).
"""

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from harmonia.scenario import Scenario, scenario_from_document
from harmonia.swf import SwfJob, read_swf

GB = 1e9
# Buffer device of the generated platform: the Harmonia testbed's SSD (section V-A), 500 MB/s.
BUFFER_WRITE_BW = 500e6
LINK_BW = 1.25e9  # 10 Gbit/s Ethernet


@dataclass(frozen=True)
class MixSpec:
    """The distributions a mix is drawn from. Sizes in bytes, times in seconds."""

    name: str = "mixed"
    jobs: int = 12
    mean_interarrival: float = 20.0  # Poisson arrivals; 0: every job at t = 0
    ratio: tuple[float, float] = (0.1, 10.0)  # compute per phase / its time slice, log-uniform
    phase_size: tuple[float, float] = (2 * GB, 24 * GB)  # log-uniform
    phases: tuple[int, int] = (3, 8)  # uniform, inclusive
    nodes: tuple[int, ...] = (1, 2, 4, 8)  # equally likely
    users: int = 4  # user k submits with weight 1/k (Zipf, s = 1)
    walltime_padding: tuple[float, float] = (1.5, 3.0)  # limit = padding x runtime alone, uniform
    buffers: int = 4
    buffer_capacity: float = 200 * GB
    pfs_servers: int = 8
    extra: dict[str, Any] = field(default_factory=dict)  # [scheduler] keys passed through
    trace: Path | None = None  # SWF trace: jobs (first `jobs` usable ones) come from it
    processors_per_node: int = 32  # to turn a trace's or a log's processes into nodes
    darshan: Path | None = None  # directory of Darshan logs: each job is one of their apps
    darshan_scale: tuple[float, float] = (1.0, 1.0)  # per job, log-uniform: bytes and compute

    def __post_init__(self) -> None:
        checks = [
            (self.jobs >= 1, "jobs must be >= 1"),
            (self.mean_interarrival >= 0, "mean_interarrival must be >= 0"),
            (0 < self.ratio[0] <= self.ratio[1], "ratio must be 0 < low <= high"),
            (0 < self.phase_size[0] <= self.phase_size[1], "phase_size must be 0 < low <= high"),
            (1 <= self.phases[0] <= self.phases[1], "phases must be 1 <= low <= high"),
            (len(self.nodes) > 0 and min(self.nodes) >= 1, "nodes must be counts >= 1"),
            (self.users >= 1, "users must be >= 1"),
            (
                1 <= self.walltime_padding[0] <= self.walltime_padding[1],
                "padding: 1 <= low <= high",
            ),
            (self.buffers >= 1 and self.buffer_capacity > 0, "buffers and capacity must be > 0"),
            (self.phase_size[1] <= self.buffers * self.buffer_capacity, "phases must fit"),
            (self.processors_per_node >= 1, "processors_per_node must be >= 1"),
            (
                0 < self.darshan_scale[0] <= self.darshan_scale[1],
                "darshan_scale must be 0 < low <= high",
            ),
            (self.trace is None or self.darshan is None, "trace and darshan exclude each other"),
        ]
        problems = [message for ok, message in checks if not ok]
        if problems:
            raise ValueError(f"mix {self.name}: " + "; ".join(problems))

    def scaled(self, jobs: int) -> "MixSpec":
        return replace(self, jobs=jobs)


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _trace_jobs(spec: MixSpec, trace: Path) -> list[SwfJob]:
    """The first `spec.jobs` jobs of the trace that ran (run time and processors known)."""
    usable = [j for j in read_swf(trace) if j.run_time > 0 and j.processors > 0]
    if not usable:
        raise ValueError(f"mix {spec.name}: {trace}: no job with a run time and processors")
    usable.sort(key=lambda j: (j.submit, j.number))
    return usable[: spec.jobs]


def _draw_phases(spec: MixSpec, rng: np.random.Generator) -> list[int]:
    count = int(rng.integers(spec.phases[0], spec.phases[1] + 1))
    return [round(_log_uniform(rng, *spec.phase_size)) for _ in range(count)]


def _trace_apps(spec: MixSpec, trace: Path, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Jobs of an SWF trace with drawn I/O phases; compute fills the rest of each run time."""
    jobs = _trace_jobs(spec, trace)
    slice_bw = spec.buffers * BUFFER_WRITE_BW
    start = jobs[0].submit
    apps = []
    for k, job in enumerate(jobs):
        nodes = max(1, -(-job.processors // spec.processors_per_node))
        sizes = _draw_phases(spec, rng)
        io_alone = sum(size / min(slice_bw, nodes * LINK_BW) for size in sizes)
        compute = max(0.0, job.run_time - io_alone) / len(sizes)
        entry: dict[str, Any] = {
            "name": f"swf{job.number}" if job.number >= 0 else f"swf-line{k}",
            "nodes": nodes,
            "ranks": job.processors,
            "arrival": f"{job.submit - start:.3f} s",
            "workload": "explicit",
            "phases": [{"compute": f"{compute:.3f} s", "size": size} for size in sizes],
        }
        if job.user >= 0:
            entry["user"] = f"user{job.user}"
        if job.requested_time > 0:
            entry["walltime"] = f"{job.requested_time:.1f} s"
        apps.append(entry)
    return apps


@dataclass(frozen=True)
class DarshanApp:
    """One application of a Darshan log, as a mix draws it: phases are (op, bytes, compute s)."""

    log: str  # the log's file name
    name: str
    ranks: int
    phases: tuple[tuple[str, int, float], ...]


@functools.cache
def darshan_apps(directory: Path) -> tuple[DarshanApp, ...]:
    """Every application of the `*.darshan` logs in `directory`, in file-name order, imported
    with the default gap rule (docs/darshan.md). Imported once per process: it takes seconds.

    Raises ValueError naming the directory when it holds no log, DarshanImportError naming the
    log that cannot be read.
    """
    from harmonia.darshan_import import import_log

    if not directory.is_dir():
        raise ValueError(f"{directory}: not a directory of Darshan logs")
    logs = sorted(directory.glob("*.darshan"))
    if not logs:
        raise ValueError(f"{directory}: no Darshan log (*.darshan) in it")
    apps = []
    for log in logs:
        for app in import_log(log).workload.apps:
            phases = tuple((p.op, p.size, p.compute) for p in app.phases)
            apps.append(DarshanApp(log.name, app.name, app.ranks, phases))
    return tuple(apps)


def _darshan_jobs(spec: MixSpec, directory: Path, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Jobs that are applications of the logs, drawn uniformly, each scaled by a drawn factor.

    The factor multiplies every phase's bytes and the compute before it, so the job keeps its
    log's compute/I/O ratio and phase structure. Arrivals, users and time limits are drawn as in
    `_drawn_apps`.
    """
    pool = darshan_apps(directory)
    largest = max(size for app in pool for _, size, _ in app.phases) * spec.darshan_scale[1]
    if largest > spec.buffers * spec.buffer_capacity:
        raise ValueError(
            f"mix {spec.name}: a phase of {largest / GB:.1f} GB (the logs' largest at"
            f" darshan_scale {spec.darshan_scale[1]:g}) does not fit in the buffers"
        )
    user_weights = 1 / np.arange(1, spec.users + 1)
    user_weights /= user_weights.sum()
    slice_bw = spec.buffers * BUFFER_WRITE_BW
    arrival = 0.0
    apps = []
    for j in range(spec.jobs):
        if j > 0 and spec.mean_interarrival > 0:
            arrival += float(rng.exponential(spec.mean_interarrival))
        app = pool[int(rng.integers(len(pool)))]
        scale = _log_uniform(rng, *spec.darshan_scale)
        user = int(rng.choice(spec.users, p=user_weights))
        nodes = max(1, -(-app.ranks // spec.processors_per_node))
        phases = []
        alone = 0.0
        for op, size, compute in app.phases:
            scaled = max(1, round(size * scale))
            phases.append({"compute": f"{compute * scale:.6f} s", "size": scaled, "op": op})
            alone += compute * scale + scaled / min(slice_bw, nodes * LINK_BW)
        padding = float(rng.uniform(*spec.walltime_padding))
        apps.append(
            {
                "name": f"job{j:03d}-{app.name}",
                "nodes": nodes,
                "ranks": app.ranks,
                "arrival": f"{arrival:.3f} s",
                "user": f"user{user}",
                "walltime": f"{alone * padding:.3f} s",
                "workload": "explicit",
                "phases": phases,
            }
        )
    return apps


def _source(spec: MixSpec) -> str:
    if spec.trace is not None:
        return f", jobs of the SWF trace {spec.trace.name}"
    if spec.darshan is not None:
        return f", applications of the Darshan logs in {spec.darshan.name}"
    return ""


def mix_document(spec: MixSpec, seed: int) -> dict[str, Any]:
    """The scenario (as the TOML file would read) of one draw of `spec` with `seed`."""
    rng = np.random.default_rng(seed)
    if spec.trace is not None:
        apps = _trace_apps(spec, spec.trace, rng)
    elif spec.darshan is not None:
        apps = _darshan_jobs(spec, spec.darshan, rng)
    else:
        apps = _drawn_apps(spec, rng)
    return {
        "scenario": {
            "name": f"{spec.name}-seed{seed}",
            "description": f"mix {spec.name}, seed {seed} (harmonia.workloads{_source(spec)})",
            "seed": seed,
        },
        "platform": {
            "network": "switch",
            "link_bw": "10 Gb/s",
            "compute_nodes": sum(app["nodes"] for app in apps),
        },
        "buffers": {
            "count": spec.buffers,
            "device": "ssd",
            "capacity": f"{spec.buffer_capacity / GB:g} GB",
        },
        "pfs": {"servers": spec.pfs_servers, "device": "hdd"},
        "scheduler": {"max_colocated": 3, **spec.extra},
        "apps": apps,
    }


def _drawn_apps(spec: MixSpec, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Jobs drawn from the spec's distributions."""
    user_weights = 1 / np.arange(1, spec.users + 1)
    user_weights /= user_weights.sum()
    slice_bw = spec.buffers * BUFFER_WRITE_BW  # a phase alone on every buffer
    arrival = 0.0
    apps = []
    for j in range(spec.jobs):
        if j > 0 and spec.mean_interarrival > 0:
            arrival += float(rng.exponential(spec.mean_interarrival))
        nodes = int(rng.choice(spec.nodes))
        count = int(rng.integers(spec.phases[0], spec.phases[1] + 1))
        ratio = _log_uniform(rng, *spec.ratio)
        user = int(rng.choice(spec.users, p=user_weights))
        phases = []
        alone = 0.0
        for _ in range(count):
            size = round(_log_uniform(rng, *spec.phase_size))
            time_slice = size / slice_bw
            compute = ratio * time_slice * float(rng.uniform(0.8, 1.2))
            phases.append({"compute": f"{compute:.3f} s", "size": size})
            alone += compute + size / min(slice_bw, nodes * LINK_BW)
        padding = float(rng.uniform(*spec.walltime_padding))
        apps.append(
            {
                "name": f"job{j:03d}",
                "nodes": nodes,
                "ranks": nodes * 32,
                "arrival": f"{arrival:.3f} s",
                "user": f"user{user}",
                "walltime": f"{alone * padding:.1f} s",
                "workload": "explicit",
                "phases": phases,
            }
        )
    return apps


def synthetic_mix(spec: MixSpec, seed: int) -> Scenario:
    """One draw of `spec`, validated like a scenario file."""
    return scenario_from_document(mix_document(spec, seed), Path(f"<mix {spec.name} seed {seed}>"))
