"""`harmonia netsim`: network-interference scenarios, runs of harmonia-netsim, and their results."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.network.experiment import EXPERIMENTS, Settings, select
from harmonia.network.model import PRESETS, job_sizes, load_netsim, normalize
from harmonia.simulator import BUILD_TREE

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples" / "network"
runner = CliRunner()

BINARY = Path(os.environ.get("HARMONIA_NETSIM", BUILD_TREE / "src/netsim/harmonia-netsim"))
needs_binary = pytest.mark.skipif(not BINARY.is_file(), reason="harmonia-netsim is not built")

SMALL = """\
[scenario]
name = "small"
seed = {seed}

[network]
preset = "scaled"
hop_latency = "100 ns"

[servers]
placement = "{servers}"

[jobs]
placement = "{jobs}"

[mpi]
size = "512 KiB"
interval = "100 us"
samples = 20
warmup = 5

[io]
size = "4 MiB"
interval = "1 ms"
samples = 20
warmup = 5
"""


def small(
    tmp_path: Path, seed: int = 1, servers: str = "isolated-target", jobs: str = "random-node"
) -> Path:
    path = tmp_path / f"small-{seed}-{servers}-{jobs}.toml"
    path.write_text(SMALL.format(seed=seed, servers=servers, jobs=jobs), encoding="utf-8")
    return path


def run(scenario: Path, out: Path) -> dict[str, dict]:
    result = runner.invoke(app, ["netsim", str(scenario), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return {
        p.stem: json.loads(p.read_text())
        for p in out.glob("*.json")
        if not p.stem.startswith(("config-", "perf-"))
    }


@needs_binary
def test_single_transfer_matches_closed_form(tmp_path: Path) -> None:
    # One switch, four nodes, one server: the MPI job is one pair, each sends one message.
    # Latency = size / link_bw + 2 hops x hop_latency (nothing shares a directed link).
    path = tmp_path / "one.toml"
    path.write_text(
        """
[scenario]
name = "one"
[network]
down = [4]
up = [1]
link_bw = "10 GB/s"
hop_latency = "250 ns"
[servers]
count = 1
[jobs]
io_fraction = 0.0
[mpi]
size = "1 MB"
interval = "1 ms"
jitter = 0.0
warmup = 0
samples = 1
[io]
enabled = false
size = "1 MB"
[run]
measure = ["mpi"]
""",
        encoding="utf-8",
    )
    results = run(path, tmp_path / "out")
    latency = results["baseline-mpi"]["jobs"]["mpi"]["latency"]
    expected = 1e6 / 10e9 + 2 * 250e-9
    assert latency["count"] == 2
    assert latency["min"] == pytest.approx(expected, rel=1e-9)
    assert latency["max"] == pytest.approx(expected, rel=1e-9)


@needs_binary
def test_same_seed_gives_byte_identical_results(tmp_path: Path) -> None:
    first, second, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    run(small(tmp_path), first)
    run(small(tmp_path), second)
    run(small(tmp_path, seed=2), other)
    for name in ("baseline-mpi", "baseline-io", "interference", "summary"):
        assert (first / f"{name}.json").read_bytes() == (second / f"{name}.json").read_bytes()
    assert (first / "interference.json").read_bytes() != (other / "interference.json").read_bytes()
    assert (first / "latency.png").read_bytes()[:4] == b"\x89PNG"
    assert (first / "link-load.png").is_file() and (first / "slowdown.png").is_file()


@needs_binary
@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        # Two whole leaves, in two pods, taken from the last leaf of each pod (8 leaves each).
        ("isolated-target", list(range(7 * 8, 8 * 8)) + list(range(15 * 8, 16 * 8))),
        # One server per leaf, on its last port, round-robin over the first 16 leaves.
        ("spread-target", [leaf * 8 + 7 for leaf in range(16)]),
    ],
)
def test_server_placements(tmp_path: Path, placement: str, expected: list[int]) -> None:
    results = run(small(tmp_path, servers=placement), tmp_path / placement)
    assert results["interference"]["layout"]["servers"] == expected


@needs_binary
def test_random_switch_keeps_each_leaf_to_one_job(tmp_path: Path) -> None:
    results = run(small(tmp_path, jobs="random-switch"), tmp_path / "switch")
    nodes = results["interference"]["link_load"]["levels"][0]["up"]
    mixed = 0
    for leaf in range(32):
        mpi = sum(nodes["mpi"][leaf * 8 + p][0] for p in range(8))
        io = sum(nodes["io"][leaf * 8 + p][0] for p in range(8))
        mixed += mpi > 0 and io > 0
    assert mixed <= 1  # at most the one leaf where the split falls
    # Random-node placement mixes the jobs on most leaves.
    results = run(small(tmp_path, jobs="random-node"), tmp_path / "node")
    nodes = results["interference"]["link_load"]["levels"][0]["up"]
    mixed = sum(
        sum(nodes["mpi"][leaf * 8 + p][0] for p in range(8)) > 0
        and sum(nodes["io"][leaf * 8 + p][0] for p in range(8)) > 0
        for leaf in range(32)
    )
    assert mixed > 20


@needs_binary
def test_scaled_default_slows_mpi_down(tmp_path: Path) -> None:
    run(EXAMPLES / "default.toml", tmp_path / "default")
    summary = json.loads((tmp_path / "default" / "summary.json").read_text())
    # The trend the paper reports (MPI slowed by the I/O job), smaller in a fluid model.
    assert summary["jobs"]["mpi"]["slowdown"]["mean"] > 1.05
    assert summary["jobs"]["mpi"]["slowdown"]["q3"] > 1.1
    assert 0.9 < summary["jobs"]["io"]["slowdown"]["mean"] < 1.5
    assert summary["truncated"] == []


def test_presets_and_job_sizes() -> None:
    scenario = load_netsim(EXAMPLES / "paper.toml")
    configs = normalize(scenario)
    assert list(configs) == ["baseline-mpi", "baseline-io", "interference"]
    fabric = configs["interference"]["fabric"]
    assert fabric["down"] == [18, 18, 4] and fabric["link_bw"] == 12.5e9
    assert configs["interference"]["servers"]["count"] == 72
    assert job_sizes(scenario) == (612, 612)
    assert configs["baseline-mpi"]["io"]["enabled"] is False
    assert configs["interference"]["io"]["measured"] is True
    assert PRESETS["paper"].servers == 72


@pytest.mark.parametrize("network", ["fluid", "packet"])
def test_every_experiment_builds_valid_scenarios(network: str) -> None:
    experiments = select(None, Settings.for_network("scaled", network))
    assert set(experiments) == set(EXPERIMENTS)
    for cases in experiments.values():
        for case in cases:
            for config in normalize(case.scenario()).values():
                assert config["fabric"]["model"] == network


BAD = [
    ("[network]\npreset = \"scaled\"", "preset = \"huge\"", "network.preset: Input should be"),
    ("[mpi]\nsize = \"512 KiB\"", "size = \"512 KiX\"", 'mpi.size: cannot parse size "512 KiX"'),
    ("[network]\npreset = \"scaled\"", "preset = \"scaled\"\ndown = [4]",
     "network: give either preset"),
    ("[jobs]\nplacement = \"random-node\"", "placement = \"random-node\"\ncolour = 1",
     "jobs.colour: unknown key"),
    ("[servers]\nplacement = \"isolated-target\"", "placement = \"isolated-target\"\ncount = 300",
     "servers.count: must be < the fabric's 256 nodes, got 300"),
    ("[network]\npreset = \"scaled\"", "down = [4, 4]\nup = [1, 4]",
     "servers.count: missing required key (the fabric is not a preset)"),
    ("[jobs]\nplacement = \"random-node\"", "placement = \"random-node\"\nio_fraction = 1.0",
     "jobs.io_fraction: leaves 0 MPI clients"),
    ("[network]\npreset = \"scaled\"", "preset = \"scaled\"\nmodel = \"cells\"",
     "network.model: Input should be 'fluid' or 'packet'"),
    ("[network]\npreset = \"scaled\"", "preset = \"scaled\"\npacket_size = \"1 MiB\"",
     "network.packet_size: Input should be less than or equal to 65000"),
    ("[network]\npreset = \"scaled\"", "preset = \"scaled\"\nflow_control = \"pause\"",
     "network.flow_control: Input should be 'credits' or 'none'"),
    ("[network]\npreset = \"scaled\"", "preset = \"scaled\"\nport_buffer = \"4 KiB\"",
     "network: port_buffer must hold one packet: at least packet_size + 100 bytes of headers"
     " (4196)"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "message"), BAD)
def test_bad_inputs_exit_2_and_write_nothing(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    text = SMALL.format(seed=1, servers="isolated-target", jobs="random-node")
    assert old in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(old, old.split("\n")[0] + "\n" + new, 1), encoding="utf-8")
    out = tmp_path / "out"
    result = runner.invoke(app, ["netsim", str(path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"{path}: {message}" in result.output
    assert not out.exists()


def test_missing_file_is_reported(tmp_path: Path) -> None:
    result = runner.invoke(app, ["netsim", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2
    assert "nope.toml: cannot read" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reproduce", "network", "--only", "nope"], "--only: unknown experiment 'nope'"),
        (["reproduce", "network", "--system", "huge"], '--system: unknown "huge"'),
    ],
)
def test_reproduce_network_rejects_bad_arguments(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not out.exists()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_network_example_validates(path: Path) -> None:
    assert normalize(load_netsim(path))


@needs_binary
def test_reproduce_network_writes_report_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "repro"
    args = ["reproduce", "network", "--only", "job-placement", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    assert "random-switch" in report
    # Random-switch placement: the jobs share no link, so no slowdown at all.
    assert "MPI 4 KiB / 500 us slowdown (mean), random-switch | baseline and interference" in report
    assert "| 1.00x (max 1.00x) |" in report
    assert (out / "job-placement.png").read_bytes()[:4] == b"\x89PNG"


# Two leaves of four nodes under one top switch: each leaf has a single up-link, which the
# checkpoint I/O of the leaf's clients crosses on its way to the server on the other leaf.
TWO_LEAVES = """\
[scenario]
name = "two-leaves"
seed = 3

[network]
down = [4, 2]
up = [1, 1]

[servers]
count = 1

[mpi]
size = "4 KiB"
interval = "20 us"
samples = 1000000
warmup = 1

[io]
size = "4 MiB"
interval = "0 s"
samples = 1000000
warmup = 1

[run]
measure = ["mpi"]
max_time = "1 ms"
"""


@needs_binary
def test_packet_model_runs_a_scenario_end_to_end(tmp_path: Path) -> None:
    """`--network packet` on a scenario file: the results say which model ran and that no
    queue dropped a packet, and a 4 KiB message alone takes its closed-form time over two or
    four links (handshake, one segment, the acknowledgement back; tests/netsim/packet_checks.cpp
    has the form and the checks of queueing)."""
    path = tmp_path / "two-leaves.toml"
    path.write_text(TWO_LEAVES, encoding="utf-8")
    out = tmp_path / "packet"
    result = runner.invoke(app, ["netsim", str(path), "--out", str(out), "--network", "packet"])
    assert result.exit_code == 0, result.output
    for run in ("baseline-mpi", "interference"):
        network = json.loads((out / f"{run}.json").read_text())["network"]
        assert network == {"model": "packet", "packet_size": 4096, "window": 131072,
                           "flow_control": "credits", "port_buffer": 65536,
                           "packet_drops": 0}  # fmt: skip
    alone = json.loads((out / "baseline-mpi.json").read_text())["jobs"]["mpi"]["latency"]
    # 2 h (4 + 100) ns handshake + 3 ns acknowledgement + h (331 + 100) ns segment
    # + h (3 + 100) ns acknowledgement back, h = 2 or 4 links.
    assert min(abs(alone["min"] - t) for t in (1.490e-6, 2.974e-6)) < 5e-9, alone


PAPER_MPI_CASE = """\
[scenario]
name = "paper-mpi-case"
seed = 2

[network]
preset = "paper"
model = "packet"

[jobs]
placement = "random-node"

[mpi]
size = "4 KiB"
interval = "500 us"
jitter = 0.05
samples = 1000000
warmup = 1

[io]
size = "4 MiB"
interval = "0 s"
start_spread = "1 ms"
samples = 1000000
warmup = 1

[run]
measure = ["mpi"]
max_time = "1 ms"

[output]
link_loads = false
"""


@needs_binary
def test_packet_model_wakes_every_client_on_the_papers_system(tmp_path: Path) -> None:
    """ns-3 counts whole nanoseconds and SimGrid moves its clock by ns-3's steps, which can end
    a little past the date SimGrid asked for. A client asleep on SimGrid's CPU model whose date
    the clock passed was never woken, nor any sleeper after it: on the paper's system, seed 2 of
    section 5's MPI case, every client and the run's own 1 ms limit stayed asleep from 0.754 ms
    on, and the run went on simulating transfers (past 17 ms after 15 minutes). The packet model
    sleeps on kernel timers, which fire once their date is past: the run ends at its limit."""
    path = tmp_path / "paper.toml"
    path.write_text(PAPER_MPI_CASE, encoding="utf-8")
    config = normalize(load_netsim(path))["interference"]
    config_path = tmp_path / "interference.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "out.json"
    run = subprocess.run(
        [str(BINARY), "--config", str(config_path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["stop_reason"] == "max_time"
    assert result["end_time"] == pytest.approx(1e-3)


def test_placement_report_says_when_a_job_recorded_nothing() -> None:
    """A short run can end before a slow periodic job records a transfer: the report says so
    instead of printing NaN; a measured job shows its slowdown."""
    from harmonia.network.experiment import Case, report_rows

    unmeasured = Case("job-placement", "io-random-node", {"job": "io", "placement": "random-node"},
                      {})  # fmt: skip
    measured = Case("job-placement", "mpi-random-node", {"job": "mpi", "placement": "random-node"},
                    {}, summary={"mpi": {"slowdown": {"mean": 12.5, "max": 120.0}}})  # fmt: skip
    rows = report_rows("job-placement", [unmeasured, measured])
    assert rows[0][2] == "not measured: no transfer recorded in the run"
    assert rows[1][2] == "12.50x (max 120.00x)"
    assert "nan" not in " ".join(cell for row in rows for cell in row)


def test_job_size_report_says_when_a_job_recorded_nothing() -> None:
    """The job-size rows of an I/O job that recorded nothing say so; a measured MPI job shows its
    mean slowdown alone."""
    from harmonia.network.experiment import Case, report_rows

    io = Case("job-sizes", "io", {"job": "io", "share": 0.25, "x": 2e-3}, {})
    mpi = Case("job-sizes", "mpi", {"job": "mpi", "share": 0.75, "x": "4 KiB"}, {},
               summary={"mpi": {"slowdown": {"mean": 4.28, "max": 50.0}}})  # fmt: skip
    rows = report_rows("job-sizes", [io, mpi])
    assert rows[0][2] == "not measured: no transfer recorded in the run"
    assert rows[1] == ("MPI job on 75% of nodes, 4 KiB every 500 us: slowdown (mean)", "1.6-3.2x",
                       "4.28x")  # fmt: skip


@needs_binary
@pytest.mark.parametrize(
    ("experiment", "label"),
    [("survey", "io-4MiB-10ms_mpi-4KiB-100us"), ("job-sizes", "io-25pct-128ms")],
)
def test_packet_settings_record_every_measured_job(
    tmp_path: Path, experiment: str, label: str
) -> None:
    """The packet model's short runs still record each measured job, alone and beside the other:
    a job sending every 10 ms after its warm-up, and one sending every 128 ms, whose first
    transfers count. The timings are the packet settings'; the fluid model runs them in
    seconds."""
    from dataclasses import replace

    from harmonia.network.experiment import run_cases

    settings = replace(Settings.for_network("scaled", "packet"), network="fluid")
    (case,) = [c for c in select([experiment], settings)[experiment] if c.label == label]
    run_cases(BINARY, [case], tmp_path, 2, lambda _total: None, lambda _done: None)
    for traffic in case.scenario().run.measure:
        for run_name in ("baseline", "interference"):
            latency = case.summary[traffic][run_name]["latency"]
            assert latency["count"] > 0, (traffic, run_name)
        assert case.summary[traffic]["slowdown"]["mean"] > 0


def test_survey_report_names_the_largest_measured_slowdowns() -> None:
    """A survey case that recorded nothing neither hides nor stands in for the largest measured
    slowdown, whatever its place in the grid; a traffic no case measured says so."""
    from harmonia.network.experiment import Case, report_rows

    def case(label: str, mpi: float | None) -> Case:
        summary = {"mpi": {"slowdown": {"mean": mpi}}} if mpi is not None else {}
        return Case("survey", label, {}, {}, summary=summary)

    for order in ([None, 2.0, 5.0, 3.0], [5.0, None, 2.0, 3.0], [2.0, 3.0, 5.0, None]):
        cases = [case(f"c{i}", value) for i, value in enumerate(order)]
        rows = dict((what, ours) for what, _paper, ours in report_rows("survey", cases))
        assert rows["largest MPI slowdown (mean)"] == f"5.00x (c{order.index(5.0)})"
        assert (
            rows["largest I/O slowdown (mean)"] == "not measured: no transfer recorded in the run"
        )
        assert rows["median MPI / I/O slowdown over the grid"] == "3.00x / not measured"
