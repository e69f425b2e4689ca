"""Scenario files: the TOML users write, its validation, and the normalized JSON for the simulator.

The format is specified in docs/formats.md. Pydantic checks each table on its own; then the
workload files of imported applications (docs/formats.md section 4) are read, relative to the
scenario; the checks that span tables (devices exist, phases fit in the buffers, nodes fit in the
platform) follow in `_cross_table_errors`, so every error can name the key to fix.
"""

import json
import math
import tomllib
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from harmonia.names import one_of, policy_names, pricing_defaults, scheduler_default
from harmonia.units import format_size, parse_bandwidth, parse_duration, parse_size

# Compute time before each synthetic phase, in time slices (docs/formats.md, paper section V-A).
SYNTHETIC_COMPUTE_RATIO: dict[str, float] = {
    "compute-intensive": 4.0,
    "balanced": 1.0,
    "data-intensive": 0.25,
    "only-io": 0.0,
}


class ScenarioError(Exception):
    """An invalid scenario. Each line of the message reads ``FILE: key.path: reason``; past
    MAX_ERROR_LINES, the message says how many more there are (`lines` holds them all)."""

    MAX_ERROR_LINES = 20

    def __init__(self, lines: list[str]) -> None:
        shown = lines[: self.MAX_ERROR_LINES]
        if len(lines) > len(shown):
            shown = [*shown, f"... and {len(lines) - len(shown)} more problems"]
        super().__init__("\n".join(shown))
        self.lines = lines


_Quantity = TypeVar("_Quantity", int, float)

# Counts the simulator and the daemons store in 32-bit ints (src/sim/scenario.cpp): larger values
# are refused here, naming the key, rather than wrapped or refused half-way through a run.
INT32_MAX = 2**31 - 1
# Priorities the simulator accepts (src/sim/scenario.cpp).
MIN_PRIORITY = -1_000_000
# Application instances times their phases: beyond this the expanded scenario would not fit in
# memory (docs/formats.md section 2 lists every phase of every instance).
MAX_EXPANDED_PHASES = 10_000_000


def _bounded(
    parse: Callable[[object], _Quantity], *, allow_zero: bool
) -> Callable[[object], _Quantity]:
    """Wrap a unit parser so the error for a value out of range quotes the value as written."""

    def validate(value: object) -> _Quantity:
        quantity = parse(value)
        if quantity < 0 or (quantity == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise ValueError(f"must be {bound}, got {json.dumps(value)}")
        return quantity

    return validate


PositiveSize = Annotated[int, BeforeValidator(_bounded(parse_size, allow_zero=False))]
PositiveBandwidth = Annotated[float, BeforeValidator(_bounded(parse_bandwidth, allow_zero=False))]
Duration = Annotated[float, BeforeValidator(_bounded(parse_duration, allow_zero=True))]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")]
# TOML has no tuples: accept an array for the pair, but keep its members strictly typed.
CurvePoint = Annotated[
    tuple[
        Annotated[int, Strict(), Field(ge=1, le=INT32_MAX)],
        Annotated[float, Strict(), Field(gt=0, le=1)],
    ],
    Strict(False),
]


class _Table(BaseModel):
    # strict: TOML values are typed, so "4" or 4.0 where an integer belongs is a mistake.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ScenarioInfo(_Table):
    name: Name
    description: str = ""
    seed: int = Field(default=1, ge=0, le=INT32_MAX)


class Device(_Table):
    write_bw: PositiveBandwidth
    read_bw: PositiveBandwidth
    concurrency: int = Field(ge=1, le=INT32_MAX)
    interference_slope: float | None = Field(default=None, ge=0)
    curve: list[CurvePoint] | None = None

    @field_validator("curve")
    @classmethod
    def _curve_starts_at_one_and_increases(
        cls, curve: list[tuple[int, float]] | None
    ) -> list[tuple[int, float]] | None:
        if curve is None:
            return None
        counts = [n for n, _ in curve]
        if not counts or counts[0] != 1:
            raise ValueError("the first point must be for n = 1")
        if any(later <= earlier for earlier, later in zip(counts, counts[1:], strict=False)):
            raise ValueError(f"n must be strictly increasing, got {counts}")
        return curve

    @model_validator(mode="after")
    def _one_interference_model(self) -> Self:
        if (self.interference_slope is None) == (self.curve is None):
            raise ValueError("give exactly one of interference_slope or curve")
        return self


class FatTree(_Table):
    levels: int = Field(ge=1, le=INT32_MAX)
    down: list[Annotated[int, Field(ge=1, le=INT32_MAX)]]
    up: list[Annotated[int, Field(ge=1, le=INT32_MAX)]]
    link_count: list[Annotated[int, Field(ge=1, le=INT32_MAX)]]

    @field_validator("down", "up", "link_count")
    @classmethod
    def _one_per_level(cls, values: list[int], info: ValidationInfo) -> list[int]:
        levels = info.data.get("levels")
        if levels is not None and len(values) != levels:
            raise ValueError(f"needs one value per level ({levels}), got {len(values)}")
        return values


class Platform(_Table):
    network: Literal["switch", "fat-tree"]
    link_bw: PositiveBandwidth
    link_latency: Duration = 0.0
    compute_nodes: int = Field(ge=1, le=INT32_MAX)
    # The jobs share the compute nodes: each waits in the batch queue until nodes are free for it
    # (docs/scheduling-model.md section 5). False: every job has nodes of its own.
    shared: bool = False
    fat_tree: FatTree | None = None

    @model_validator(mode="after")
    def _fat_tree_iff_needed(self) -> Self:
        if (self.network == "fat-tree") != (self.fat_tree is not None):
            raise ValueError('[platform.fat_tree] must be given exactly when network = "fat-tree"')
        return self


class Buffers(_Table):
    count: int = Field(ge=1, le=INT32_MAX)
    device: str
    capacity: PositiveSize
    flush_threshold: float = Field(default=0.0, ge=0, le=1)
    backup_flushers: int = Field(default=0, ge=0, le=INT32_MAX)

    @field_validator("backup_flushers")
    @classmethod
    def _leaves_a_buffer_for_io(cls, backup_flushers: int, info: ValidationInfo) -> int:
        count = info.data.get("count")
        if count is not None and backup_flushers >= count:
            raise ValueError(f"must be < buffers.count ({count}), got {backup_flushers}")
        return backup_flushers


class Pfs(_Table):
    servers: int = Field(ge=1, le=INT32_MAX)
    device: str


class PriorityOptions(_Table):
    tie: Literal["share", "fcfs"] = "share"


# Policies that admit whole jobs by reservation: they decide per job, not per window.
BATCH_RESERVATION_POLICIES = ("datawarp", "slurm-easy", "slurm-easy-sjf", "plan-based")


class AutoOptions(_Table):
    # What the `auto` policy minimises and the policies it chooses among (docs/scheduling-model.md
    # section 10); empty: every policy but auto and the batch-reservation ones.
    objective: Literal["makespan", "mean_completion", "stall", "slowdown"] = "stall"
    candidates: list[Annotated[str, one_of(policy_names)]] = []

    @field_validator("candidates")
    @classmethod
    def _chosen_per_window(cls, candidates: list[str]) -> list[str]:
        # These admit whole jobs by reservation (or are auto itself): no choice per window.
        for name in candidates:
            if name == "auto" or name in BATCH_RESERVATION_POLICIES:
                raise ValueError(f"{name} cannot be chosen per window")
        if len(set(candidates)) != len(candidates):
            raise ValueError("a policy is named twice")
        return candidates


class PlanBasedOptions(_Table):
    # The plan-based peer (docs/scheduling-model.md section 8): the power of each job's waiting
    # time in the plan's cost, and the jobs first in line started or reserved before the plan.
    alpha: float = Field(default=2.0, gt=0, le=10, allow_inf_nan=False)
    reservation_depth: int = Field(default=0, ge=0, le=INT32_MAX)


class Scheduler(_Table):
    max_colocated: int | None = Field(default=None, ge=1, le=INT32_MAX)
    # Applications a policy runs at once; 0: no limit; None: the policy's paper default.
    max_running_apps: int | None = Field(default=None, ge=0, le=INT32_MAX)
    if_limit: float = Field(default_factory=lambda: scheduler_default("if_limit"), gt=1)
    min_buffers: int = Field(
        default_factory=lambda: scheduler_default("min_buffers"), ge=1, le=INT32_MAX
    )
    priority: PriorityOptions = PriorityOptions()
    auto: AutoOptions = AutoOptions()
    plan_based: PlanBasedOptions = PlanBasedOptions()
    # DataWarp only (paper II-c, II-d; docs/scheduling-model.md section 5).
    extend_reservations: bool = False
    lend_write_only: bool = False
    # A read phase is announced when the computation before it begins, so that its data can be
    # staged in meanwhile; false: only when requested (docs/scheduling-model.md section 7).
    prefetch_ahead: bool = True


class IoClass(_Table):
    slowdown: float = Field(ge=1, allow_inf_nan=False)
    usage_factor: float = Field(ge=0, allow_inf_nan=False)


class Pricing(_Table):
    """Discounted scheduling (docs/accounting.md): what a node-hour costs, and the I/O service
    classes jobs name with `io_qos` (default: the policy core's, `harmonia describe`)."""

    node_hour_rate: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    classes: dict[Name, IoClass] | None = Field(default=None, min_length=1)

    def class_names(self) -> list[str]:
        if self.classes is not None:
            return list(self.classes)
        return [c["name"] for c in pricing_defaults()["classes"]]


class Synthetic(_Table):
    workload_class: Literal["compute-intensive", "balanced", "data-intensive", "only-io"] = Field(
        alias="class"
    )
    phases: int = Field(ge=1, le=INT32_MAX)
    phase_size: PositiveSize


class Periodic(_Table):
    steps: int = Field(ge=1, le=INT32_MAX)
    bytes_per_rank: PositiveSize
    compute: Duration


class ExplicitPhase(_Table):
    compute: Duration
    size: PositiveSize
    op: Literal["write", "read"] = "write"
    priority: int | None = Field(default=None, ge=MIN_PRIORITY, le=INT32_MAX)
    # A read phase reading back this application's earlier write phase (its index from 0);
    # without one a read phase's data comes from the PFS (docs/scheduling-model.md section 7).
    source_phase: int | None = Field(default=None, ge=0, le=INT32_MAX)


class ImportedPhase(_Table):
    """One I/O phase of an imported workload file (docs/formats.md section 4)."""

    compute: Duration  # since the previous phase ended, or since the job started
    start: Duration  # since the job started
    duration: Duration
    op: Literal["write", "read"]
    size: PositiveSize
    ranks: int = Field(ge=1, le=INT32_MAX)
    requests: int = Field(ge=0)
    request_size: int = Field(ge=0)  # mean bytes per request
    request_histogram: dict[str, Annotated[int, Field(ge=0)]] = {}
    files: list[str] = []
    file_count: int = Field(default=0, ge=0)


class ImportedApp(_Table):
    name: str = Field(min_length=1)
    exe: str = ""
    ranks: int = Field(ge=1, le=INT32_MAX)
    run_time: Duration
    jobid: int = 0
    start_time: str = ""
    bytes_written: int = Field(ge=0)
    bytes_read: int = Field(ge=0)
    tail: Duration = 0.0  # from the end of the last phase to the end of the job
    phases: list[ImportedPhase] = Field(min_length=1)


class WorkloadInfo(_Table):
    format: Literal[1]
    source: str
    source_sha256: str = ""
    imported_by: str = ""
    layer: str
    timing: str
    gap_threshold: Duration
    lacks: list[str] = []
    notes: list[str] = []


class WorkloadFile(_Table):
    """A workload file written by `harmonia import-darshan`."""

    workload: WorkloadInfo
    apps: list[ImportedApp] = Field(min_length=1)


class Imported(_Table):
    file: str = Field(min_length=1)  # relative to the scenario file
    # Bounded so that scaled sizes stay finite floats: phases are int64 bytes in Darshan logs.
    scale: float = Field(default=1.0, gt=0, le=1e9, allow_inf_nan=False)
    app: str | None = None
    # The application read from `file`, set by load_scenario once the file is validated.
    _source: ImportedApp | None = PrivateAttr(default=None)

    def attach(self, source: ImportedApp) -> None:
        """Keep the application read from `file` (the model itself stays frozen)."""
        self._source = source

    def source(self) -> ImportedApp:
        if self._source is None:
            raise RuntimeError(f"{self.file} was not loaded: read scenarios with load_scenario")
        return self._source

    def scaled(self, size: int) -> int:
        """A phase size times `scale`, never below one byte (the simulator needs size > 0)."""
        return max(1, round(size * self.scale))


class App(_Table):
    name: str = Field(min_length=1)
    instances: int = Field(default=1, ge=1, le=INT32_MAX)
    ranks: int = Field(default=1, ge=1, le=INT32_MAX)
    nodes: int = Field(default=1, ge=1, le=INT32_MAX)
    arrival: Duration = 0.0
    arrival_interval: Duration = 0.0
    priority: int = Field(default=0, ge=MIN_PRIORITY, le=INT32_MAX)
    hint: Literal["flushable", "cached"] = "flushable"
    user: str = Field(default="", max_length=256)  # who submits it (ThemisIO's user-fair)
    walltime: Duration | None = None  # requested time limit (Slurm EASY backfilling)
    # The DataWarp reservation (default: the total of its phases) and whether it only holds
    # intermediate results never read back, whose unused space may be lent.
    reservation: PositiveSize | None = None
    write_only: bool = False
    # Its I/O service class: a [pricing.classes] name, or the slowdown (>= 1) it accepts.
    io_qos: Annotated[str, Field(min_length=1, max_length=64)] | float = "normal"
    workload: Literal["synthetic", "periodic", "explicit", "imported"]
    synthetic: Synthetic | None = None
    periodic: Periodic | None = None
    phases: list[ExplicitPhase] | None = Field(default=None, min_length=1)
    imported: Imported | None = None

    @model_validator(mode="after")
    def _one_workload_matching(self) -> Self:
        tables = {
            "synthetic": ("[apps.synthetic]", self.synthetic),
            "periodic": ("[apps.periodic]", self.periodic),
            "explicit": ("[[apps.phases]]", self.phases),
            "imported": ("[apps.imported]", self.imported),
        }
        present = [table for table, content in tables.values() if content is not None]
        wanted = tables[self.workload][0]
        if present != [wanted]:
            raise ValueError(
                f'workload = "{self.workload}" needs {wanted} and no other workload table,'
                f" found {' and '.join(present) or 'none'}"
            )
        return self

    def instance_names(self) -> list[str]:
        """Names of the applications this entry expands into."""
        if self.instances == 1:
            return [self.name]
        return [f"{self.name}-{k}" for k in range(self.instances)]

    def resolved_ranks(self) -> int:
        """`ranks` as written, else for an imported workload the ranks of its log."""
        if self.imported is not None and "ranks" not in self.model_fields_set:
            return self.imported.source().ranks
        return self.ranks


class TraceTable(_Table):
    # A real trace replayed on a machine the jobs share (docs/workloads.md): its file (SWF, plain
    # or gzip, relative to the scenario file), its window and the burst-buffer request model.
    file: str = Field(min_length=1)
    jobs: int | None = Field(default=None, ge=1, le=INT32_MAX)
    start: Duration | None = None
    end: Duration | None = None
    requests: Literal["phases", "kopanski-rzadca"] = "phases"
    processors_per_node: int | None = Field(default=None, ge=1, le=INT32_MAX)


class _WithTrace(_Table):
    model_config = ConfigDict(extra="allow")
    trace: TraceTable


# Tables a scenario with [trace] may give to replace the generated machine's keys.
_TRACE_MACHINE_TABLES = ("platform", "buffers", "pfs", "scheduler", "devices", "pricing")


def expand_trace(document: dict[str, Any], source: Path, seed: int | None = None) -> dict[str, Any]:
    """The scenario document with its [trace] table replaced by the trace's jobs and machine
    (harmonia.workloads.trace_document), the keys of its own [platform], [buffers], [pfs],
    [scheduler], [devices] and [pricing] tables taking precedence. `seed` replaces the scenario's
    (it draws the jobs' I/O). A document without [trace] is returned as it is."""
    if "trace" not in document:
        return document
    from harmonia.workloads import TraceSpec, trace_document

    table = _validate(_WithTrace, document, source).trace
    if "apps" in document:
        raise ScenarioError(
            [f"{source}: apps: a scenario with [trace] has no [[apps]] (its jobs are the trace's)"]
        )
    info = dict(document.get("scenario", {}))
    if seed is not None:
        info["seed"] = seed
    try:
        spec = TraceSpec(
            source.parent / table.file,
            table.jobs,
            table.start,
            table.end,
            table.requests,
            table.processors_per_node,
        )
        generated = trace_document(spec, int(info.get("seed", 1)))
    except ValueError as error:
        raise ScenarioError([f"{source}: trace: {error}"]) from error
    expanded = {key: value for key, value in generated.items()}
    expanded["scenario"] = {**generated["scenario"], **info}
    for name in _TRACE_MACHINE_TABLES:
        if name in document:
            expanded[name] = {**generated.get(name, {}), **document[name]}
    return expanded


class Scenario(_Table):
    scenario: ScenarioInfo
    devices: dict[str, Device] = {}
    platform: Platform
    buffers: Buffers
    pfs: Pfs
    scheduler: Scheduler = Scheduler()
    pricing: Pricing | None = None
    apps: list[App] = Field(min_length=1)

    def resolved_devices(self) -> dict[str, Device]:
        """Built-in devices, overridden or extended by the scenario's [devices.*] tables."""
        return builtin_devices() | self.devices


@cache
def builtin_devices() -> dict[str, Device]:
    """The devices shipped in harmonia/data/devices.toml (paper Fig. 1 and Fig. 3)."""
    text = resources.files("harmonia").joinpath("data/devices.toml").read_text(encoding="utf-8")
    return TypeAdapter(dict[str, Device]).validate_python(tomllib.loads(text))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ScenarioError([f"{path}: cannot read: {error.strerror}"]) from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ScenarioError([f"{path}: invalid TOML: {error}"]) from error


_Model = TypeVar("_Model", bound=BaseModel)


def _validate(model: type[_Model], document: dict[str, Any], path: Path) -> _Model:
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise ScenarioError(
            [f"{path}: {_key_path(e['loc'])}: {_reason(e)}" for e in error.errors()]
        ) from error


def load_workload(path: Path) -> WorkloadFile:
    """Read and validate a workload file (docs/formats.md section 4). Raises ScenarioError."""
    return _validate(WorkloadFile, _read_toml(path), path)


def load_scenario(path: Path, seed: int | None = None) -> Scenario:
    """Read and validate a scenario TOML file. Raises ScenarioError listing every problem found.

    Imported workloads are read too, from paths relative to the scenario file, and a [trace]
    becomes its jobs, their I/O drawn with `seed` when given (else the scenario's).
    """
    scenario = _validate(Scenario, expand_trace(_read_toml(path), path, seed), path)
    problems_in_imports = list(_load_imports(scenario, path))
    if problems_in_imports:
        raise ScenarioError(problems_in_imports)
    problems = list(_cross_table_errors(scenario))
    if problems:
        raise ScenarioError([f"{path}: {key}: {reason}" for key, reason in problems])
    return scenario


def scenario_from_document(document: dict[str, Any], source: Path) -> Scenario:
    """Validate a scenario built in memory (a workload generator's), as `load_scenario` validates
    a file's, naming `source` in errors. It may not import workload files."""
    scenario = _validate(Scenario, document, source)
    problems = list(_cross_table_errors(scenario))
    if problems:
        raise ScenarioError([f"{source}: {key}: {reason}" for key, reason in problems])
    return scenario


def _load_imports(scenario: Scenario, path: Path) -> Iterator[str]:
    """Read the workload file of each imported application; yield error lines."""
    for index, app in enumerate(scenario.apps):
        if app.imported is None:
            continue
        key = f"apps[{index}].imported"
        workload_path = path.parent / app.imported.file
        if not workload_path.is_file():
            yield f"{path}: {key}.file: no such file: {workload_path}"
            continue
        try:
            workload = load_workload(workload_path)
        except ScenarioError as error:
            yield from error.lines
            continue
        names = [source.name for source in workload.apps]
        wanted = app.imported.app
        if wanted is None and len(names) > 1:
            yield (
                f"{path}: {key}.app: {workload_path} holds {len(names)} applications"
                f" ({', '.join(names)}), choose one"
            )
        elif wanted is not None and wanted not in names:
            yield (
                f'{path}: {key}.app: no application "{wanted}" in {workload_path}'
                f" (it holds {', '.join(names)})"
            )
        else:
            app.imported.attach(workload.apps[names.index(wanted) if wanted else 0])


def _key_path(loc: tuple[int | str, ...]) -> str:
    """("apps", 0, "synthetic", "phase_size") -> "apps[0].synthetic.phase_size"."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def _reason(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing required key"
    if kind == "value_error":  # raised by our own validators: their message is the whole reason
        return str(error["ctx"]["error"])
    value = error["input"]
    if isinstance(value, str | int | float | bool):
        return f"{error['msg']}, got {json.dumps(value)}"
    return str(error["msg"])


def _phase_sizes(app: App) -> Iterator[tuple[str, int]]:
    """Each distinct phase size of an application with the key that sets it."""
    if app.synthetic is not None:
        yield "synthetic.phase_size", app.synthetic.phase_size
    if app.periodic is not None:
        yield "periodic.bytes_per_rank", app.ranks * app.periodic.bytes_per_rank
    for index, phase in enumerate(app.phases or []):
        yield f"phases[{index}].size", phase.size
    if app.imported is not None:
        # One line for the largest phase is enough to say the workload does not fit.
        largest = max(phase.size for phase in app.imported.source().phases)
        yield "imported", app.imported.scaled(largest)


def _phase_count(app: App) -> int:
    """The phases one instance of `app` expands to."""
    if app.synthetic is not None:
        return app.synthetic.phases
    if app.periodic is not None:
        return app.periodic.steps
    if app.imported is not None:
        return len(app.imported.source().phases)
    return len(app.phases or [])


def io_qos_text(io_qos: str | float) -> str:
    """`io_qos` as the simulator reads it: a class name, or the slowdown written as a number."""
    return io_qos if isinstance(io_qos, str) else repr(float(io_qos))


def _io_qos_errors(scenario: Scenario) -> Iterator[tuple[str, str]]:
    names: list[str] | None = None
    for index, app in enumerate(scenario.apps):
        if app.io_qos == "normal" and "io_qos" not in app.model_fields_set:
            continue
        if names is None:
            names = (scenario.pricing or Pricing()).class_names()
        if isinstance(app.io_qos, str) and app.io_qos in names:
            continue
        try:
            slowdown = float(app.io_qos)
        except ValueError:
            slowdown = math.nan
        if not (slowdown >= 1 and math.isfinite(slowdown)):
            yield (
                f"apps[{index}].io_qos",
                f"{json.dumps(app.io_qos)} is neither a class ({', '.join(names)}) nor a"
                " slowdown >= 1",
            )


def _source_phase_errors(app: App) -> Iterator[tuple[str, str]]:
    phases = app.phases or []
    for index, phase in enumerate(phases):
        source = phase.source_phase
        if source is None:
            continue
        if phase.op != "read":
            yield f"phases[{index}].source_phase", "only a read phase has a source"
        elif source >= index or phases[source].op != "write":
            yield (
                f"phases[{index}].source_phase",
                f"must be the index of an earlier write phase of this application, got {source}",
            )


def _cross_table_errors(scenario: Scenario) -> Iterator[tuple[str, str]]:
    yield from _io_qos_errors(scenario)
    devices = scenario.resolved_devices()
    for number, app in enumerate(scenario.apps):
        for key, reason in _source_phase_errors(app):
            yield f"apps[{number}].{key}", reason
    for key, name in (
        ("buffers.device", scenario.buffers.device),
        ("pfs.device", scenario.pfs.device),
    ):
        if name not in devices:
            yield key, f'unknown device "{name}" (known: {", ".join(sorted(devices))})'

    buffers = scenario.buffers
    if scenario.scheduler.min_buffers > buffers.count:
        yield (
            "scheduler.min_buffers",
            f"must be <= buffers.count ({buffers.count}), got {scenario.scheduler.min_buffers}",
        )

    total_capacity = buffers.count * buffers.capacity
    for index, app in enumerate(scenario.apps):
        for key, size in _phase_sizes(app):
            if size > total_capacity:
                yield (
                    f"apps[{index}].{key}",
                    f"a phase of {format_size(size)} does not fit in the buffers' total capacity"
                    f" of {format_size(total_capacity)} ({buffers.count} x"
                    f" {format_size(buffers.capacity)})",
                )

    nodes = sum(app.instances * app.nodes for app in scenario.apps)
    if scenario.platform.shared:
        for index, app in enumerate(scenario.apps):
            if app.nodes > scenario.platform.compute_nodes:
                yield (
                    f"apps[{index}].nodes",
                    f"{app.nodes} nodes, larger than the machine (platform.compute_nodes ="
                    f" {scenario.platform.compute_nodes})",
                )
    elif nodes > scenario.platform.compute_nodes:
        yield (
            "platform.compute_nodes",
            f"the applications need {nodes} nodes (sum over [[apps]] of instances x nodes),"
            f" only {scenario.platform.compute_nodes} available",
        )

    hosts = scenario.platform.compute_nodes + buffers.count + scenario.pfs.servers
    if hosts > INT32_MAX:
        yield (
            "platform.compute_nodes",
            f"compute nodes + buffers + PFS servers must be at most {INT32_MAX}, got {hosts}",
        )

    expanded = sum(app.instances * _phase_count(app) for app in scenario.apps)
    if expanded > MAX_EXPANDED_PHASES:
        yield (
            "apps",
            f"the applications expand to {expanded} phases (instances x phases, summed), at most"
            f" {MAX_EXPANDED_PHASES} are simulated",
        )

    tree = scenario.platform.fat_tree
    if tree is not None:
        leaves = math.prod(tree.down)
        if leaves < hosts:
            yield (
                "platform.fat_tree.down",
                f"the tree has {leaves} leaves (the product of down), the scenario needs {hosts}"
                " (compute nodes + buffers + PFS servers)",
            )

    seen: set[str] = set()
    for index, app in enumerate(scenario.apps):
        for name in app.instance_names():
            if name in seen:
                yield f"apps[{index}].name", f'duplicate application name "{name}"'
            seen.add(name)


def _expand_phases(app: App, buffer_write_bw: float) -> list[dict[str, Any]]:
    if app.synthetic is not None:
        # Paper IV-B: a time slice writes one phase on all buffers with no interference.
        time_slice = app.synthetic.phase_size / buffer_write_bw
        compute = SYNTHETIC_COMPUTE_RATIO[app.synthetic.workload_class] * time_slice
        size, count = app.synthetic.phase_size, app.synthetic.phases
    elif app.periodic is not None:
        compute = app.periodic.compute
        size, count = app.ranks * app.periodic.bytes_per_rank, app.periodic.steps
    elif app.imported is not None:
        imported = app.imported
        return [
            {
                "compute": phase.compute,
                "size": imported.scaled(phase.size),
                "op": phase.op,
                "priority": app.priority,
            }
            for phase in imported.source().phases
        ]
    else:
        return [
            {
                "compute": phase.compute,
                "size": phase.size,
                "op": phase.op,
                "priority": app.priority if phase.priority is None else phase.priority,
                **({} if phase.source_phase is None else {"source_phase": phase.source_phase}),
            }
            for phase in app.phases or []
        ]
    return [
        {"compute": compute, "size": size, "op": "write", "priority": app.priority}
        for _ in range(count)
    ]


def _device_json(device: Device) -> dict[str, Any]:
    interference: dict[str, Any] = (
        {"curve": [list(point) for point in device.curve]}
        if device.curve is not None
        else {"interference_slope": device.interference_slope}
    )
    return {
        "write_bw": device.write_bw,
        "read_bw": device.read_bw,
        "concurrency": device.concurrency,
        **interference,
    }


def _reservation_keys(app: App) -> dict[str, Any]:
    """An application's DataWarp reservation keys, only those set (the simulator's defaults
    are the total of its phases and not write-only)."""
    keys: dict[str, Any] = {}
    if app.reservation is not None:
        keys["reservation"] = app.reservation
    if app.write_only:
        keys["write_only"] = True
    return keys


def normalize(scenario: Scenario) -> dict[str, Any]:
    """The normalized scenario of docs/formats.md section 2, ready for `json.dump`.

    Units are SI base (bytes, bytes/s, s), devices resolved, and every application instance
    expanded into an explicit list of phases.
    """
    devices = scenario.resolved_devices()
    buffers = scenario.buffers
    buffer_write_bw = buffers.count * devices[buffers.device].write_bw
    platform: dict[str, Any] = {
        "network": scenario.platform.network,
        "link_bw": scenario.platform.link_bw,
        "link_latency": scenario.platform.link_latency,
        "compute_nodes": scenario.platform.compute_nodes,
    }
    if scenario.platform.shared:
        platform["shared"] = True
    if scenario.platform.fat_tree is not None:
        platform["fat_tree"] = scenario.platform.fat_tree.model_dump()
    scheduler: dict[str, Any] = {
        "if_limit": scenario.scheduler.if_limit,
        "min_buffers": scenario.scheduler.min_buffers,
        "priority_tie": scenario.scheduler.priority.tie,
    }
    # The DataWarp reservation options appear only when set, as the simulator's defaults are off.
    for option in ("extend_reservations", "lend_write_only"):
        if getattr(scenario.scheduler, option):
            scheduler[option] = True
    if not scenario.scheduler.prefetch_ahead:
        scheduler["prefetch_ahead"] = False
    # The `auto` policy's settings appear only when set, as other policies ignore them.
    if scenario.scheduler.auto != AutoOptions():
        scheduler["auto"] = scenario.scheduler.auto.model_dump()
    if scenario.scheduler.plan_based != PlanBasedOptions():
        scheduler["plan_based"] = scenario.scheduler.plan_based.model_dump()
    if scenario.scheduler.max_colocated is not None:
        scheduler["max_colocated"] = scenario.scheduler.max_colocated
    if scenario.scheduler.max_running_apps is not None:
        scheduler["max_running_apps"] = scenario.scheduler.max_running_apps

    apps = []
    for app in scenario.apps:
        for k, name in enumerate(app.instance_names()):
            entry: dict[str, Any] = {
                "name": name,
                "ranks": app.resolved_ranks(),
                "nodes": app.nodes,
                "arrival": app.arrival + k * app.arrival_interval,
                "priority": app.priority,
                "hint": app.hint,
                "phases": _expand_phases(app, buffer_write_bw),
            }
            if app.user:
                entry["user"] = app.user
            if app.walltime is not None:
                entry["walltime"] = app.walltime
            if "io_qos" in app.model_fields_set:
                entry["io_qos"] = io_qos_text(app.io_qos)
            apps.append(entry | _reservation_keys(app))

    used_devices = dict.fromkeys([buffers.device, scenario.pfs.device])
    # Pricing appears only when the scenario sets it: the simulator's defaults are the core's.
    pricing: dict[str, Any] = {}
    if scenario.pricing is not None:
        pricing["node_hour_rate"] = scenario.pricing.node_hour_rate
        if scenario.pricing.classes is not None:
            pricing["classes"] = [
                {"name": name, **io_class.model_dump()}
                for name, io_class in scenario.pricing.classes.items()
            ]
    return {
        "name": scenario.scenario.name,
        "seed": scenario.scenario.seed,
        "devices": {name: _device_json(devices[name]) for name in used_devices},
        "platform": platform,
        "buffers": buffers.model_dump(),
        "pfs": scenario.pfs.model_dump(),
        "scheduler": scheduler,
        "apps": apps,
    } | ({"pricing": pricing} if pricing else {})
