"""`harmonia reproduce reads` on a tiny case (one repetition, two small files): the analysis job
reads a checkpoint's files with and without HARMONIA_PREFETCH through real daemons, every run's
bytes are checked, and the report, the JSON and the figure come out; a bad --only fails cleanly."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.reads.experiment import MiB, ReadCase, run_case, write_outputs
from harmonia.simulator import SimulatorNotFound, find_tool


def _missing() -> list[str]:
    missing = [] if shutil.which("mpirun") else ["mpirun (Debian: openmpi-bin)"]
    for name, variable, path in (
        ("harmonia-bbd", "HARMONIA_BBD", "src/bbd/harmonia-bbd"),
        ("harmonia-schedd", "HARMONIA_SCHEDD_BIN", "src/schedd/harmonia-schedd"),
        ("libharmonia.so", "HARMONIA_LIBRARY", "src/runtime/bbio/libharmonia.so"),
    ):
        try:
            find_tool(name, variable, path)
        except SimulatorNotFound:
            missing.append(f"{name} (not built: cmake --build build)")
    return missing


needs_daemons = pytest.mark.skipif(
    bool(_missing()), reason="the real run needs " + ", ".join(_missing())
)


@needs_daemons
def test_prefetched_reads_come_from_the_copies_staged_before_the_read(tmp_path: Path) -> None:
    case = ReadCase(requests=2, request=2 * MiB, compute=1.2, repeat=1,
                    policies=("max-bandwidth", "datawarp"))  # fmt: skip
    lines: list[str] = []
    outcome = run_case(case, tmp_path / "out", tmp_path / "devices", lines.append)
    assert len(outcome.runs) == 8 and lines[-1].startswith("[8/8] ")
    for run in outcome.runs:
        assert run.bytes_matched and run.read_bytes == case.input_bytes, run
        if run.prefetch:
            # Staged in whole during the computation, ended before the read was asked for,
            # and every byte the job read came from the copies (heartbeats during the read
            # keep the grant as it was).
            assert run.staged_bytes == case.input_bytes, run
            assert run.stage_in is not None and run.stage_in[0] < run.stage_in[1] < 0, run
            assert run.grant_wait is not None and run.grant_wait < 0.5, run
            assert run.served_bytes == case.input_bytes, run
        else:
            assert run.stage_in is None and run.grant_wait is None and run.served_bytes == 0, run
    assert sorted((r.policy, r.cache, r.prefetch) for r in outcome.runs) == sorted(
        (p, c, f) for p in case.policies for c in case.caches for f in (True, False)
    )
    files = write_outputs(outcome, tmp_path / "out")
    assert [f.name for f in files] == ["report.md", "results.json", "reads.png"]
    report = files[0].read_text()
    assert "| max-bandwidth | evicted | yes |" in report and "| datawarp | cached | no |" in report
    data = json.loads(files[1].read_text())
    assert len(data["runs"]) == 8 and all(r["bytes_matched"] for r in data["runs"])
    assert set(data["pfs_read_bw"]) == {"evicted", "cached"}
    with_prefetch = [row for row in data["summary"] if row["prefetch"]]
    assert len(with_prefetch) == 4
    assert all(row["read_seconds_vs_no_prefetch"] > 0 for row in with_prefetch)
    assert files[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "devices").exists(), "the nodes' devices are removed"


def test_an_unknown_policy_fails_before_anything_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["reproduce", "reads", "--only", "fastest", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert "--only" in result.output and "fastest" in result.output
    assert not (tmp_path / "o").exists()


def test_a_daemon_that_cannot_start_fails_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARMONIA_BBD", str(tmp_path / "no-such-harmonia-bbd"))
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["reproduce", "reads", "--repeat", "1", "--out", str(out)])
    assert result.exit_code == 1
    assert "harmonia reproduce reads:" in result.output
    assert not out.exists(), "nothing half-written"
    # The scheduler, started before the node failed, was stopped with it.
    left = [c for c in _command_lines() if str(tmp_path).encode() in c]
    assert not left, left


def _command_lines() -> list[bytes]:
    lines = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(path.read_bytes())
        except OSError:  # the process ended meanwhile
            pass
    return lines
