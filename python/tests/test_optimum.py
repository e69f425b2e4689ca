"""The CP-SAT model of the whole problem (harmonia.optimum.model): each constraint matters, and
on instances its time line represents exactly it is at least as good as every policy's schedule
from the policy core (harmonia-fluid)."""

import pytest

from harmonia.optimum.model import (
    MB,
    AppSpec,
    Instance,
    PhaseTimes,
    io_alone,
    metrics,
    retime,
    run_policies,
    solve,
    stream_bw,
)
from harmonia.simulator import find_tool

GBS = 1e9


def two_writers_on_one_buffer(capacity: float, max_colocated: int) -> Instance:
    """Two applications each write 8 GB at t = 0 to one SSD buffer."""
    apps = [AppSpec(0.0, [(0.0, 8 * GBS)]), AppSpec(0.0, [(0.0, 8 * GBS)])]
    return Instance(apps, buffers=1, capacity=capacity, max_colocated=max_colocated)


def test_metrics_of_a_schedule() -> None:
    inst = Instance([AppSpec(0.0, [(0.0, 1.0)]), AppSpec(10.0, [(0.0, 1.0)])])
    phases = [PhaseTimes(0, 0, 0.0, 0.0, 10.0, 10.0), PhaseTimes(1, 0, 10.0, 10.0, 40.0, 10.0)]
    got = metrics(inst, phases)
    assert got["makespan"] == 40.0
    assert got["mean_completion"] == (10.0 + 30.0) / 2
    assert got["stall"] == (0.0 + 20.0) / 2  # the second took 30 s for 10 s of I/O
    assert got["slowdown"] == (1.0 + 3.0) / 2


def test_capacity_is_a_constraint() -> None:
    # 10 GB of room: the second 8 GB phase waits for the first's data to drain.
    inst = two_writers_on_one_buffer(10 * GBS, max_colocated=2)
    kept = solve(inst, "makespan", horizon=100, slots=20)
    dropped = solve(inst, "makespan", horizon=100, slots=20, drop="capacity")
    assert kept.status == dropped.status == "OPTIMAL"
    assert dropped.value < kept.value


def test_colocation_limit_is_a_constraint() -> None:
    # X = 1 serialises the two phases; without X they share the buffer, which the SSD's curve
    # makes (slightly) faster in aggregate, so the makespan drops.
    inst = two_writers_on_one_buffer(100 * GBS, max_colocated=1)
    kept = solve(inst, "makespan", horizon=60, slots=60)
    dropped = solve(inst, "makespan", horizon=60, slots=60, drop="colocation")
    assert dropped.value < kept.value
    assert kept.phases[0].end != kept.phases[1].end  # one after the other


def test_interference_is_a_constraint() -> None:
    # Sharing the buffer costs each phase its share of the curve; without interference both
    # would write at the speed of one stream alone.
    inst = two_writers_on_one_buffer(100 * GBS, max_colocated=2)
    kept = solve(inst, "makespan", horizon=60, slots=60)
    dropped = solve(inst, "makespan", horizon=60, slots=60, drop="interference")
    assert dropped.value < kept.value * 0.6


def test_unknown_objective_is_refused() -> None:
    with pytest.raises(ValueError, match="objective"):
        solve(two_writers_on_one_buffer(GBS, 1), "throughput", horizon=10)


def exact_instance(seed: int) -> Instance:
    """One window (every phase asked at t = 0) on one exclusive buffer (X = 1), each phase a
    whole number of the model's 2 s slots at the rate of one stream: the model's time line
    represents the policies' schedules exactly (to the rounding of the rate)."""
    per_slot = int(2.0 * stream_bw(Instance([]).device, 1) / MB) * MB
    sizes = [(3 + (seed * 7 + k * 3) % 5) * per_slot for k in range(3)]
    apps = [AppSpec(0.0, [(0.0, size)]) for size in sizes]
    return Instance(apps, buffers=1, capacity=1000 * GBS, max_colocated=1, seed=seed)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_optimum_is_at_least_as_good_as_every_policy_where_exact(seed: int) -> None:
    fluid = find_tool("harmonia-fluid", "HARMONIA_FLUID", "src/tools/harmonia-fluid")
    inst = exact_instance(seed)
    policies = ["max-bandwidth", "min-stall", "fairness", "max-buffer-efficiency", "priority",
                "fair-share", "io-sets", "themisio-job"]  # fmt: skip
    runs = run_policies(inst, policies, fluid)
    horizon = 60.0  # 30 slots of 2 s: the serial schedule of at most 21 slots fits
    rounding = 1e-2 * len(inst.apps)  # the model's per-slot rate is rounded down to 1 MB
    for objective in ("makespan", "mean_completion", "stall", "slowdown"):
        best = solve(inst, objective, horizon=horizon, slots=30)
        assert best.status == "OPTIMAL"
        for policy in policies:
            value = runs[policy]["metrics"][objective]
            assert best.value <= value + rounding, (objective, policy, best.value, value)
    # Shortest first is optimal for the mean completion on one exclusive buffer: the model finds
    # it and max-bandwidth's random order does not have to.
    sizes = sorted(app.phases[0][1] for app in inst.apps)
    alone = [io_alone(inst, s, 1) for s in sizes]
    spt = sum(sum(alone[: k + 1]) for k in range(len(alone))) / len(alone)
    assert solve(inst, "mean_completion", horizon=horizon, slots=30).value == pytest.approx(
        spt, abs=rounding
    )


def test_model_rates_match_the_core() -> None:
    fluid = find_tool("harmonia-fluid", "HARMONIA_FLUID", "src/tools/harmonia-fluid")
    inst = Instance([AppSpec(0.0, [(0.0, 5 * GBS)])], buffers=2, max_colocated=1)
    run = run_policies(inst, ["fair-share"], fluid)["fair-share"]
    assert run["phases"][0]["io_alone"] == pytest.approx(io_alone(inst, 5 * GBS, 2), rel=1e-9)


def test_retime_plays_the_decisions_in_continuous_time() -> None:
    # Two 8 GB phases on one buffer, the second after the first (X = 1): back to back at the
    # rate of one stream; the second application's second phase follows its 5 s of compute.
    inst = Instance(
        [AppSpec(0.0, [(0.0, 8 * GBS)]), AppSpec(0.0, [(0.0, 8 * GBS), (5.0, 4 * GBS)])],
        buffers=1,
        max_colocated=1,
    )
    bw = stream_bw(inst.device, 1)
    times = retime(inst, [(0, 0), (1, 0), (1, 1)], [[0], [0], [0]], [1, 0, 2])
    assert times is not None
    by_phase = {(p.app, p.index): p for p in times}
    assert by_phase[(1, 0)].end == pytest.approx(8 * GBS / bw)
    assert by_phase[(0, 0)].start == pytest.approx(8 * GBS / bw)  # waits its turn in the order
    assert by_phase[(0, 0)].end == pytest.approx(16 * GBS / bw)
    assert by_phase[(1, 1)].requested == pytest.approx(8 * GBS / bw + 5)
    assert by_phase[(1, 1)].end == pytest.approx(20 * GBS / bw)
    # More than the buffer holds without a drain: no continuous schedule is claimed.
    small = Instance(inst.apps, buffers=1, capacity=10 * GBS, max_colocated=1)
    assert retime(small, [(0, 0), (1, 0), (1, 1)], [[0], [0], [0]], [1, 0, 2]) is None


def test_gaps_are_relative_except_stall_and_skip_unproven_optima() -> None:
    from harmonia.optimum.experiment import SeedResult, gaps, markdown

    def seed(status: str) -> SeedResult:
        optimum = {
            "makespan": {"value": 100.0, "status": status, "seconds": 1.0},
            "mean_completion": {"value": 50.0, "status": status, "seconds": 1.0},
            "stall": {"value": 0.0, "status": status, "seconds": 1.0},
            "slowdown": {"value": 1.0, "status": status, "seconds": 1.0},
        }
        values = {"p": {"makespan": 110.0, "mean_completion": 50.0, "stall": 4.0, "slowdown": 1.5}}
        return SeedResult(1, {}, values, optimum)

    got = gaps([seed("OPTIMAL"), seed("FEASIBLE")])
    assert got["p"]["makespan"] == [pytest.approx(10.0)]
    assert got["p"]["mean_completion"] == [pytest.approx(0.0)]
    assert got["p"]["stall"] == [4.0]  # seconds: the optimum's stall is 0
    assert got["p"]["slowdown"] == [pytest.approx(50.0)]
    assert "| *optimum proven* | 1/2 | 1/2 | 1/2 | 1/2 |" in markdown([seed("OPTIMAL"), seed("X")])
