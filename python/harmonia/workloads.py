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
from harmonia.swf import SwfError, SwfJob, Trace, load_trace

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


def _trace_jobs(spec: MixSpec, trace: Path) -> tuple[SwfJob, ...]:
    """The first `spec.jobs` jobs of the trace that ran (run time and processors known)."""
    try:
        return load_trace(trace, jobs=spec.jobs).jobs
    except SwfError as error:
        raise ValueError(f"mix {spec.name}: {error}") from error


def _draw_phases(spec: MixSpec, rng: np.random.Generator) -> list[int]:
    count = int(rng.integers(spec.phases[0], spec.phases[1] + 1))
    return [round(_log_uniform(rng, *spec.phase_size)) for _ in range(count)]


def _trace_apps(spec: MixSpec, trace: Path, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Jobs of an SWF trace with drawn I/O phases; compute fills the rest of each run time."""
    jobs = _trace_jobs(spec, trace)
    slice_bw = spec.buffers * BUFFER_WRITE_BW
    apps = []
    for k, job in enumerate(jobs):
        nodes = max(1, -(-job.processors // spec.processors_per_node))
        sizes = _draw_phases(spec, rng)
        io_alone = sum(size / min(slice_bw, nodes * LINK_BW) for size in sizes)
        compute = max(0.0, job.run_time - io_alone) / len(sizes)
        entry = _trace_entry(job, k, nodes)
        entry["phases"] = [{"compute": f"{compute:.3f} s", "size": size} for size in sizes]
        apps.append(entry)
    return apps


def _trace_entry(job: SwfJob, line: int, nodes: int) -> dict[str, Any]:
    """The [[apps]] entry of a trace's job, its phases left to the caller: its name, nodes,
    processes, arrival, user and time limit from the trace."""
    entry: dict[str, Any] = {
        "name": f"swf{job.number}" if job.number >= 0 else f"swf-line{line}",
        "nodes": nodes,
        "ranks": job.processors,
        "arrival": f"{job.submit:.3f} s",
        "workload": "explicit",
    }
    if job.user >= 0:
        entry["user"] = f"user{job.user}"
    if job.requested_time > 0:
        entry["walltime"] = f"{job.requested_time:.1f} s"
    return entry


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


# A machine sized from a trace (docs/workloads.md, "Replaying a real trace"): burst-buffer nodes
# and PFS servers in Cori's proportions. Cori: 9,688 KNL compute nodes, 288 DataWarp nodes of
# 6.4 TB (two 3.2 TB NVMe SSDs each) and a Lustre scratch of 248 object storage targets
# (NERSC, "Cori system overview"; Bhimji et al., CUG 2016).
CORI_COMPUTE_NODES = 9688
CORI_BUFFER_NODES = 288
CORI_PFS_SERVERS = 248
CORI_BUFFER_CAPACITY = 6.4e12

# Kopanski and Rzadca's machine and burst-buffer request model (Euro-Par 2021; Kopanski's thesis,
# sections "Platform model" and "Burst buffer request model"; their workload generator). 96
# compute nodes, one burst-buffer node of 40 GB per 8 of them, 10 Gbit/s links, a 5 GB/s PFS.
KR_COMPUTE_NODES = 96
KR_BUFFER_NODES = 12
KR_BUFFER_CAPACITY = 40 * GB
KR_LINK_BW = 1.25e9
# Per node, in KiB: log-normal fitted to the memory requests of METACENTRUM-2013-3 (scipy's
# lognorm: shape, location, scale).
KR_REQUEST_SHAPE, KR_REQUEST_LOC, KR_REQUEST_SCALE = (
    1.0972516604048774,
    -150361.59523836235,
    2714115.5724594607,
)
KR_MIN_REQUEST = 100e6  # per node
KR_SHORT_JOB = 120.0  # seconds of time limit: such jobs ask 10 MB per node
KR_SHORT_REQUEST = 10e6
KR_RUNTIME_FACTOR = 40.0  # kappa: compute = run time - kappa x request per node / link bandwidth
KR_MIN_COMPUTE_SHARE = 0.05
KR_PHASE_SECONDS = 3600.0  # one compute phase an hour of compute, 1 to 10 of them
KR_MAX_PHASES = 10

REQUEST_MODELS = ("phases", "kopanski-rzadca")


@dataclass(frozen=True)
class TraceSpec:
    """A real trace replayed on a machine the jobs share (docs/workloads.md): its window and the
    burst-buffer request model that gives each job its I/O."""

    trace: Path
    jobs: int | None = None  # the first N jobs of the window
    start: float | None = None  # the window, seconds after the trace's first job
    end: float | None = None
    # "phases": 3 to 8 phases of 2 to 24 GB a job, as the mixes draw them, on a machine sized from
    # the trace; "kopanski-rzadca": their requests per node, on their machine.
    requests: str = "phases"
    processors_per_node: int | None = None  # default: the header's MaxProcs / MaxNodes, else 1
    name: str = ""

    def __post_init__(self) -> None:
        checks = [
            (self.jobs is None or self.jobs >= 1, "jobs must be >= 1"),
            (self.start is None or self.start >= 0, "start must be >= 0"),
            (
                self.end is None or self.end > (self.start or 0),
                "end must be after start",
            ),
            (self.requests in REQUEST_MODELS, f"requests must be one of {REQUEST_MODELS}"),
            (
                self.processors_per_node is None or self.processors_per_node >= 1,
                "processors_per_node must be >= 1",
            ),
        ]
        problems = [message for ok, message in checks if not ok]
        if problems:
            raise ValueError(f"trace {self.trace}: " + "; ".join(problems))

    @property
    def label(self) -> str:
        return self.name or self.trace.name.split(".swf")[0]

    def load(self) -> Trace:
        """The window's jobs; raises ValueError naming the trace when it cannot be read."""
        try:
            return load_trace(self.trace, self.jobs, self.start, self.end)
        except SwfError as error:
            raise ValueError(str(error)) from error


def _processors_per_node(spec: TraceSpec, trace: Trace) -> int:
    if spec.processors_per_node is not None:
        return spec.processors_per_node
    header = trace.header
    if header.max_nodes and header.max_procs and header.max_procs >= header.max_nodes:
        return header.max_procs // header.max_nodes
    return 1


def trace_machine(spec: TraceSpec, trace: Trace) -> dict[str, Any]:
    """The [platform], [buffers] and [pfs] tables of the machine the trace is replayed on."""
    if spec.requests == "kopanski-rzadca":
        return {
            "platform": {
                "network": "switch",
                "link_bw": "10 Gb/s",
                "compute_nodes": KR_COMPUTE_NODES,
                "shared": True,
            },
            "buffers": {
                "count": KR_BUFFER_NODES,
                "device": "nvme",
                "capacity": f"{KR_BUFFER_CAPACITY / GB:g} GB",
            },
            # Their PFS is one 5 GB/s link: three NVMe servers give 5.7 GB/s.
            "pfs": {"servers": 3, "device": "nvme"},
        }
    per_node = _processors_per_node(spec, trace)
    header = trace.header
    if header.max_nodes:
        nodes = header.max_nodes
    elif header.max_procs:
        nodes = -(-header.max_procs // per_node)
    else:
        nodes = max(-(-j.processors // per_node) for j in trace.jobs)
    return {
        "platform": {
            "network": "switch",
            "link_bw": "10 Gb/s",
            "compute_nodes": nodes,
            "shared": True,
        },
        "buffers": {
            "count": max(1, -(-nodes * CORI_BUFFER_NODES // CORI_COMPUTE_NODES)),
            "device": "nvme",
            "capacity": f"{CORI_BUFFER_CAPACITY / GB:g} GB",
        },
        "pfs": {
            "servers": max(1, -(-nodes * CORI_PFS_SERVERS // CORI_COMPUTE_NODES)),
            "device": "hdd",
        },
    }


def _kr_request_per_node(nodes: int, requested_time: float, rng: np.random.Generator) -> float:
    """Kopanski and Rzadca's burst-buffer request of one node, in bytes."""
    if requested_time <= KR_SHORT_JOB:
        return KR_SHORT_REQUEST
    kib = KR_REQUEST_LOC + KR_REQUEST_SCALE * float(
        np.exp(KR_REQUEST_SHAPE * rng.standard_normal())
    )
    per_node = max(min(kib * 1024, KR_BUFFER_CAPACITY), KR_MIN_REQUEST)
    # A node's request lies on one burst-buffer node: when they cannot all fit, it is cut so
    # that the job's nodes, spread evenly over the burst-buffer nodes, fit.
    if nodes > (KR_BUFFER_CAPACITY // per_node) * KR_BUFFER_NODES:
        per_node = float(np.floor(KR_BUFFER_CAPACITY / -(-nodes // KR_BUFFER_NODES)))
    return float(round(per_node))


def _kr_phases(
    job: SwfJob, nodes: int, rng: np.random.Generator
) -> tuple[list[dict[str, Any]], float]:
    """A job's phases under Kopanski and Rzadca's model, and its request (its reservation)."""
    per_node = _kr_request_per_node(nodes, job.requested_time, rng)
    request = per_node * nodes
    if job.requested_time <= KR_SHORT_JOB:
        compute = job.run_time
    else:
        compute = max(
            job.run_time - KR_RUNTIME_FACTOR * per_node / KR_LINK_BW,
            job.run_time * KR_MIN_COMPUTE_SHARE,
        )
    count = min(max(round(compute / KR_PHASE_SECONDS), 1), KR_MAX_PHASES)
    # Each compute phase ends in a checkpoint, the last in the output that is staged out: the
    # request is written once in all (docs/workloads.md says why not once per checkpoint).
    size = max(1, round(request / count))
    phases = [{"compute": f"{compute / count:.3f} s", "size": size} for _ in range(count)]
    return phases, request


def trace_document(spec: TraceSpec, seed: int) -> dict[str, Any]:
    """The scenario (as its TOML file would read) of the trace window replayed on a shared
    machine, each job's I/O drawn by the request model with `seed`. The note of what was left out
    is the scenario's description."""
    trace = spec.load()
    machine = trace_machine(spec, trace)
    per_node = _processors_per_node(spec, trace)
    limit = machine["platform"]["compute_nodes"]
    rng = np.random.default_rng(seed)
    buffers = machine["buffers"]["count"]
    slice_bw = buffers * 1.9e9  # NVMe buffers: a phase alone on every buffer
    apps = []
    larger = 0
    for k, job in enumerate(trace.jobs):
        nodes = max(1, -(-job.processors // per_node))
        if nodes > limit:
            larger += 1
            continue
        entry = _trace_entry(job, k, nodes)
        if spec.requests == "kopanski-rzadca":
            entry["phases"], request = _kr_phases(job, nodes, rng)
            entry["reservation"] = f"{request:.0f} B"
        else:
            sizes = [
                round(_log_uniform(rng, 2 * GB, 24 * GB)) for _ in range(int(rng.integers(3, 9)))
            ]
            io_alone = sum(size / min(slice_bw, nodes * LINK_BW) for size in sizes)
            compute = max(0.0, job.run_time - io_alone) / len(sizes)
            entry["phases"] = [{"compute": f"{compute:.3f} s", "size": size} for size in sizes]
        apps.append(entry)
    if not apps:
        raise ValueError(f"{spec.trace}: no job fits the machine ({limit} nodes)")
    note = trace.note(larger, limit)
    return {
        "scenario": {
            "name": f"{spec.label}-{spec.requests}-seed{seed}",
            "description": f"{note} (requests: {spec.requests}, seed {seed})",
            "seed": seed,
        },
        **machine,
        "scheduler": {},
        "apps": apps,
    }


def trace_scenario(spec: TraceSpec, seed: int) -> Scenario:
    """One draw of the trace's I/O with `seed`, validated like a scenario file."""
    return scenario_from_document(
        trace_document(spec, seed), Path(f"<trace {spec.trace} seed {seed}>")
    )
