"""Darshan import (harmonia.darshan_import, `harmonia import-darshan`) and imported workloads.

The five real logs live beside the repository in shared/traces/darshan/; the tests that need them
are skipped when that directory is absent. Expected numbers come from pydarshan calls made here,
not from the importer's code path.
"""

import json
import os
import shutil
import signal
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import BASE_SCENARIO, EXAMPLES
from typer.testing import CliRunner

from harmonia import darshan_import
from harmonia.cli.main import app
from harmonia.darshan_import import (
    HEATMAP_TOLERANCE,
    MIN_GAP,
    SHARED_LOGS,
    DarshanImportError,
    Imported,
    Segments,
    _in_child,
    default_gap,
    group_phases,
    heatmap_agrees,
    import_log,
    rescale_to,
    size_histogram,
    workload_toml,
    write_workload,
)
from harmonia.darshan_layers import lack_label
from harmonia.scenario import ScenarioError, load_scenario, load_workload, normalize
from harmonia.simulator import SimulatorNotFound, find_simulator

LOGS = SHARED_LOGS
LOG_NAMES = [
    "ior-posix_16p_aurora",
    "lammps-periodic-dump_1p_dxt",
    "mpi-io-test_32p_dxt",
    "openpmd-8-bench_1024p_cori_dxt",
    "vpic-hdf5_192p_summit_dxt",
]
needs_logs = pytest.mark.skipif(
    not LOGS.is_dir(), reason=f"the shared Darshan logs are not at {LOGS}"
)


def log_path(name: str) -> Path:
    return LOGS / f"{name}.darshan"


@cache
def imported(name: str) -> Imported:
    """Each log is imported once for the whole module: the import is the slow part."""
    return import_log(log_path(name))


@cache
def pydarshan_facts(name: str, module: str = "POSIX") -> dict[str, Any]:
    """What pydarshan itself reports for a log, read the way its documentation shows."""
    import darshan  # type: ignore[import-untyped]

    prefix = module.replace("-", "")
    with darshan.DarshanReport(str(log_path(name)), read_all=False) as report:
        job = report.metadata["job"]
        report.mod_read_all_records(module)
        counters = report.records[module].to_df()["counters"]
        facts: dict[str, Any] = {
            "ranks": job["nprocs"],
            "run_time": job["run_time"],
            "written": int(counters[f"{prefix}_BYTES_WRITTEN"].sum()),
            "read": int(counters[f"{prefix}_BYTES_READ"].sum()),
        }
        if module == "POSIX":
            for op in ("WRITE", "READ"):
                facts[f"{op}S"] = int(counters[f"POSIX_{op}S"].sum())
                facts[f"SIZE_{op}"] = {
                    column.removeprefix(f"POSIX_SIZE_{op}_"): int(counters[column].sum())
                    for column in counters.columns
                    if column.startswith(f"POSIX_SIZE_{op}_") and counters[column].sum()
                }
    return facts


def phase_totals(result: Imported, op: str, key: str = "size") -> int:
    return sum(getattr(p, key) for a in result.workload.apps for p in a.phases if p.op == op)


# --- every shared log, against pydarshan -------------------------------------------------------


@needs_logs
@pytest.mark.parametrize("name", LOG_NAMES)
def test_import_matches_what_pydarshan_reports(name: str) -> None:
    result = imported(name)
    facts = pydarshan_facts(name)
    (application,) = result.workload.apps
    assert application.ranks == facts["ranks"]
    assert application.run_time == pytest.approx(facts["run_time"])
    assert application.bytes_written == facts["written"]
    assert application.bytes_read == facts["read"]
    assert phase_totals(result, "write") == facts["written"]
    assert phase_totals(result, "read") == facts["read"]


@needs_logs
@pytest.mark.parametrize("name", LOG_NAMES)
def test_requests_and_sizes_match_the_posix_counters(name: str) -> None:
    result = imported(name)
    facts = pydarshan_facts(name)
    for op in ("write", "read"):
        upper = op.upper()
        assert phase_totals(result, op, "requests") == facts[f"{upper}S"]
        histogram: dict[str, int] = {}
        for phase in result.workload.apps[0].phases:
            if phase.op == op:
                for bucket, count in phase.request_histogram.items():
                    histogram[bucket] = histogram.get(bucket, 0) + count
        assert histogram == facts[f"SIZE_{upper}"]


# Phases each log yields with the default gap rule (docs/darshan.md has the table).
EXPECTED_PHASES = {
    "ior-posix_16p_aurora": ("heatmap", ["write", "read"]),
    "lammps-periodic-dump_1p_dxt": ("DXT", ["read"] + ["write"] * 11),
    "mpi-io-test_32p_dxt": ("DXT", ["write", "read"]),
    "openpmd-8-bench_1024p_cori_dxt": ("DXT", ["write", "read"]),
    "vpic-hdf5_192p_summit_dxt": ("DXT", ["write"] * 3 + ["read", "write"] * 2),
}


@needs_logs
@pytest.mark.parametrize("name", LOG_NAMES)
def test_phases_of_each_log(name: str) -> None:
    result = imported(name)
    timing, ops = EXPECTED_PHASES[name]
    info = result.workload.workload
    assert info.timing == timing
    assert info.gap_threshold == default_gap(result.workload.apps[0].run_time)
    phases = result.workload.apps[0].phases
    assert [p.op for p in phases] == ops
    previous_end = 0.0
    for phase in phases:
        assert phase.compute == pytest.approx(max(0.0, phase.start - previous_end), abs=2e-6)
        previous_end = max(previous_end, phase.start + phase.duration)
        assert phase.size > 0 and phase.requests > 0 and phase.file_count >= 1
    assert previous_end <= result.workload.apps[0].run_time
    labels = [lack_label(lack) for lack in info.lacks]
    assert ("no DXT" in labels) == (timing != "DXT")
    assert "STDIO not imported" in labels  # every shared log has some STDIO output


@needs_logs
def test_the_gaps_that_separate_lammps_dumps() -> None:
    phases = imported("lammps-periodic-dump_1p_dxt").workload.apps[0].phases
    dumps = [p for p in phases if p.op == "write"]
    # 11 dumps about 2.4 s apart: the compute between them is what the log shows.
    assert all(2.3 < p.compute < 2.4 for p in dumps[1:])
    assert all(p.files and p.files[0].endswith("lj_adios_output.bp/data.0") for p in dumps)


@needs_logs
def test_ior_without_dxt_is_timed_by_heatmap_and_counters() -> None:
    result = imported("ior-posix_16p_aurora")
    write, read = result.workload.apps[0].phases
    assert write.ranks == read.ranks == 16  # from the heatmap; the counters say rank -1
    assert write.request_histogram == read.request_histogram == {"100K_1M": 64}
    # The 0.1 s heatmap bin is narrowed to the counters' first and last access.
    assert 0.02 < write.start < write.start + write.duration < read.start < 0.06
    lacks = " ".join(result.workload.workload.lacks)
    assert "heatmap bins of 0.1 s" in lacks and "rank -1" in lacks


@needs_logs
@pytest.mark.parametrize("use_dxt", [True, False])
def test_mpiio_layer_matches_the_mpiio_counters(use_dxt: bool) -> None:
    name = "vpic-hdf5_192p_summit_dxt"
    result = import_log(log_path(name), layer="MPI-IO", use_dxt=use_dxt)
    facts = pydarshan_facts(name, "MPI-IO")
    assert phase_totals(result, "write") == facts["written"]
    assert phase_totals(result, "read") == facts["read"] == 0
    assert result.workload.workload.timing == ("DXT" if use_dxt else "counters")
    assert [p.op for p in result.workload.apps[0].phases] == ["write"] * 5


@needs_logs
def test_posix_counters_without_dxt_give_the_same_bytes_and_requests() -> None:
    name = "vpic-hdf5_192p_summit_dxt"
    result = import_log(log_path(name), use_dxt=False)
    facts = pydarshan_facts(name)
    assert result.workload.workload.timing == "counters"
    assert "DXT not used (--no-dxt)" in [lack_label(x) for x in result.workload.workload.lacks]
    assert phase_totals(result, "write") == facts["written"]
    assert phase_totals(result, "write", "requests") == facts["WRITES"]


@needs_logs
def test_stdio_layer_has_no_request_sizes() -> None:
    result = import_log(log_path("lammps-periodic-dump_1p_dxt"), layer="STDIO")
    assert phase_totals(result, "write") == 6431
    assert all(not p.request_histogram for p in result.workload.apps[0].phases)
    assert "no request sizes" in [lack_label(x) for x in result.workload.workload.lacks]


# --- fidelity: heatmap against counters, layers, zero-byte requests ---------------------------


@needs_logs
@pytest.mark.parametrize(("extra", "used"), [(3, True), (1 << 20, False)])
def test_a_heatmap_a_few_bytes_off_still_times_the_phases(
    monkeypatch: pytest.MonkeyPatch, extra: int, used: bool
) -> None:
    """IOR's heatmap, with `extra` bytes added to its first write bin: 3 bytes in 16.78 MB is
    inside the relative tolerance, 1 MiB is not. Either way the phases hold the counters' bytes."""
    real = darshan_import._heatmap_segments

    def off_by_some(heatmap: Any, by_record: Segments) -> Segments:
        binned = real(heatmap, by_record)
        binned.size[np.nonzero(binned.write)[0][0]] += extra
        return binned

    monkeypatch.setattr(darshan_import, "_heatmap_segments", off_by_some)
    result = import_log(log_path("ior-posix_16p_aurora"))
    facts = pydarshan_facts("ior-posix_16p_aurora")
    info = result.workload.workload
    assert info.timing == ("heatmap" if used else "counters")
    assert phase_totals(result, "write") == facts["written"]
    assert phase_totals(result, "read") == facts["read"]
    notes = " ".join(info.notes)
    if used:
        assert "rescaled to the counters' bytes" in notes
        assert result.workload.apps[0].phases[0].ranks == 16  # the heatmap's ranks, kept
    else:
        assert "heatmap not used" in notes


def test_heatmap_tolerance_is_relative() -> None:
    counters = {"write": 10**11, "read": 1000}
    assert heatmap_agrees({"write": 10**11 + 5, "read": 1000}, counters)
    assert not heatmap_agrees({"write": 10**11, "read": 1001}, counters)  # 1e-3 of 1000 bytes
    limit = int(HEATMAP_TOLERANCE * 10**11)
    assert heatmap_agrees({"write": 10**11 - limit, "read": 1000}, counters)
    assert not heatmap_agrees({"write": 10**11 - limit - 1, "read": 1000}, counters)


def test_rescaled_bins_add_up_to_the_counters() -> None:
    seg = segments([(0, 1, 333, True), (1, 2, 333, True), (2, 3, 334, True), (3, 4, 7, False)])
    rescale_to(seg, {"write": 1003, "read": 7})
    assert seg.bytes_of("write") == 1003 and seg.bytes_of("read") == 7
    assert sorted(seg.size[seg.write].tolist()) == [334, 334, 335]  # proportions kept


def note_starting(result: Imported, prefix: str) -> str:
    (note,) = [n for n in result.workload.workload.notes if n.startswith(prefix)]
    return note


@needs_logs
@pytest.mark.parametrize(
    ("name", "write_ratio", "read_ratio"),
    [
        ("openpmd-8-bench_1024p_cori_dxt", "1.24x", "3.10x"),
        ("mpi-io-test_32p_dxt", "1.00x", "1.00x"),
        ("vpic-hdf5_192p_summit_dxt", "1.00x", None),  # MPI-IO reads nothing: ROMIO's sieving
    ],
)
def test_write_amplification_between_layers_is_reported(
    name: str, write_ratio: str, read_ratio: str | None
) -> None:
    posix, mpiio = pydarshan_facts(name), pydarshan_facts(name, "MPI-IO")
    note = note_starting(imported(name), "write amplification between layers")
    written, read = note.split(": POSIX ", 1)[1].split("), ")
    assert f"{posix['written'] / mpiio['written']:.2f}x" == write_ratio
    assert write_ratio in written
    if read_ratio is None:
        assert mpiio["read"] == 0 and "MPI-IO none" in read
    else:
        assert f"{posix['read'] / mpiio['read']:.2f}x" == read_ratio
        assert read_ratio in read


@needs_logs
@pytest.mark.parametrize(
    "name", ["lammps-periodic-dump_1p_dxt", "vpic-hdf5_192p_summit_dxt", "mpi-io-test_32p_dxt"]
)
def test_zero_byte_requests_are_counted(name: str) -> None:
    import darshan  # type: ignore[import-untyped]

    with darshan.DarshanReport(str(log_path(name)), read_all=False) as report:
        report.mod_read_all_dxt_records("DXT_POSIX", dtype="dict")
        zero = {
            op: sum(
                1
                for record in report.records["DXT_POSIX"]
                for segment in record[f"{op}_segments"]
                if segment["length"] == 0
            )
            for op in ("write", "read")
        }
    note = note_starting(imported(name), "zero-byte requests")
    assert f"{zero['write']} of " in note.split(", ")[0]
    assert f"{zero['read']} of " in note.split(", ")[1]
    # They are requests like the others: the request totals still equal POSIX_WRITES/READS.
    assert phase_totals(imported(name), "read", "requests") == pydarshan_facts(name)["READS"]
    if name == "vpic-hdf5_192p_summit_dxt":
        assert zero == {"write": 0, "read": 751}


@needs_logs
def test_a_larger_gap_merges_phases() -> None:
    result = import_log(log_path("vpic-hdf5_192p_summit_dxt"), gap=1.0)
    assert [p.op for p in result.workload.apps[0].phases] == ["write", "read"]


# --- the grouping rule on synthetic segments ---------------------------------------------------


def segments(rows: list[tuple[float, float, int, bool]]) -> Segments:
    n = len(rows)
    return Segments(
        start=np.array([r[0] for r in rows], dtype=np.float64),
        end=np.array([r[1] for r in rows], dtype=np.float64),
        size=np.array([r[2] for r in rows], dtype=np.int64),
        write=np.array([r[3] for r in rows], dtype=np.bool_),
        rank=np.zeros(n, dtype=np.int64),
        file=np.zeros(n, dtype=np.uint64),
        requests=np.ones(n, dtype=np.float64),
        histogram=None,
    )


def test_gaps_longer_than_the_threshold_separate_phases() -> None:
    seg = segments(
        [
            (0.0, 1.0, 10, True),
            (0.5, 2.0, 10, True),  # overlaps: one busy interval 0-2
            (2.2, 2.5, 10, True),  # 0.2 s later: same phase
            (3.0, 3.1, 10, False),  # 0.5 s later: new phase
            (2.9, 3.05, 10, True),  # the write in that burst comes first
        ]
    )
    phases = group_phases(seg, gap=0.25)
    assert [(p.op, sorted(p.indices.tolist())) for p in phases] == [
        ("write", [0, 1, 2]),
        ("write", [4]),
        ("read", [3]),
    ]
    assert len(group_phases(seg, gap=0.1)) == 4  # 0-2 | 2.2-2.5 | then the burst's two phases
    assert group_phases(segments([]), gap=1.0) == []


def test_default_gap_rule() -> None:
    assert default_gap(25.0) == MIN_GAP
    assert default_gap(3600.0) == pytest.approx(3.6)


def test_size_buckets_follow_darshan() -> None:
    sizes = [0, 100, 101, 1024, 1025, 10240, 10241, 1 << 20, (1 << 20) + 1, 1 << 30, (1 << 30) + 1]
    assert size_histogram(np.array(sizes, dtype=np.int64)) == {
        "0_100": 2,
        "100_1K": 2,
        "1K_10K": 2,
        "10K_100K": 1,
        "100K_1M": 1,
        "1M_4M": 1,
        "100M_1G": 1,
        "1G_PLUS": 1,
    }


# --- errors ------------------------------------------------------------------------------------


def run_import(log: Path, out: Path) -> Any:
    return CliRunner().invoke(app, ["import-darshan", str(log), "-o", str(out)])


def assert_rejected(result: Any, log: Path, out: Path, reason: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"{log}: "), result.output
    assert reason in result.output, result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not a Darshan log"),
        (b"hello, I am a text file\n" * 10, "not a Darshan log"),
        (bytes(range(256)) * 64, "not a Darshan log"),
    ],
    ids=["empty", "text", "binary"],
)
def test_non_darshan_files_are_rejected(tmp_path: Path, content: bytes, reason: str) -> None:
    log, out = tmp_path / "x.darshan", tmp_path / "x.toml"
    log.write_bytes(content)
    assert_rejected(run_import(log, out), log, out, reason)


def test_missing_and_unreadable_paths_are_rejected(tmp_path: Path) -> None:
    out = tmp_path / "x.toml"
    assert_rejected(run_import(tmp_path / "nothing", out), tmp_path / "nothing", out, "cannot read")
    assert_rejected(run_import(tmp_path, out), tmp_path, out, "cannot read")


@needs_logs
@pytest.mark.parametrize(
    ("name", "keep", "reason"),
    [
        ("lammps-periodic-dump_1p_dxt", 100, "not a Darshan log"),  # inside the header
        ("ior-posix_16p_aurora", 2000, "file-name table cannot be read"),
        ("lammps-periodic-dump_1p_dxt", 1525, "POSIX records cannot be read"),
        ("mpi-io-test_32p_dxt", -1, "DXT_MPIIO records cannot be read"),  # the last byte only
    ],
)
def test_truncated_logs_are_rejected(tmp_path: Path, name: str, keep: int, reason: str) -> None:
    data = log_path(name).read_bytes()
    log, out = tmp_path / f"{name}.darshan", tmp_path / "out.toml"
    log.write_bytes(data[:keep])
    assert_rejected(run_import(log, out), log, out, reason)


@needs_logs
def test_an_existing_output_survives_a_failed_import(tmp_path: Path) -> None:
    log, out = tmp_path / "cut.darshan", tmp_path / "out.toml"
    log.write_bytes(log_path("mpi-io-test_32p_dxt").read_bytes()[:20000])
    out.write_text("previous content")
    result = run_import(log, out)
    assert result.exit_code == 2
    assert out.read_text() == "previous content"


def test_a_crash_while_reading_is_reported_not_fatal(tmp_path: Path) -> None:
    def crash() -> dict[str, Any]:
        os.kill(os.getpid(), signal.SIGKILL)  # SIGSEGV would also work, with a faulthandler dump
        return {}

    with pytest.raises(DarshanImportError, match=r"x\.darshan: corrupt: .* crashed .*SIGKILL"):
        _in_child(tmp_path / "x.darshan", crash)
    assert _in_child(tmp_path, lambda: {"a": [1, 2.5]}) == {"a": [1, 2.5]}
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):  # a bug, not a bad log
        _in_child(tmp_path, lambda: {"a": 1 / 0})


def test_unknown_layer_is_rejected(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["import-darshan", str(tmp_path / "x"), "--layer", "HDF5"])
    assert result.exit_code == 2
    assert "--layer: unknown layer" in result.output


# --- the CLI and the workload file -------------------------------------------------------------


@needs_logs
def test_cli_prints_a_summary_and_writes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["import-darshan", str(log_path("ior-posix_16p_aurora"))])
    assert result.exit_code == 0, result.output
    for text in ("ior", "16", "1 write, 1 read", "16.78 MB", "no DXT", "lacks: no DXT"):
        assert text in result.output
    written = tmp_path / "ior-posix_16p_aurora.toml"
    assert f"wrote {written.name} (2 phases)" in result.output
    assert load_workload(written) == imported("ior-posix_16p_aurora").workload


@needs_logs
@pytest.mark.parametrize("name", LOG_NAMES)
def test_workload_file_round_trip(tmp_path: Path, name: str) -> None:
    result = imported(name)
    out = tmp_path / "w.toml"
    write_workload(result.document, out)
    assert tomllib.loads(out.read_text()) == result.document
    assert load_workload(out) == result.workload


def test_toml_strings_are_escaped() -> None:
    document = {
        "workload": {"source": 'a "quoted"\\ name\twith\x7fcontrol\x01 and é'},
        "apps": [],
    }
    assert tomllib.loads(workload_toml(document))["workload"] == document["workload"]


# Committed example workloads and the logs they come from.
EXAMPLE_WORKLOADS = {
    "vpic-hdf5_192p_summit.workload": "vpic-hdf5_192p_summit_dxt",
    "lammps-periodic-dump_1p.workload": "lammps-periodic-dump_1p_dxt",
    "mpi-io-test_32p.workload": "mpi-io-test_32p_dxt",
}


@needs_logs
@pytest.mark.parametrize("workload", EXAMPLE_WORKLOADS)
def test_example_workloads_are_what_the_importer_writes(workload: str) -> None:
    committed = tomllib.loads((EXAMPLES / "workloads" / workload).read_text())
    fresh = json.loads(json.dumps(imported(EXAMPLE_WORKLOADS[workload]).document))
    for document in (committed, fresh):
        document["workload"].pop("imported_by")  # versions of harmonia and pydarshan
    assert committed == fresh, f"re-import with: harmonia import-darshan LOG -o {workload}"


# --- scenarios with imported workloads ---------------------------------------------------------

WORKLOAD = """\
[workload]
format = 1
source = "made-up.darshan"
layer = "POSIX"
timing = "DXT"
gap_threshold = 0.25

[[apps]]
name = "made-up"
ranks = 64
run_time = 30.0
bytes_written = 3000000000
bytes_read = 1000

[[apps.phases]]
compute = 5.0
start = 5.0
duration = 2.0
op = "write"
size = 3000000000
ranks = 64
requests = 3
request_size = 1000000000

[[apps.phases]]
compute = 0.0
start = 6.5
duration = 1.0
op = "read"
size = 1000
ranks = 1
requests = 1
request_size = 1000
"""


def imported_app(file: str, extra: str = "", name: str = "job") -> str:
    return f"""
[[apps]]
name = "{name}"
workload = "imported"
{extra}
[apps.imported]
file = "{file}"
"""


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Callable[[str], Path]:
    """Write WORKLOAD to workloads/w.toml and the given scenario beside it."""
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "w.toml").write_text(WORKLOAD)

    def write(text: str) -> Path:
        path = tmp_path / "scenario.toml"
        path.write_text(text)
        return path

    return write


def test_imported_workload_expands_into_explicit_phases(
    scenario_dir: Callable[[str], Path],
) -> None:
    text = BASE_SCENARIO + imported_app("workloads/w.toml", "instances = 2\npriority = 3")
    normalized = normalize(load_scenario(scenario_dir(text)))
    assert [a["name"] for a in normalized["apps"]] == ["job-0", "job-1"]
    for application in normalized["apps"]:
        assert application["ranks"] == 64  # from the workload file
        assert application["phases"] == [
            {"compute": 5.0, "size": 3_000_000_000, "op": "write", "priority": 3},
            {"compute": 0.0, "size": 1000, "op": "read", "priority": 3},
        ]


def test_scale_and_ranks_override(scenario_dir: Callable[[str], Path]) -> None:
    text = (
        BASE_SCENARIO
        + imported_app("workloads/w.toml", "ranks = 8")
        + "scale = 0.0001\n"
        + imported_app("workloads/w.toml", name="other")
        + "scale = 2.5\n"
    )
    apps = normalize(load_scenario(scenario_dir(text)))["apps"]
    assert apps[0]["ranks"] == 8
    assert [p["size"] for p in apps[0]["phases"]] == [300_000, 1]  # never below one byte
    assert [p["size"] for p in apps[1]["phases"]] == [7_500_000_000, 2500]


def test_example_replays_two_logs_as_concurrent_jobs() -> None:
    normalized = normalize(load_scenario(EXAMPLES / "darshan-replay.toml"))
    apps = {a["name"]: a for a in normalized["apps"]}
    assert set(apps) == {"vpic", "lammps"}
    assert apps["vpic"]["ranks"] == 192 and len(apps["vpic"]["phases"]) == 7
    vpic_bytes = sum(p["size"] for p in apps["vpic"]["phases"])
    assert vpic_bytes == 17_496_571_648 + 16_596_991_456  # the POSIX counters of the log
    assert sum(p["size"] for p in apps["lammps"]["phases"]) == 100 * (39_448_288 + 1436)


@pytest.mark.parametrize(
    ("extra_app", "expected"),
    [
        (imported_app("workloads/none.toml"), "apps[0].imported.file: no such file: "),
        (imported_app("workloads/w.toml") + "scale = 0\n", "apps[0].imported.scale: Input should"),
        (imported_app("workloads/w.toml") + "scale = 1e300\n", "apps[0].imported.scale: Input"),
        (imported_app("workloads/w.toml") + "frobnicate = 1\n", "apps[0].imported.frobnicate"),
        (
            imported_app("workloads/w.toml") + 'app = "nobody"\n',
            'apps[0].imported.app: no application "nobody" in ',
        ),
        (
            '\n[[apps]]\nname = "x"\nworkload = "synthetic"\n[apps.imported]\nfile = "w.toml"\n',
            'apps[0]: workload = "synthetic" needs [apps.synthetic] and no other workload table,'
            " found [apps.imported]",
        ),
        (
            imported_app("workloads/w.toml") + "scale = 100\n",
            "apps[0].imported: a phase of 300 GB does not fit in the buffers' total capacity",
        ),
    ],
    ids=[
        "missing-file",
        "zero-scale",
        "huge-scale",
        "unknown-key",
        "unknown-app",
        "wrong-kind",
        "too-big",
    ],
)
def test_invalid_imports_name_the_key(
    scenario_dir: Callable[[str], Path], extra_app: str, expected: str
) -> None:
    path = scenario_dir(BASE_SCENARIO + extra_app)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert any(line.startswith(f"{path}: {expected}") for line in caught.value.lines), caught.value


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("size = 1000\n", "size = 0\n", "apps[0].phases[1].size: must be > 0, got 0"),
        ("format = 1\n", "format = 2\n", "workload.format: Input should be 1"),
        ('op = "read"\n', 'op = "append"\n', "apps[0].phases[1].op: Input should be"),
        ("[[apps]]\n", "[[apps]]\nextra = true\n", "apps[0].extra: unknown key"),
    ],
)
def test_invalid_workload_files_name_the_file_and_key(
    scenario_dir: Callable[[str], Path], old: str, new: str, expected: str
) -> None:
    path = scenario_dir(BASE_SCENARIO + imported_app("workloads/w.toml"))
    workload = path.parent / "workloads" / "w.toml"
    workload.write_text(WORKLOAD.replace(old, new, 1))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert any(line.startswith(f"{workload}: {expected}") for line in caught.value.lines), (
        caught.value
    )


def test_a_file_with_several_apps_needs_app(scenario_dir: Callable[[str], Path]) -> None:
    path = scenario_dir(BASE_SCENARIO + imported_app("workloads/w.toml"))
    workload = path.parent / "workloads" / "w.toml"
    second = WORKLOAD[WORKLOAD.index("[[apps]]") :].replace('name = "made-up"', 'name = "two"')
    workload.write_text(WORKLOAD + "\n" + second)
    with pytest.raises(ScenarioError, match=r"imported\.app: .* holds 2 applications"):
        load_scenario(path)
    path.write_text(path.read_text() + 'app = "two"\n')
    assert normalize(load_scenario(path))["apps"][0]["ranks"] == 64


def test_validate_counts_imported_phases() -> None:
    result = CliRunner().invoke(app, ["validate", str(EXAMPLES / "darshan-replay.toml")])
    assert result.exit_code == 0, result.output
    assert "ok: 2 applications, 19 phases" in result.output


# --- end to end --------------------------------------------------------------------------------


def simulator_missing() -> bool:
    try:
        find_simulator()
    except SimulatorNotFound:
        return True
    return False


@pytest.mark.skipif(simulator_missing(), reason="harmonia-sim is not built")
def test_sim_runs_the_darshan_replay_example(tmp_path: Path) -> None:
    # A copy elsewhere checks that workload paths are relative to the scenario, not the cwd.
    shutil.copytree(EXAMPLES / "workloads", tmp_path / "workloads")
    scenario = shutil.copy(EXAMPLES / "darshan-replay.toml", tmp_path / "replay.toml")
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["sim", str(scenario), "--policy", "all", "--out", str(out)])
    assert result.exit_code == 0, result.output
    run = json.loads((out / "max-bandwidth.json").read_text())
    assert {a["name"]: a["bytes"] for a in run["apps"]} == {
        "vpic": 17_496_571_648 + 16_596_991_456,
        "lammps": 100 * (39_448_288 + 1436),
    }
    assert len(run["phases"]) == 19
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["policies"]) == 6
