"""Jobs that share a machine's compute nodes (`platform.shared`): they wait in the batch queue
for free nodes, run on nodes another job left, and a long run reports its progress."""

import json
import re
import subprocess
from pathlib import Path

import pytest
from sim_support import RunSim, app, scenario, sim_command

GB = 1e9


def shared(apps: list[dict[str, object]], nodes: int) -> dict[str, object]:
    doc = scenario(apps)
    doc["platform"].update(compute_nodes=nodes, shared=True)  # type: ignore[attr-defined]
    return doc


def run_simulator(
    simulator: Path, doc: dict[str, object], policy: str, out: Path
) -> subprocess.CompletedProcess[str]:
    """harmonia-sim on `doc` (written beside `out`) under `policy`, whatever its exit."""
    src = out.with_name("s.json")
    src.write_text(json.dumps(doc))
    return subprocess.run(
        sim_command(simulator, src, policy, out),
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("policy", ["fair-share", "datawarp", "slurm-easy"])
def test_jobs_wait_for_nodes_and_start_when_one_ends(
    run_sim: RunSim, policy: str
) -> None:
    # Three 2-node jobs of 100 s on a 4-node machine: two run at once, the third starts when the
    # first ends. Each writes 1 GB after its compute; nothing else contends.
    jobs = [app(f"j{k}", [(100.0, GB)], nodes=2, walltime=1000.0) for k in range(3)]
    result = run_sim(shared(jobs, 4), policy)
    apps = {a["name"]: a for a in result["apps"]}
    assert apps["j0"]["start"] == pytest.approx(0.0)
    assert apps["j1"]["start"] == pytest.approx(0.0)
    first_end = min(apps["j0"]["end"], apps["j1"]["end"])
    assert first_end > 100.0
    assert apps["j2"]["start"] == pytest.approx(first_end, abs=1e-6)
    assert apps["j2"]["wait"] >= first_end - 1e-6


def test_a_small_job_backfills_without_delaying_the_first_in_line(
    run_sim: RunSim,
) -> None:
    # 4 nodes. "wide" waits for all 4 until "long" ends (its limit: 200 s); "small" fits in the
    # 2 free nodes and ends by its limit (50 s) before then: it starts at once.
    jobs = [
        app("long", [(150.0, GB)], nodes=2, walltime=200.0),
        app("wide", [(10.0, GB)], nodes=4, walltime=100.0, arrival=1.0),
        app("small", [(20.0, GB)], nodes=2, walltime=50.0, arrival=2.0),
    ]
    result = run_sim(shared(jobs, 4), "fair-share")
    apps = {a["name"]: a for a in result["apps"]}
    assert apps["small"]["start"] == pytest.approx(2.0)
    assert apps["wide"]["start"] == pytest.approx(apps["long"]["end"], abs=1e-6)


def test_without_sharing_the_jobs_must_fit_and_all_start_at_once(
    run_sim: RunSim,
) -> None:
    jobs = [app(f"j{k}", [(100.0, GB)], nodes=2) for k in range(3)]
    result = run_sim(scenario(jobs), "fair-share")
    assert [a["start"] for a in result["apps"]] == [0.0, 0.0, 0.0]


def test_a_job_larger_than_the_machine_is_refused(
    simulator: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    doc = shared([app("huge", [(1.0, GB)], nodes=8)], 4)
    done = run_simulator(simulator, doc, "fair-share", out)
    assert done.returncode == 2
    assert "apps[0].nodes: larger than the machine" in done.stderr
    assert not out.exists()


def test_progress_reports_simulated_time_jobs_rate_and_time_left(
    simulator: Path, tmp_path: Path
) -> None:
    jobs = [app(f"j{k}", [(100.0, GB)], nodes=1, walltime=500.0) for k in range(6)]
    src = tmp_path / "s.json"
    src.write_text(json.dumps(shared(jobs, 2)))
    done = subprocess.run(
        sim_command(
            simulator, src, "fair-share", tmp_path / "r.json", "--progress", "1e-9"
        ),
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("progress:")]
    assert lines, done.stderr
    pattern = re.compile(
        r"progress: simulated (\d+) s \([\d.]+ d\), jobs (\d+)/6, [\d.]+ jobs/s, "
        r"wall [\d.]+ s, left -?\d+ s"
    )
    matches = [pattern.fullmatch(line) for line in lines]
    assert all(matches), lines
    done_counts = [int(m.group(2)) for m in matches if m]
    assert done_counts == sorted(done_counts)
    assert done_counts[-1] == 6


def test_a_stalled_run_names_the_first_stuck_job_and_what_it_waits_for(
    simulator: Path, tmp_path: Path
) -> None:
    """DataWarp stages a job's data out only when it ends: a job writing 600 GB in two phases
    to 400 GB of buffers (no extensions) can never place its second phase. The run stops with
    status 1 and says which job waits for which phase, beside how full the buffers are."""
    jobs = [
        app("fits", [(1.0, GB)], nodes=1),
        app("toobig", [(1.0, 300 * GB), (1.0, 300 * GB)], nodes=1, arrival=5.0),
    ]
    out = tmp_path / "r.json"
    done = run_simulator(simulator, shared(jobs, 4), "datawarp", out)
    assert done.returncode == 1, done.stderr
    assert "1 application(s) never finished" in done.stderr
    assert re.search(
        r"the first, toobig \(arrived at 5\.0+ s, declared 600\.0 GB, 1 node\(s\)\), holds "
        r"300\.0 GB on the buffers, its phase 1 \(300\.0 GB\) waiting since [\d.]+ s; the "
        r"buffers hold 300\.0 GB of 400\.0 GB \(0\.0 GB drainable, 0\.0 GB staged in\); toobig "
        r"holds 300\.0 GB not yet drainable \(running\)",
        done.stderr,
    ), done.stderr
    assert not out.exists()
