"""The synthetic mix generator and the bake-off (docs/workloads.md, docs/bakeoff.md)."""

import json
from pathlib import Path

import numpy as np
import pytest
from support import assert_png
from typer.testing import CliRunner

from harmonia.bakeoff.experiment import Grid, interval, run_grid, run_metrics, write_plots
from harmonia.cli.main import app
from harmonia.policies import PEERS, POLICIES, parse_policies
from harmonia.scenario import normalize
from harmonia.simulator import SimulatorNotFound, find_simulator
from harmonia.swf import SwfError, SwfJob, read_swf
from harmonia.units import parse_duration
from harmonia.workloads import GB, MixSpec, mix_document, synthetic_mix


def test_mix_is_reproducible_and_seeds_differ() -> None:
    spec = MixSpec()
    assert mix_document(spec, 7) == mix_document(spec, 7)
    assert mix_document(spec, 7)["apps"] != mix_document(spec, 8)["apps"]


def test_mix_follows_its_distributions() -> None:
    spec = MixSpec(jobs=600, mean_interarrival=30.0, users=3, nodes=(2, 4))
    apps = mix_document(spec, 1)["apps"]
    arrivals = np.array([parse_duration(a["arrival"]) for a in apps])
    gaps = np.diff(arrivals)
    assert (gaps >= 0).all()
    assert 27 < gaps.mean() < 33, "Poisson arrivals with the mean interarrival asked for"
    assert 0.85 < gaps.std() / gaps.mean() < 1.15, "exponential gaps: std = mean"
    counts = {u: sum(a["user"] == u for a in apps) for u in ("user0", "user1", "user2")}
    assert counts["user0"] > counts["user1"] > counts["user2"], "Zipf: user k weighs 1/k"
    assert {a["nodes"] for a in apps} == {2, 4}
    for a in apps:
        assert spec.phases[0] <= len(a["phases"]) <= spec.phases[1]
        for p in a["phases"]:
            assert spec.phase_size[0] - 1 <= p["size"] <= spec.phase_size[1] + 1


def test_compute_follows_the_ratio_to_the_time_slice() -> None:
    # One phase alone on 4 buffers of 500 MB/s takes size / 2 GB/s: compute is ratio x that, +-20 %.
    spec = MixSpec(jobs=50, ratio=(4.0, 4.0))
    for app_ in mix_document(spec, 3)["apps"]:
        for p in app_["phases"]:
            ratio = parse_duration(p["compute"]) / (p["size"] / 2e9)
            assert 3.19 < ratio < 4.81


def test_mix_is_a_valid_scenario_with_users_and_limits() -> None:
    normalized = normalize(synthetic_mix(MixSpec(jobs=5), 2))
    assert len(normalized["apps"]) == 5
    assert all(a["user"].startswith("user") and a["walltime"] > 0 for a in normalized["apps"])


def test_bad_mix_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="mix broken: jobs must be >= 1"):
        MixSpec(name="broken", jobs=0)
    with pytest.raises(ValueError, match="phases must fit"):
        MixSpec(name="big", phase_size=(1 * GB, 1000 * GB))


def test_interval_is_students_t() -> None:
    mean, half = interval([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.303 / np.sqrt(3))
    assert interval([5.0]) == (5.0, 0.0)


def test_run_metrics_slowdowns() -> None:
    result = {
        "metrics": {
            "buffer_efficiency": 0.5,
            "avg_phase_bandwidth": 2e8,
            "fairness": 10.0,
            "avg_stall": 3.0,
            "buffer_utilization": 0.25,
            "avg_wait": 4.0,
            "avg_completion": 50.0,
        },
        "apps": [
            {"name": "a", "compute": 40.0, "completion": 60.0},
            {"name": "b", "compute": 2.0, "completion": 6.0},
        ],
        "phases": [
            {"app": "a", "wait": 4.0, "io": 6.0, "io_alone": 5.0},
            {"app": "a", "wait": 0.0, "io": 5.0, "io_alone": 5.0},
            {"app": "b", "wait": 1.0, "io": 3.0, "io_alone": 2.0},
        ],
    }
    m = run_metrics(result)
    # a: (4 + 6 + 0 + 5) / 10 = 1.5; b: 4 / 2 = 2.
    assert m["io_slowdown"] == pytest.approx(1.75)
    # a: 60 / (40 + 10) = 1.2; b: ideal 4 s is under 10 s, so 6 / 10, raised to 1.
    assert m["bounded_slowdown"] == pytest.approx(1.1)
    assert m["utilization"] == 25.0 and m["buffer_efficiency"] == 50.0
    assert m["avg_phase_bandwidth"] == 200.0


def test_one_seed_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "b"
    result = CliRunner().invoke(app, ["reproduce", "bakeoff", "--seeds", "1", "--out", str(out)])
    assert result.exit_code == 2
    assert "--seeds" in result.output
    assert not out.exists()


def test_small_grid_runs_resumes_and_plots(tmp_path: Path) -> None:
    try:
        simulator = find_simulator()
    except SimulatorNotFound:
        pytest.skip("harmonia-sim is not built")
    grid = Grid((MixSpec(name="tiny", jobs=3, phases=(1, 2)),), (1, 2), ("datawarp", "io-sets"))
    done: list[str] = []
    results = run_grid(grid, simulator, tmp_path, 2, lambda o: done.append(o.policy))
    assert len(done) == 4
    assert set(results["tiny"]) == {"datawarp", "io-sets"}
    assert all(len(v) == 2 for v in results["tiny"]["io-sets"].values())
    first = tmp_path / "runs" / "tiny" / "seed-1" / "io-sets.json"
    stamp = first.stat().st_mtime_ns
    again = run_grid(grid, simulator, tmp_path, 2, lambda o: None)
    assert first.stat().st_mtime_ns == stamp, "an existing result is reused"
    assert again == results
    assert json.loads(first.read_text())["policy"] == "io-sets"
    for path in write_plots(results, tmp_path):
        assert_png(path)


SMALL_SWF = Path(__file__).resolve().parents[2] / "examples" / "workloads" / "small.swf"


def test_swf_trace_is_read() -> None:
    jobs = read_swf(SMALL_SWF)
    assert len(jobs) == 24
    assert jobs[0] == SwfJob(1, 5.0, 1147.0, 128, 2712.0, 1)
    assert all(b.submit >= a.submit for a, b in zip(jobs, jobs[1:], strict=False))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1 2 3", r"bad\.swf:2: 3 fields, SWF has 18"),
        ("1 0 0 10 32 -1 -1 32 60 -1 1 1 1 1 1 1 -1 x", r"bad\.swf:2: not a number"),
        ("1 -5 0 10 32 -1 -1 32 60 -1 1 1 1 1 1 1 -1 -1", r"bad\.swf:2: field 2 \(submit"),
        ("1 0 0 nan 32 -1 -1 32 60 -1 1 1 1 1 1 1 -1 -1", r"bad\.swf:2: fields must be finite"),
    ],
)
def test_bad_swf_names_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.swf"
    path.write_text("; header\n" + line + "\n", encoding="utf-8")
    with pytest.raises(SwfError, match=message):
        read_swf(path)


def test_swf_with_no_job_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.swf"
    path.write_text("; only a header\n", encoding="utf-8")
    with pytest.raises(SwfError, match="no job lines"):
        read_swf(path)


def test_trace_mix_takes_arrivals_sizes_users_and_limits_from_the_trace() -> None:
    spec = MixSpec(name="trace", jobs=5, trace=SMALL_SWF)
    jobs = read_swf(SMALL_SWF)[:5]
    apps = normalize(synthetic_mix(spec, 4))["apps"]
    assert [a["arrival"] for a in apps] == [j.submit - jobs[0].submit for j in jobs]
    assert [a["nodes"] for a in apps] == [-(-j.processors // 32) for j in jobs]
    assert [a["user"] for a in apps] == [f"user{j.user}" for j in jobs]
    assert [a["walltime"] for a in apps] == [j.requested_time for j in jobs]
    for app_, job in zip(apps, jobs, strict=True):
        # compute fills the trace's run time around the phases' I/O alone
        io_alone = sum(p["size"] / min(4 * 500e6, app_["nodes"] * 1.25e9) for p in app_["phases"])
        compute = sum(p["compute"] for p in app_["phases"])
        assert compute + io_alone == pytest.approx(job.run_time, rel=1e-3)
    assert mix_document(spec, 4) != mix_document(spec, 5), "the I/O phases are drawn by seed"


def test_policy_groups() -> None:
    assert parse_policies("all") == list(POLICIES)
    assert parse_policies("peers") == list(PEERS)
    assert parse_policies("every") == [*POLICIES, *PEERS, "auto"]
    assert parse_policies("io-sets, datawarp, io-sets") == ["io-sets", "datawarp"]
    with pytest.raises(ValueError, match='unknown policy "set-10"'):
        parse_policies("set-10")
