"""The simulator against closed-form times for single-application and symmetric cases."""

import itertools
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_support import (
    HDD_SLOPE,
    SSD_SLOPE,
    RunSim,
    app,
    efficiency,
    scenario,
    sim_command,
)

GB = 1e9
SSD_WRITE = 500e6


@pytest.mark.parametrize(
    "policy", ["datawarp", "max-bandwidth", "max-buffer-efficiency"]
)
def test_single_phase_is_disk_bound_on_all_buffers(
    run_sim: RunSim, policy: str
) -> None:
    # 10 GB over 4 buffers: each device writes 2.5 GB alone at 500 MB/s * e(1); the network
    # (4 nodes x 1.25 GB/s out, 1.25 GB/s into each buffer) needs only 2 s.
    result = run_sim(scenario([app("a", [(5.0, 10 * GB)])]), policy)
    io = 2.5 * GB / (SSD_WRITE * efficiency(SSD_SLOPE, 1))
    (phase,) = result["phases"]
    assert phase["buffers"] == [0, 1, 2, 3]
    assert phase["granted"] == pytest.approx(5.0)
    assert phase["io"] == pytest.approx(io, rel=1e-6)
    assert phase["io_alone"] == pytest.approx(io, rel=1e-6)
    (a,) = result["apps"]
    assert a["completion"] == pytest.approx(5.0 + io, rel=1e-6)
    assert a["compute"] == pytest.approx(5.0, rel=1e-6)
    assert a["interference_factor"] == pytest.approx(1.0, rel=1e-6)


def test_network_bound_phase_uses_link_bandwidth(run_sim: RunSim) -> None:
    # One node: its 1.25 GB/s link is slower than four SSDs together (1.9 GB/s).
    result = run_sim(scenario([app("a", [(0.0, 10 * GB)], nodes=1)]), "datawarp")
    assert result["phases"][0]["io"] == pytest.approx(10 * GB / 1.25e9, rel=1e-6)


def test_colocated_phases_share_the_device_curve(run_sim: RunSim) -> None:
    # DataWarp puts both phases on all four buffers at once: two streams per device.
    apps = [app("a", [(0.0, 8 * GB)]), app("b", [(0.0, 8 * GB)])]
    result = run_sim(scenario(apps), "datawarp")
    per_stream = SSD_WRITE * efficiency(SSD_SLOPE, 2) / 2
    for phase in result["phases"]:
        assert phase["io"] == pytest.approx(2 * GB / per_stream, rel=1e-6)
    i_f = 2 * efficiency(SSD_SLOPE, 1) / efficiency(SSD_SLOPE, 2)
    assert result["metrics"]["avg_interference_factor"] == pytest.approx(i_f, rel=1e-6)


def test_everything_written_is_drained(run_sim: RunSim) -> None:
    apps = [app("a", [(1.0, 6 * GB), (30.0, 6 * GB)]), app("b", [(2.0, 4 * GB)])]
    for policy in ["datawarp", "min-stall", "fairness", "priority"]:
        result = run_sim(scenario(apps), policy)
        drained = sum(d["bytes"] for d in result["drains"])
        assert drained == pytest.approx(16 * GB, rel=1e-9), policy
        assert (
            max(d["end"] for d in result["drains"]) >= result["metrics"]["makespan"]
        ), policy


def test_datawarp_queues_jobs_until_stage_out_completes(run_sim: RunSim) -> None:
    # 400 GB of buffers, two jobs of 300 GB: the second starts after the first is staged out.
    apps = [app("a", [(0.0, 300 * GB)]), app("b", [(0.0, 300 * GB)])]
    result = run_sim(scenario(apps), "datawarp")
    a, b = result["apps"]
    assert a["start"] == 0.0
    stage_out_a = max(d["end"] for d in result["drains"] if d["start"] < b["start"])
    assert b["start"] == pytest.approx(stage_out_a)
    assert b["wait"] >= b["start"] > a["end"]


def test_same_seed_gives_identical_bytes(simulator: Path, tmp_path: Path) -> None:
    doc = scenario(
        [app(f"x{i}", [(float(i), 5 * GB), (10.0, 5 * GB)], nodes=2) for i in range(5)]
    )
    src = tmp_path / "s.json"
    src.write_text(json.dumps(doc))
    outputs = []
    for k in range(2):
        out = tmp_path / f"r{k}.json"
        subprocess.run(sim_command(simulator, src, "min-stall", out), check=True)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["buffers"].pop("capacity"), "buffers.capacity: missing"),
        (lambda d: d["apps"][0]["phases"][0].update(size=-1), "apps[0].phases[0].size"),
        (lambda d: d["buffers"].update(device="tape"), "devices.tape"),
        (
            lambda d: d["scheduler"].update(max_running_apps=-1),
            "scheduler.max_running_apps",
        ),
        (lambda d: d["platform"].update(compute_nodes=2), "platform.compute_nodes"),
        (
            lambda d: d["platform"].update(
                network="fat-tree",
                fat_tree={
                    "levels": 2,
                    "down": [2, 4],
                    "up": [1, 2],
                    "link_count": [1, 1],
                },
            ),
            "platform.fat_tree.down: the tree has 8 leaves, the scenario needs 28",
        ),
    ],
)
def test_bad_input_names_the_key_and_writes_nothing(
    simulator: Path, tmp_path: Path, mutate: object, message: str
) -> None:
    doc = scenario([app("a", [(0.0, GB)])])
    mutate(doc)  # type: ignore[operator]
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    done = subprocess.run(
        [
            str(simulator),
            "--scenario",
            str(src),
            "--policy",
            "fairness",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert not out.exists()


def test_fat_tree_uplink_is_the_bottleneck(run_sim: RunSim) -> None:
    # Two-level tree, 4 leaves per edge switch, one uplink each: the application's 4 nodes sit
    # under edge switch 0 and the 4 buffers under edge switch 1, so all 10 GB cross one 1.25 GB/s
    # uplink (slower than the 4 SSDs' 1.9 GB/s): 8 s instead of the switch's disk-bound 5.2 s.
    tree = {"levels": 2, "down": [4, 3], "up": [1, 1], "link_count": [1, 1]}
    platform = {
        "network": "fat-tree",
        "link_bw": 1.25e9,
        "compute_nodes": 4,
        "fat_tree": tree,
    }
    doc = scenario(
        [app("a", [(0.0, 10 * GB)])],
        platform=platform,
        pfs={"servers": 4, "device": "hdd"},
    )
    result = run_sim(doc, "max-bandwidth")
    assert result["phases"][0]["io"] == pytest.approx(10 * GB / 1.25e9, rel=1e-6)
    assert sum(d["bytes"] for d in result["drains"]) == pytest.approx(10 * GB, rel=1e-9)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**12)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(path=st.lists(st.sampled_from(["platform", "buffers", "pfs", "scheduler", "apps", 0, "phases",
                                      "devices", "ssd", "size", "compute", "fat_tree"]), min_size=1,
                     max_size=4),
       value=JSON_VALUES)  # fmt: skip
def test_any_malformed_scenario_is_rejected_cleanly(
    simulator: Path, tmp_path: Path, path: list[object], value: object
) -> None:
    # Replace one node of a valid scenario with arbitrary JSON: the simulator either runs or exits
    # 2 with a message, never crashes, and never leaves a partial results file.
    doc: object = scenario([app("a", [(0.0, 1e9)])])
    node = doc
    for key in path[:-1]:
        if (
            isinstance(node, dict)
            and isinstance(key, str)
            and key in node
            or isinstance(node, list)
            and isinstance(key, int)
            and key < len(node)
        ):
            node = node[key]
    last = path[-1]
    if (
        isinstance(node, dict)
        and isinstance(last, str)
        or isinstance(node, list)
        and isinstance(last, int)
        and last < len(node)
    ):
        node[last] = value
    src = tmp_path / "fuzzed.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [str(simulator), "--scenario", str(src), "--policy", "min-stall", "--out", str(out)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode in (0, 2), done.stderr
    if done.returncode == 2:
        assert done.stderr.startswith("harmonia-sim: ") and not out.exists()
    else:
        json.loads(out.read_text())


def test_admission_limit_makes_the_rest_wait_until_one_ends(run_sim: RunSim) -> None:
    # Three jobs at once under max-buffer-efficiency: by default (the paper's two at once) the
    # third starts when the first one ends; with the limit off all three start at 0.
    apps = [app(name, [(10.0, 4 * GB), (10.0, 4 * GB)]) for name in "abc"]
    limited = run_sim(scenario(apps), "max-buffer-efficiency")
    starts = sorted(a["start"] for a in limited["apps"])
    ends = sorted(a["end"] for a in limited["apps"])
    assert starts[:2] == [0.0, 0.0]
    assert starts[2] == pytest.approx(ends[0])
    unlimited = run_sim(
        scenario(apps, scheduler={"max_colocated": 3, "max_running_apps": 0}),
        "max-buffer-efficiency",
    )
    assert [a["start"] for a in unlimited["apps"]] == [0.0, 0.0, 0.0]
    one = run_sim(
        scenario(apps, scheduler={"max_colocated": 3, "max_running_apps": 1}),
        "fairness",
    )
    spans = sorted((a["start"], a["end"]) for a in one["apps"])
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start == pytest.approx(end), "one job at a time"


@pytest.mark.parametrize("ahead", [True, False])
def test_read_phase_is_staged_in_from_the_pfs_then_read_from_the_buffers(
    run_sim: RunSim, ahead: bool
) -> None:
    # fair-share stages 8 GB in on all four buffers: each of the 8 HDD servers reads 0.25 GB for
    # each buffer, four streams on its disk (1 GB at 115 MB/s * e_hdd(4)); links and SSDs are
    # faster. Announced when the 30 s computation begins, it is done before the read is requested;
    # announced with the request, the read waits for all of it. The read then moves 2 GB per
    # buffer off its SSD at 550 MB/s * e_ssd(1).
    phases = [{"compute": 30.0, "size": 8 * GB, "op": "read"}]
    sc = scenario([{"name": "a", "nodes": 4, "phases": phases}])
    sc["scheduler"]["prefetch_ahead"] = ahead
    result = run_sim(sc, "fair-share")
    stage_in = 1 * GB / (115e6 * efficiency(HDD_SLOPE, 4))
    (prefetch,) = result["prefetches"]
    assert prefetch["start"] == pytest.approx(0.0 if ahead else 30.0)
    assert prefetch["end"] - prefetch["start"] == pytest.approx(stage_in, rel=1e-6)
    (phase,) = result["phases"]
    assert phase["op"] == "read"
    assert phase["wait"] == pytest.approx(
        0.0 if ahead else stage_in, rel=1e-6, abs=1e-9
    )
    assert phase["io"] == pytest.approx(
        2 * GB / (550e6 * efficiency(SSD_SLOPE, 1)), rel=1e-6
    )
    assert result["drains"] == []  # a copy of PFS data is not written back
