"""Network-interference scenarios: the TOML users write, its validation, the normalized JSON that
`harmonia-netsim` reads, and the runs of one scenario (each job alone, then both together).

The format and the model are described in docs/network-interference.md. Errors read
``FILE: key.path: reason``, as for the I/O scenarios of harmonia.scenario.
"""

import json
import math
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harmonia.network import NetworkModelName
from harmonia.scenario import (
    Duration,
    Name,
    PositiveBandwidth,
    PositiveSize,
    ScenarioError,
    _key_path,
    _read_toml,
    _reason,
)
from harmonia.simulator import find_tool

TRAFFIC = ("mpi", "io")
# The most header bytes a packet carries above its payload (harmonia-netsim's kPacketHeaderRoom).
PACKET_HEADER_ROOM = 100


@dataclass(frozen=True)
class Preset:
    """A fabric with its I/O servers."""

    down: tuple[int, ...]
    up: tuple[int, ...]
    servers: int
    description: str


PRESETS: dict[str, Preset] = {
    # The paper's machine (section 3.1): 36-port switches, 18 ports down and 18 up; 4 pods of 18
    # leaves and 18 level-2 switches; 72 I/O servers on 4 leaves, 1,224 compute nodes.
    "paper": Preset(
        (18, 18, 4), (1, 18, 18), 72, "1,296 nodes, 72 leaves of 18 nodes, 4 pods, 72 servers"
    ),
    # The same shape at 8-port half-radix: 256 nodes, 32 leaves, 4 pods; 16 servers on 2 leaves
    # keep about the paper's I/O clients per server (7.5 here, 8.5 there) at a 50 % split.
    "scaled": Preset(
        (8, 8, 4), (1, 8, 8), 16, "256 nodes, 32 leaves of 8 nodes, 4 pods, 16 servers"
    ),
}


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Info(_Table):
    name: Name
    description: str = ""
    seed: int = Field(default=1, ge=0, le=2**63 - 1)


Count = Annotated[int, Field(ge=1, le=4096)]


class Network(_Table):
    preset: Literal["paper", "scaled"] | None = None
    down: list[Count] | None = Field(default=None, min_length=1, max_length=6)
    up: list[Count] | None = Field(default=None, min_length=1, max_length=6)
    link_bw: PositiveBandwidth = 12.5e9
    # Per link crossed: an InfiniBand EDR switch's port-to-port latency (about 90-100 ns).
    hop_latency: Duration = 100e-9
    # How transfers share the fabric: SimGrid's fluid max-min model, or ns-3's packets in FIFO
    # port queues (docs/network-interference.md, "Packet-level mode").
    model: NetworkModelName = "fluid"
    # Packet model only: InfiniBand's largest MTU, and the bytes a transfer may have in flight.
    packet_size: PositiveSize = Field(default=4096, le=65000)
    window: PositiveSize = Field(default=131072, le=10**9)
    # Packet model only: link-level flow control as InfiniBand's credits (a port sends only
    # while the far end's buffer for the link has room), or none (lossless FIFO ports); the
    # buffer per link is CODES' fat-tree default (vc_size, 64 KiB).
    flow_control: Literal["credits", "none"] = "credits"
    port_buffer: PositiveSize = Field(default=65536, le=10**9)

    @model_validator(mode="after")
    def _preset_or_shape(self) -> Self:
        if self.preset is None and (self.down is None or self.up is None):
            raise ValueError("give preset, or both down and up")
        if self.preset is not None and (self.down is not None or self.up is not None):
            raise ValueError("give either preset or down and up, not both")
        if self.down is not None and self.up is not None:
            if len(self.down) != len(self.up):
                raise ValueError(
                    f"down and up need one entry per level, got {len(self.down)} and {len(self.up)}"
                )
            if self.up[0] != 1:
                raise ValueError("up[0] must be 1 (one cable per node)")
        if self.port_buffer < self.packet_size + PACKET_HEADER_ROOM:
            raise ValueError(
                f"port_buffer must hold one packet: at least packet_size + {PACKET_HEADER_ROOM}"
                f" bytes of headers ({self.packet_size + PACKET_HEADER_ROOM})"
            )
        return self

    def shape(self) -> tuple[list[int], list[int]]:
        if self.preset is not None:
            preset = PRESETS[self.preset]
            return list(preset.down), list(preset.up)
        assert self.down is not None and self.up is not None
        return list(self.down), list(self.up)


class Servers(_Table):
    count: int | None = Field(default=None, ge=1)
    placement: Literal["isolated-target", "spread-target", "random-target"] = "isolated-target"
    order: Literal["round-robin", "random"] = "round-robin"


class Jobs(_Table):
    placement: Literal["random-node", "random-switch"] = "random-node"
    io_fraction: float = Field(default=0.5, ge=0, le=1, allow_inf_nan=False)


class Job(_Table):
    enabled: bool = True
    size: PositiveSize
    interval: Duration = 0.0
    window: Duration = 0.0
    jitter: float = Field(default=0.05, ge=0, lt=1, allow_inf_nan=False)
    start_spread: Duration = 0.0
    warmup: int = Field(default=50, ge=0, le=10**9)
    samples: int = Field(default=1000, ge=1, le=10**9)
    finite: bool = False


class Run(_Table):
    measure: list[Literal["mpi", "io"]] = Field(default=["mpi", "io"], min_length=1)
    baseline: bool = True
    max_transfers: int = Field(default=0, ge=0)
    max_time: Duration = 0.0


class Output(_Table):
    link_loads: bool = True
    samples: bool = False


class NetScenario(_Table):
    scenario: Info
    network: Network
    servers: Servers = Servers()
    jobs: Jobs = Jobs()
    mpi: Job
    io: Job
    run: Run = Run()
    output: Output = Output()

    def server_count(self) -> int:
        if self.servers.count is not None:
            return self.servers.count
        assert self.network.preset is not None, "checked by _cross_table_errors"
        return PRESETS[self.network.preset].servers


def _nodes_and_leaves(down: list[int], up: list[int]) -> tuple[int, int]:
    nodes = math.prod(down)
    leaves = math.prod(down[1:]) * up[0]
    return nodes, leaves


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def job_sizes(scenario: NetScenario) -> tuple[int, int]:
    """(I/O clients, MPI clients) as harmonia-netsim deals them (MPI rounded down to pairs)."""
    down, up = scenario.network.shape()
    nodes, _ = _nodes_and_leaves(down, up)
    compute = nodes - scenario.server_count()
    io = _round_half_up(scenario.jobs.io_fraction * compute)
    mpi = compute - io
    return io, mpi - mpi % 2


def _cross_table_errors(scenario: NetScenario) -> Iterator[tuple[str, str]]:
    if scenario.network.preset is None and scenario.servers.count is None:
        yield "servers.count", "missing required key (the fabric is not a preset)"
        return
    down, up = scenario.network.shape()
    nodes, leaves = _nodes_and_leaves(down, up)
    if nodes > 1_000_000:
        yield "network.down", f"the fabric has {nodes} nodes, at most 1,000,000 are supported"
        return
    servers = scenario.server_count()
    if servers >= nodes:
        yield "servers.count", f"must be < the fabric's {nodes} nodes, got {servers}"
        return
    if scenario.servers.placement == "isolated-target":
        needed = -(-servers // down[0])
        if needed > leaves:
            yield (
                "servers.count",
                f"isolated-target needs {needed} whole leaves of {down[0]} nodes for {servers}"
                f" servers, the fabric has {leaves}",
            )
    io, mpi = job_sizes(scenario)
    if scenario.mpi.enabled and mpi < 2:
        yield "jobs.io_fraction", f"leaves {mpi} MPI clients, the MPI job needs at least 2"
    if scenario.io.enabled and io < 1:
        yield "jobs.io_fraction", "leaves no I/O client for the I/O job"
    if not scenario.mpi.enabled and not scenario.io.enabled:
        yield "mpi.enabled", "at least one of [mpi] and [io] must be enabled"
    for job in scenario.run.measure:
        if not getattr(scenario, job).enabled:
            yield "run.measure", f'measures "{job}" but [{job}] has enabled = false'


def load_netsim(path: Path) -> NetScenario:
    """Read and validate a network-interference scenario. Raises ScenarioError."""
    return validate_netsim(_read_toml(path), path)


def validate_netsim(document: dict[str, Any], path: Path) -> NetScenario:
    """Validate a parsed TOML document; `path` names it in errors."""
    try:
        scenario = NetScenario.model_validate(document)
    except ValidationError as error:
        raise ScenarioError(
            [f"{path}: {_key_path(e['loc'])}: {_reason(e)}" for e in error.errors()]
        ) from error
    problems = list(_cross_table_errors(scenario))
    if problems:
        raise ScenarioError([f"{path}: {key}: {reason}" for key, reason in problems])
    return scenario


def _job_json(job: Job, enabled: bool, measured: bool) -> dict[str, Any]:
    return {
        "enabled": enabled,
        "size": job.size,
        "interval": job.interval,
        "window": job.window,
        "jitter": job.jitter,
        "start_spread": job.start_spread,
        "warmup": job.warmup,
        "samples": job.samples,
        "finite": job.finite,
        "measured": measured,
    }


def run_names(scenario: NetScenario) -> list[str]:
    """The runs of a scenario: baseline-<job> for each measured job, then interference."""
    names = []
    if scenario.run.baseline or not (scenario.mpi.enabled and scenario.io.enabled):
        names += [f"baseline-{job}" for job in TRAFFIC if job in scenario.run.measure]
    if scenario.mpi.enabled and scenario.io.enabled:
        names.append("interference")
    return names


def normalize(scenario: NetScenario) -> dict[str, dict[str, Any]]:
    """The harmonia-netsim configuration (JSON, SI units) of every run, by run name.

    A baseline run has only the measured job; the interference run has both, a job that is not
    measured running in the background for as long as the measured ones need.
    """
    down, up = scenario.network.shape()
    common: dict[str, Any] = {
        "fabric": {
            "down": down,
            "up": up,
            "link_bw": scenario.network.link_bw,
            "hop_latency": scenario.network.hop_latency,
            "model": scenario.network.model,
            "packet_size": scenario.network.packet_size,
            "window": scenario.network.window,
            "flow_control": scenario.network.flow_control,
            "port_buffer": scenario.network.port_buffer,
        },
        "servers": {
            "count": scenario.server_count(),
            "placement": scenario.servers.placement,
            "order": scenario.servers.order,
        },
        "jobs": {
            "placement": scenario.jobs.placement,
            "io_fraction": scenario.jobs.io_fraction,
        },
    }
    configs: dict[str, dict[str, Any]] = {}
    for run in run_names(scenario):
        alone = run.removeprefix("baseline-") if run.startswith("baseline-") else None
        jobs = {}
        for job in TRAFFIC:
            settings: Job = getattr(scenario, job)
            enabled = settings.enabled and (alone is None or alone == job)
            measured = job == alone if alone else job in scenario.run.measure
            jobs[job] = _job_json(settings, enabled, measured)
        configs[run] = {
            "name": f"{scenario.scenario.name}/{run}",
            "seed": scenario.scenario.seed,
            **common,
            **jobs,
            "limits": {
                "max_transfers": scenario.run.max_transfers,
                "max_time": scenario.run.max_time,
            },
            "output": {
                "link_loads": scenario.output.link_loads,
                "samples": scenario.output.samples,
            },
        }
    return configs


def find_netsim() -> Path:
    """The `harmonia-netsim` binary: $HARMONIA_NETSIM, the build tree, or the PATH."""
    return find_tool("harmonia-netsim", "HARMONIA_NETSIM", "src/netsim/harmonia-netsim")


def write_json_atomically(path: Path, content: Any) -> None:
    """Write JSON through a temporary file and a rename: never a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(content, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class NetsimFailed(Exception):
    """harmonia-netsim exited with an error."""


@dataclass(frozen=True)
class RunDone:
    name: str
    seconds: float
    perf: dict[str, Any]


def run_one(binary: Path, config: dict[str, Any], work: Path, name: str) -> RunDone:
    """Write `work/config-NAME.json`, run harmonia-netsim on it into `work/NAME.json` (and its
    wall time, transfers per second and peak memory into `work/perf-NAME.json`)."""
    config_path = work / f"config-{name}.json"
    write_json_atomically(config_path, config)
    out = work / f"{name}.json"
    perf = work / f"perf-{name}.json"
    command = [str(binary), "--config", str(config_path), "--out", str(out), "--perf", str(perf)]
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise NetsimFailed(f"cannot run {binary}: {error}") from error
    if done.returncode != 0:
        raise NetsimFailed(
            f"harmonia-netsim failed for run {name} (exit {done.returncode}): {done.stderr.strip()}"
        )
    perf_data = json.loads(perf.read_text(encoding="utf-8"))
    return RunDone(name, time.monotonic() - start, perf_data)


def run_all(
    binary: Path,
    configs: dict[str, dict[str, Any]],
    work: Path,
    jobs: int,
    on_done: Callable[[RunDone], None] = lambda _: None,
) -> list[RunDone]:
    """Run every configuration, `jobs` processes at once. Raises NetsimFailed on the first
    failure (runs not yet started are cancelled)."""
    work.mkdir(parents=True, exist_ok=True)
    done: list[RunDone] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_one, binary, c, work, name) for name, c in configs.items()]
        try:
            for future in as_completed(futures):
                result = future.result()
                done.append(result)
                on_done(result)
        except NetsimFailed:
            for pending in futures:
                pending.cancel()
            raise
    return done


# --- Summaries ---------------------------------------------------------------------------


def load_run(path: Path) -> dict[str, Any]:
    content: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return content


@dataclass(frozen=True)
class JobSummary:
    """One traffic type in one run: its latency distribution and (finite jobs) completion."""

    run: str
    traffic: str
    clients: int
    transfers: int
    latency: dict[str, float]
    quota_time: float | None


def job_summary(run: str, result: dict[str, Any], traffic: str) -> JobSummary:
    job = result["jobs"][traffic]
    return JobSummary(
        run,
        traffic,
        int(job["clients"]),
        int(job["transfers"]),
        {k: float(v) for k, v in job["latency"].items()},
        job["quota_time"],
    )


def summarize(results: dict[str, dict[str, Any]], measure: list[str]) -> dict[str, Any]:
    """Latency summaries per traffic type and run, and the slowdown of interference against
    baseline (ratios of mean, median and max latency, and of completion for finite jobs)."""
    out: dict[str, Any] = {}
    for traffic in TRAFFIC:
        if traffic not in measure:
            continue
        entry: dict[str, Any] = {}
        for run in (f"baseline-{traffic}", "interference"):
            if run in results:
                entry[run.split("-")[0]] = job_summary(run, results[run], traffic).__dict__
        base, shared = entry.get("baseline"), entry.get("interference")
        if base and shared and base["latency"]["count"] > 0:
            slowdown = {
                key: shared["latency"][key] / base["latency"][key]
                for key in ("mean", "median", "q3", "max")
                if base["latency"][key] > 0
            }
            if base["quota_time"] and shared["quota_time"]:
                slowdown["completion"] = shared["quota_time"] / base["quota_time"]
            entry["slowdown"] = slowdown
        out[traffic] = entry
    return out
