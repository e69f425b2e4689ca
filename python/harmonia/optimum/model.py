"""The optimum of small instances (docs/bakeoff.md, "The optimum"): a CP-SAT model of the whole
problem, phases to buffers and start times with capacity, the interference curve and drains, on
a discretised time line, and the gap of each policy's schedule to it.

The policies' schedules come from `harmonia-fluid`, which runs the policy core in the fluid model
`auto` forecasts with (src/core/lookahead.cpp): both sides share the device curve, the buffers'
links and the application's network cap, so a gap is the policy's, not a modelling difference.

The model (every time in slots of `slot` seconds, every size in MB):

- phase p starts at slot S_p and ends at slot E_p (non-preemptive: it writes in every slot of
  [S_p, E_p)), striped evenly over a set of j >= Y buffers it chooses (each buffer gets
  ceil(bytes / j));
- the first phase of an application is asked at arrival + its compute, each later one at the end
  of the one before plus its compute; a phase starts at the first slot boundary after it is asked
  or later;
- on buffer b in slot t, n = phases writing + 1 if it drains (at most X phases); each stream there
  moves at most floor(slot x min(stream_bw(n), link_bw / n)) (the device curve of
  docs/scheduling-model.md section 1, tabulated for n = 1..X+1: this is the discretisation of the
  interference curve, exact at every integer n); a phase moves at most its nodes' network cap per
  slot in all;
- a buffer holds what was written to it and not drained, at most its capacity; it drains only
  what was written before the slot (at the device's read rate for n streams).

What the discretisation loses: a phase ends on a slot boundary, so it is charged up to one slot
more than its last bytes need, and a phase that could start between boundaries waits for the
next. The model's schedules are therefore feasible in continuous time (with rates rounded down),
and its optimum is within about one slot per phase in a chain of the continuous one. Drains are
relaxed: the model may drain bytes of a phase still running, where the core drains only finished
phases; that can only make the model better. The optimum is that of this discrete model, proven
by CP-SAT within the time limit or reported as not proven. Its decisions (each phase's buffers and
the order phases start in) are then played again in continuous time (`retime`) and the better of
the two schedules is kept: that gives back most of the rounding, not all, since the decisions were
optimal for the slots.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MB = 1e6
GB = 1e9
OBJECTIVES = ("makespan", "mean_completion", "stall", "slowdown")
# The paper's SSD (Fig. 3) and the simulator's default links, as in tests/core.
SSD = {"write_bw": 500e6, "read_bw": 550e6, "concurrency": 2, "slope": 0.9557}
_MEASURED_RANGE = 32  # the device curve's normalisation range (src/core/device.cpp)


@dataclass
class AppSpec:
    arrival: float
    phases: list[tuple[float, float]]  # (compute before it, bytes)
    nodes: int = 1


@dataclass
class Instance:
    apps: list[AppSpec]
    buffers: int = 2
    capacity: float = 100 * GB
    link_bw: float = 1.25e9
    client_bw: float = 1.25e9
    max_colocated: int = 3
    min_buffers: int = 1
    flush_threshold: float = 0.0
    seed: int = 1
    device: dict[str, float] = field(default_factory=lambda: dict(SSD))

    def to_json(self) -> dict[str, Any]:
        """The instance as harmonia-fluid reads it (src/tools/fluid.cpp)."""
        return {
            "device": self.device,
            "buffers": {"count": self.buffers, "capacity": self.capacity, "link_bw": self.link_bw},
            "client_bw": self.client_bw,
            "max_colocated": self.max_colocated,
            "min_buffers": self.min_buffers,
            "flush_threshold": self.flush_threshold,
            "seed": self.seed,
            "apps": [
                {
                    "name": f"app{a}",
                    "arrival": app.arrival,
                    "nodes": app.nodes,
                    "phases": [{"compute": c, "bytes": b} for c, b in app.phases],
                }
                for a, app in enumerate(self.apps)
            ],
        }


def random_instance(
    seed: int, apps: int = 3, phases: int = 2, buffers: int = 2, max_colocated: int = 3
) -> Instance:
    """A small seeded instance: arrivals within 20 s, computes of 0-30 s, phases of 2-12 GB,
    on `buffers` SSD buffers of 40 GB (so that capacity and drains matter)."""
    rng = random.Random(seed)
    specs = [
        AppSpec(
            arrival=round(rng.uniform(0, 20), 1),
            phases=[
                (round(rng.uniform(0, 30), 1), round(rng.uniform(2, 12), 1) * GB)
                for _ in range(phases)
            ],
        )
        for _ in range(apps)
    ]
    return Instance(
        specs, buffers=buffers, capacity=40 * GB, max_colocated=max_colocated, seed=seed
    )


def stream_bw(device: dict[str, float], n: int, op: str = "write") -> float:
    """Bandwidth each of n streams gets: the slope model of src/core/device.cpp (from_slope)."""
    slope = device["slope"]

    def relative(k: int) -> float:
        return k / (1.0 + slope * (k - 1))

    best = max(relative(k) for k in range(1, _MEASURED_RANGE + 1))
    peak = device["write_bw"] if op == "write" else device["read_bw"]
    return peak * min(1.0, relative(n) / best) / n


def io_alone(instance: Instance, nbytes: float, width: int, nodes: int = 1) -> float:
    """A phase's I/O time alone on `width` buffers, as the core predicts it (optimizer.cpp)."""
    per_buffer = min(stream_bw(instance.device, 1), instance.link_bw)
    rate = per_buffer * width
    if instance.client_bw > 0:
        rate = min(rate, nodes * instance.client_bw)
    return nbytes / rate


@dataclass
class PhaseTimes:
    app: int
    index: int
    requested: float
    start: float
    end: float
    io_alone: float


def metrics(instance: Instance, phases: list[PhaseTimes]) -> dict[str, float]:
    """The four objectives of a schedule, defined as `auto`'s forecast defines them
    (core/lookahead.hpp), with completions from each application's arrival."""
    last_end: dict[int, float] = {}
    stall = 0.0
    slowdowns = []
    for p in phases:
        turnaround = p.end - p.requested
        stall += max(0.0, turnaround - p.io_alone)
        slowdowns.append(turnaround / p.io_alone)
        last_end[p.app] = max(last_end.get(p.app, 0.0), p.end)
    return {
        "makespan": max(last_end.values()),
        "mean_completion": sum(end - instance.apps[a].arrival for a, end in last_end.items())
        / len(last_end),
        "stall": stall / len(last_end),
        "slowdown": sum(slowdowns) / len(slowdowns),
    }


@dataclass
class Optimum:
    objective: str
    status: str  # "OPTIMAL" (proven for the discrete model), "FEASIBLE" (time limit) or other
    slot: float
    value: float  # the objective of the schedule found, continuous-time metrics
    bound: float  # CP-SAT's lower bound on the model's objective, in the objective's unit
    phases: list[PhaseTimes]
    seconds: float
    widths: list[int] = field(default_factory=list)  # buffers per phase


def solve(
    instance: Instance,
    objective: str,
    horizon: float,
    slots: int = 60,
    time_limit: float = 30.0,
    workers: int = 2,
    drop: str | None = None,
) -> Optimum:
    """The CP-SAT optimum of `instance` for `objective` with time cut into `slots` slots over
    `horizon` seconds. `drop` leaves one constraint out ("capacity", "colocation" or
    "interference"), only to test that each one matters.

    Raises ValueError when the instance cannot be scheduled within the horizon.
    """
    from ortools.sat.python import cp_model

    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: one of {', '.join(OBJECTIVES)}")
    dt = horizon / slots
    T = slots
    M = instance.buffers
    X = instance.max_colocated
    m = cp_model.CpModel()
    phases = [
        (a, k, c, b) for a, app in enumerate(instance.apps) for k, (c, b) in enumerate(app.phases)
    ]
    P = len(phases)
    big = int(math.ceil(max(b for *_, b in phases) / MB)) + 1
    cap_mb = int(instance.capacity // MB)

    def per_slot(bw: float) -> int:
        return int(math.floor(dt * bw / MB))

    # Rates per stream for n streams on a buffer (phases + drain), write and read (drains).
    def write_rate(n: int) -> int:
        if drop == "interference":
            return per_slot(min(stream_bw(instance.device, 1), instance.link_bw))
        return per_slot(min(stream_bw(instance.device, n), instance.link_bw / n))

    def read_rate(n: int) -> int:
        return per_slot(stream_bw(instance.device, n, "read"))

    start = [[m.new_bool_var(f"s{p}_{t}") for t in range(T)] for p in range(P)]
    end = [[m.new_bool_var(f"e{p}_{t}") for t in range(T + 1)] for p in range(P)]
    S = [m.new_int_var(0, T - 1, f"S{p}") for p in range(P)]
    E = [m.new_int_var(1, T, f"E{p}") for p in range(P)]
    active = [[m.new_bool_var(f"a{p}_{t}") for t in range(T)] for p in range(P)]
    for p in range(P):
        m.add_exactly_one(start[p])
        m.add_exactly_one(end[p])
        m.add(S[p] == sum(t * start[p][t] for t in range(T)))
        m.add(E[p] == sum(t * end[p][t] for t in range(T + 1)))
        m.add(E[p] >= S[p] + 1)
        # Active from its start slot until its end boundary (end[p][t]: slot t is the first
        # one it no longer writes in).
        m.add(active[p][0] == start[p][0])
        for t in range(1, T):
            m.add(active[p][t] == active[p][t - 1] + start[p][t] - end[p][t])

    # Buffers and width: sel[p][j-1] chooses j buffers, y[p][b] which ones.
    sel = [[m.new_bool_var(f"j{p}_{j}") for j in range(1, M + 1)] for p in range(P)]
    y = [[m.new_bool_var(f"y{p}_{b}") for b in range(M)] for p in range(P)]
    for p in range(P):
        m.add_exactly_one(sel[p])
        for j in range(1, instance.min_buffers):
            m.add(sel[p][j - 1] == 0)
        m.add(sum(y[p]) == sum(j * sel[p][j - 1] for j in range(1, M + 1)))

    x = [[[m.new_bool_var(f"x{p}_{b}_{t}") for t in range(T)] for b in range(M)] for p in range(P)]
    w = [
        [[m.new_int_var(0, big, f"w{p}_{b}_{t}") for t in range(T)] for b in range(M)]
        for p in range(P)
    ]
    drain = [[m.new_bool_var(f"d{b}_{t}") for t in range(T)] for b in range(M)]
    drained = [[m.new_int_var(0, cap_mb + big, f"dv{b}_{t}") for t in range(T)] for b in range(M)]
    # Bytes a buffer holds at the end of each slot: written and not drained.
    limit = cap_mb if drop != "capacity" else P * big
    held = [[m.new_int_var(0, limit, f"h{b}_{t}") for t in range(T)] for b in range(M)]
    kmax = X + 1
    for b in range(M):
        for t in range(T):
            writers = [x[p][b][t] for p in range(P)]
            if drop != "colocation":
                m.add(sum(writers) <= X)
            # n = writers + drain, one-hot over 0..P+1 (beyond X only when colocation is dropped).
            top = P + 1 if drop == "colocation" else kmax
            z = [m.new_bool_var(f"z{b}_{t}_{k}") for k in range(top + 1)]
            m.add_exactly_one(z)
            m.add(sum(k * z[k] for k in range(top + 1)) == sum(writers) + drain[b][t])
            cap_w = sum(write_rate(k) * z[k] for k in range(1, top + 1))
            cap_r = sum(read_rate(k) * z[k] for k in range(1, top + 1))
            for p in range(P):
                m.add(w[p][b][t] <= cap_w)
                m.add(w[p][b][t] <= big * x[p][b][t])
            m.add(drained[b][t] <= cap_r)
            m.add(drained[b][t] <= (cap_mb + big) * drain[b][t])
            # Drain only what was held before this slot; hold at most the capacity.
            before = held[b][t - 1] if t > 0 else 0
            m.add(drained[b][t] <= before)
            m.add(held[b][t] == before + sum(w[p][b][t] for p in range(P)) - drained[b][t])
    for p, (a, _k, _c, nbytes) in enumerate(phases):
        nodes = instance.apps[a].nodes
        for b in range(M):
            for t in range(T):
                m.add_implication(x[p][b][t], active[p][t])
                m.add_implication(x[p][b][t], y[p][b])
                m.add_bool_or([x[p][b][t], active[p][t].negated(), y[p][b].negated()])
            # Even striping: each chosen buffer receives ceil(bytes / j).
            need = sum(int(math.ceil(nbytes / MB / j)) * sel[p][j - 1] for j in range(1, M + 1))
            m.add(sum(w[p][b]) >= need).only_enforce_if(y[p][b])
        if instance.client_bw > 0:
            cap = per_slot(nodes * instance.client_bw)
            for t in range(T):
                m.add(sum(w[p][b][t] for b in range(M)) <= cap)

    # Requests: the first phase at arrival + compute, the others at the previous end + compute;
    # a phase starts at a slot boundary at or after its request.
    index_of = {(a, k): p for p, (a, k, _c, _b) in enumerate(phases)}
    for p, (a, k, c, _b) in enumerate(phases):
        if k == 0:
            m.add(S[p] >= int(math.ceil((instance.apps[a].arrival + c) / dt - 1e-9)))
        else:
            m.add(S[p] >= E[index_of[(a, k - 1)]] + int(math.ceil(c / dt - 1e-9)))
    lasts = [index_of[(a, len(app.phases) - 1)] for a, app in enumerate(instance.apps)]

    scale = 1000  # objective in thousandths of a slot
    if objective == "makespan":
        span = m.new_int_var(0, T, "makespan")
        m.add_max_equality(span, [E[p] for p in lasts])
        m.minimize(span)
    elif objective == "mean_completion":
        m.minimize(sum(E[p] for p in lasts))
    elif objective == "stall":
        # sum (end - request - io_alone(width)); the constant parts of the requests dropped.
        alone = [
            [
                round(
                    scale
                    * io_alone(instance, phases[p][3], j, instance.apps[phases[p][0]].nodes)
                    / dt
                )
                for j in range(1, M + 1)
            ]
            for p in range(P)
        ]
        terms: list[Any] = []
        for p in range(P):
            terms.append(scale * E[p])
            if phases[p][1] > 0:
                terms.append(-scale * E[index_of[(phases[p][0], phases[p][1] - 1)]])
            terms.append(-sum(alone[p][j] * sel[p][j] for j in range(M)))
        m.minimize(sum(terms))
    else:  # slowdown: sum (end - request) / io_alone(width)
        terms = []
        for p in range(P):
            a, k, c, nbytes = phases[p]
            base = E[index_of[(a, k - 1)]] if k > 0 else 0
            offset = (instance.apps[a].arrival + c) / dt if k == 0 else c / dt
            dur = m.new_int_var(-T, T, f"dur{p}")
            m.add(dur == E[p] - base)
            for j in range(1, M + 1):
                part = m.new_int_var(-T, T, f"dj{p}_{j}")
                m.add(part == dur).only_enforce_if(sel[p][j - 1])
                m.add(part == 0).only_enforce_if(sel[p][j - 1].negated())
                weight = round(scale * dt / io_alone(instance, nbytes, j, instance.apps[a].nodes))
                # (end - request) / io_alone, the request's compute part being constant.
                terms.append(weight * part - round(weight * offset) * sel[p][j - 1])
        m.minimize(sum(terms))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = instance.seed
    status = solver.solve(m)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise ValueError(f"no schedule within {horizon:.0f} s ({name})")
    times: list[PhaseTimes] = []
    widths: list[int] = []
    ends = {p: solver.value(E[p]) * dt for p in range(P)}
    for p, (a, k, c, nbytes) in enumerate(phases):
        requested = (instance.apps[a].arrival if k == 0 else ends[index_of[(a, k - 1)]]) + c
        j = 1 + [solver.value(v) for v in sel[p]].index(1)
        widths.append(j)
        times.append(
            PhaseTimes(
                a,
                k,
                requested,
                solver.value(S[p]) * dt,
                ends[p],
                io_alone(instance, nbytes, j, instance.apps[a].nodes),
            )
        )
    value = metrics(instance, times)[objective]
    # The same decisions in continuous time: what the slots' rounding cost, given back.
    buffers_of = [[b for b in range(M) if solver.value(y[p][b])] for p in range(P)]
    order = sorted(range(P), key=lambda p: (solver.value(S[p]), solver.value(E[p]), p))
    retimed = retime(instance, [(a, k) for a, k, _c, _b in phases], buffers_of, order)
    if retimed is not None and metrics(instance, retimed)[objective] < value:
        times, value = retimed, metrics(instance, retimed)[objective]
    bound = solver.best_objective_bound
    return Optimum(objective, name, dt, value, bound, times, solver.wall_time, widths)


def retime(
    instance: Instance,
    phases: list[tuple[int, int]],
    buffers_of: list[list[int]],
    order: list[int],
) -> list[PhaseTimes] | None:
    """A model schedule's decisions (each phase's buffers, the order phases start in) played in
    continuous time with the fluid rates: each phase starts as soon as it is asked, the phases
    before it in `order` have started and its buffers run fewer than X phases. No drain runs, so
    None when a buffer would receive more than its capacity."""
    held = [0.0] * instance.buffers
    for (a, k), bufs in zip(phases, buffers_of, strict=True):
        for b in bufs:
            held[b] += instance.apps[a].phases[k][1] / len(bufs)
    if max(held) > instance.capacity:
        return None
    index = {phase: p for p, phase in enumerate(phases)}
    asked: dict[int, float] = {}
    for a, app in enumerate(instance.apps):
        asked[index[(a, 0)]] = app.arrival + app.phases[0][0]
    start: dict[int, float] = {}
    end: dict[int, float] = {}
    remaining = {p: instance.apps[a].phases[k][1] for p, (a, k) in enumerate(phases)}
    t, nxt = 0.0, 0
    while len(end) < len(phases):
        running = [p for p in start if p not in end]
        while nxt < len(order):
            p = order[nxt]
            load = [sum(b in buffers_of[q] for q in running) for b in buffers_of[p]]
            if p not in asked or asked[p] > t + 1e-9 or max(load) >= instance.max_colocated:
                break
            start[p] = t
            running.append(p)
            nxt += 1
        rates = {}
        for p in running:
            a = phases[p][0]
            slowest = min(
                min(stream_bw(instance.device, n), instance.link_bw / n)
                for n in (sum(b in buffers_of[q] for q in running) for b in buffers_of[p])
            )
            rate = slowest * len(buffers_of[p])
            if instance.client_bw > 0:
                rate = min(rate, instance.apps[a].nodes * instance.client_bw)
            rates[p] = rate
        events = [t + remaining[p] / rates[p] for p in running]
        events += [at for q, at in asked.items() if q not in start and at > t + 1e-9]
        if not events:
            return None  # cannot happen with a feasible model schedule; be safe
        step = min(events) - t
        t += step
        for p in running:
            remaining[p] -= rates[p] * step
            if remaining[p] <= 1e-6 * instance.apps[phases[p][0]].phases[phases[p][1]][1]:
                end[p] = t
                a, k = phases[p]
                if k + 1 < len(instance.apps[a].phases):
                    asked[index[(a, k + 1)]] = t + instance.apps[a].phases[k + 1][0]
    out = []
    for p, (a, k) in enumerate(phases):
        nbytes = instance.apps[a].phases[k][1]
        width = len(buffers_of[p])
        out.append(
            PhaseTimes(
                a,
                k,
                asked[p],
                start[p],
                end[p],
                io_alone(instance, nbytes, width, instance.apps[a].nodes),
            )
        )
    return out


def run_policies(
    instance: Instance, policies: list[str], fluid: Path, auto_objective: str | None = None
) -> dict[str, dict[str, Any]]:
    """Each policy's schedule of `instance` from harmonia-fluid, with its metrics.

    Raises RuntimeError when harmonia-fluid fails or a policy leaves a phase unscheduled.
    """
    data = instance.to_json()
    if auto_objective is not None:
        data["auto_objective"] = auto_objective
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
        path = Path(f.name)
    try:
        args = [str(fluid), str(path)]
        for policy in policies:
            args += ["--policy", policy]
        done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    finally:
        path.unlink()
    if done.returncode != 0:
        raise RuntimeError(f"harmonia-fluid failed ({done.returncode}): {done.stderr.strip()}")
    out: dict[str, dict[str, Any]] = {}
    for run in json.loads(done.stdout):
        if not run["complete"]:
            raise RuntimeError(f"{run['policy']}: left phases unscheduled")
        times = [
            PhaseTimes(p["app"], p["index"], p["requested"], p["granted"], p["end"], p["io_alone"])
            for p in run["phases"]
        ]
        out[run["policy"]] = {
            "metrics": metrics(instance, times),
            "phases": [asdict(t) for t in times],
        }
    return out
