"""Real traces as the Parallel Workloads Archive ships them (docs/workloads.md, "Replaying a real
trace"): gzip, placeholder lines, unknown fields, the header's machine size, windows, the
burst-buffer request models, and the trace named from a scenario file and the command line."""

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harmonia.bakeoff.experiment import QUEUE_METRICS, make_trace_grid, queue_metrics
from harmonia.cli.main import app
from harmonia.scenario import ScenarioError, load_scenario, normalize
from harmonia.swf import SwfError, load_trace, read_swf
from harmonia.workloads import (
    KR_BUFFER_CAPACITY,
    KR_MIN_REQUEST,
    TraceSpec,
    trace_document,
    trace_scenario,
)

runner = CliRunner()
PLACEHOLDER = " ".join(["-1"] * 18)


def line(number: int, submit: float, run: float, procs: int, limit: float, user: int = 1) -> str:
    fields = [number, submit, 0, run, procs, -1, -1, procs, limit, -1, 1, user, 1, 1, 1, 1, -1, -1]
    return " ".join(str(f) for f in fields)


def write_trace(path: Path, lines: list[str], header: str = "", compress: bool = False) -> Path:
    text = "; Version: 2.2\n" + header + "\n".join(lines) + "\n"
    if compress:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A gzip trace as real logs come: a header with the machine's size, a placeholder line, a
    job with no run time, one with no processors, jobs out of submit order."""
    return write_trace(
        tmp_path / "site.swf.gz",
        [
            line(1, 1000, 600, 4, 3600),
            PLACEHOLDER,
            line(2, 1500, -1, 4, 3600),
            line(3, 1200, 300, -1, 600),
            line(5, 5000, 100, 16, 200),
            line(4, 2000, 900, 8, 1800, user=2),
            line(6, 90000, 60, 2, 100),
        ],
        header="; MaxNodes: 32\n; MaxProcs: 64\n",
        compress=True,
    )


def test_gzip_trace_skips_placeholders_and_unknown_jobs_and_says_so(shipped: Path) -> None:
    assert len(read_swf(shipped)) == 6, "the placeholder is no job"
    trace = load_trace(shipped)
    assert [j.number for j in trace.jobs] == [1, 4, 5, 6]
    assert trace.jobs[0].submit == 0.0, "the clock starts at the first job"
    assert [j.submit for j in trace.jobs] == [0.0, 1000.0, 4000.0, 89000.0]
    assert (trace.header.max_nodes, trace.header.max_procs) == (32, 64)
    assert trace.note() == (
        "site.swf.gz: 4 jobs replayed; skipped 1 placeholder lines (every field -1),"
        " 2 jobs with unknown run time or processors"
    )


def test_a_window_by_jobs_or_by_time_restarts_the_clock(shipped: Path) -> None:
    assert [j.number for j in load_trace(shipped, jobs=2).jobs] == [1, 4]
    window = load_trace(shipped, start=500, end=50000)
    assert [j.number for j in window.jobs] == [4, 5]
    assert [j.submit for j in window.jobs] == [0.0, 3000.0]
    assert "2 jobs outside the window" in window.note()
    with pytest.raises(SwfError, match="no job in the window"):
        load_trace(shipped, start=1e6)


def test_a_trace_that_is_not_gzip_or_text_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.swf.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(SwfError, match="bad.swf.gz: cannot read"):
        read_swf(bad)


def test_the_machine_is_sized_from_the_header_in_coris_proportions(shipped: Path) -> None:
    document = trace_document(TraceSpec(shipped), 1)
    assert document["platform"]["compute_nodes"] == 32
    assert document["platform"]["shared"] is True
    assert document["buffers"]["count"] == 1, "32 x 288 / 9688, rounded up"
    assert document["pfs"]["servers"] == 1
    # 64 processors on 32 nodes: 2 per node.
    assert [a["nodes"] for a in document["apps"]] == [2, 4, 8, 1]
    assert "4 jobs replayed" in document["scenario"]["description"]


def test_without_a_header_the_largest_job_sizes_the_machine(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "bare.swf", [line(1, 0, 10, 6, 60), line(2, 5, 10, 40, 60)])
    document = trace_document(TraceSpec(path), 1)
    assert document["platform"]["compute_nodes"] == 40


def test_kopanski_rzadca_requests_fit_their_machine_and_are_drawn_by_seed(
    shipped: Path,
) -> None:
    spec = TraceSpec(shipped, requests="kopanski-rzadca")
    documents = [trace_document(spec, seed) for seed in (1, 2)]
    assert documents[0]["platform"]["compute_nodes"] == 96
    assert documents[0]["buffers"]["count"] == 12
    for document in documents:
        for entry in document["apps"]:
            request = float(entry["reservation"].removesuffix(" B"))
            per_node = request / entry["nodes"]
            walltime = float(entry["walltime"].removesuffix(" s"))
            if walltime <= 120:
                assert per_node == pytest.approx(10e6)
            else:
                assert KR_MIN_REQUEST - 1 <= per_node <= KR_BUFFER_CAPACITY
            # The request is written once over the job's 1 to 10 compute phases.
            assert 1 <= len(entry["phases"]) <= 10
            assert sum(p["size"] for p in entry["phases"]) == pytest.approx(request, rel=1e-6)
    assert documents[0]["apps"] != documents[1]["apps"], "the requests are drawn by seed"


def test_kopanski_rzadca_request_distribution_has_their_mean() -> None:
    # Their fitted log-normal has a mean of 4.58 GiB per node; clamped to [100 MB, 40 GB] the
    # mean stays near it. 4,000 long jobs of 1 node.
    from harmonia.workloads import _kr_request_per_node

    rng = np.random.default_rng(7)
    draws = [_kr_request_per_node(1, 3600, rng) for _ in range(4000)]
    assert np.mean(draws) / 2**30 == pytest.approx(4.58, rel=0.1)
    assert min(draws) >= KR_MIN_REQUEST and max(draws) <= KR_BUFFER_CAPACITY


def test_jobs_larger_than_the_machine_are_left_out_and_counted(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "wide.swf", [line(1, 0, 500, 100, 600), line(2, 9, 500, 8, 600)])
    document = trace_document(TraceSpec(path, requests="kopanski-rzadca"), 1)
    assert [a["name"] for a in document["apps"]] == ["swf2"]
    assert document["scenario"]["description"].startswith(
        "wide.swf: 1 jobs replayed; skipped 1 jobs larger than the machine's 96 nodes"
    )


def test_a_scenario_file_names_the_trace_and_may_resize_the_machine(
    tmp_path: Path, shipped: Path
) -> None:
    path = tmp_path / "replay.toml"
    path.write_text(
        '[scenario]\nname = "replay"\nseed = 4\n\n'
        f'[trace]\nfile = "{shipped.name}"\njobs = 3\nrequests = "phases"\n\n'
        "[buffers]\ncount = 2\n",
        encoding="utf-8",
    )
    normalized = normalize(load_scenario(path))
    assert normalized["name"] == "replay"
    assert len(normalized["apps"]) == 3
    assert normalized["platform"]["shared"] is True
    assert normalized["platform"]["compute_nodes"] == 32
    assert normalized["buffers"]["count"] == 2, "the file's key replaces the generated one"
    reseeded = normalize(load_scenario(path, seed=5))
    assert reseeded["seed"] == 5
    assert reseeded["apps"] != normalized["apps"], "another seed draws other phases"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[[apps]]\nname = "x"\nworkload = "explicit"\n', "apps: a scenario with [trace] has no"),
        ("", "trace: "),
    ],
)
def test_a_bad_trace_scenario_names_the_key(
    tmp_path: Path, shipped: Path, extra: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    trace_file = shipped.name if extra else "missing.swf"
    path.write_text(
        f'[scenario]\nname = "bad"\n\n[trace]\nfile = "{trace_file}"\n\n{extra}', encoding="utf-8"
    )
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(path)


@pytest.mark.usefixtures("fake_simulator")
def test_sim_replays_a_trace_from_the_command_line(tmp_path: Path, shipped: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "sim",
            "--trace",
            str(shipped),
            "--trace-jobs",
            "3",
            "--policy",
            "fair-share",
            "--out",
            str(out),
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    scenario = json.loads((out / "scenario.json").read_text())
    assert len(scenario["apps"]) == 3
    assert scenario["platform"]["shared"] is True
    assert "jobs 3/3" in result.output, "the run's progress is shown"


def test_trace_options_without_a_trace_are_refused() -> None:
    result = runner.invoke(app, ["sim", "--trace-jobs", "3"])
    assert result.exit_code == 2
    assert "--trace-jobs: only with --trace" in result.stderr


def test_a_trace_grid_reports_the_batch_queue_metrics(shipped: Path) -> None:
    grid = make_trace_grid(TraceSpec(shipped), (1, 2), ("fair-share",))
    assert grid.runs == 2
    assert grid.metrics[: len(QUEUE_METRICS)] == QUEUE_METRICS
    normalized = normalize(trace_scenario(TraceSpec(shipped), 1))
    result = {
        "apps": [
            {"arrival": a["arrival"], "start": a["arrival"] + 100.0, "end": a["arrival"] + 160.0}
            for a in normalized["apps"]
        ]
    }
    metrics = queue_metrics(result)
    assert metrics["queue_wait"] == pytest.approx(100.0)
    # (100 + 60) / max(60, 600) < 1: bounded to 1.
    assert metrics["queue_bsld"] == pytest.approx(1.0)


def test_the_paper_comparison_pairs_the_seeds() -> None:
    from harmonia.bakeoff.experiment import paper_comparison

    results = {
        "KTH": {
            "slurm-easy-sjf": {"queue_wait": [100.0, 200.0], "queue_bsld": [10.0, 4.0]},
            "plan-based": {"queue_wait": [80.0, 160.0], "queue_bsld": [7.0, 2.8]},
        }
    }
    table = paper_comparison(results)
    assert "| -20.0 ± 0.0 % | -20 % |" in table, table
    assert "| -30.0 ± 0.0 % | -27 % |" in table, table
    assert paper_comparison({"mixed": {"plan-based": {}}}) == ""
