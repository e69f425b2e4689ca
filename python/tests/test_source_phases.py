"""Source-mode phase detection on fixtures with known I/O loops (python/tests/data/source)."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.phases.annotate import annotate
from harmonia.phases.source import SourceError, analyze, inject
from harmonia.simulator import BUILD_TREE

FIXTURES = Path(__file__).parent / "data" / "source"
LIBRARY_DIR = BUILD_TREE / "src" / "runtime" / "bbio"

# The I/O loops of the fixtures, by file and first line (the ground truth), and their scores.
TRUTH = {
    ("writer.c", 14): 12,  # fwrite in a loop in a loop: 3 x 2^2
    ("writer.c", 23): 4,  # read in a while loop: 2 x 2
    ("writer.c", 29): 6,  # write in a loop, the unbraced body of an if
    ("dump.cpp", 6): 12,  # std::fprintf and std::fwrite in one loop
    ("dump.cpp", 13): 6,  # MPI_File_write_all in a range loop
    ("output.f90", 7): 6,  # WRITE in the time loop (the inner loop computes)
    ("output.f90", 15): 4,  # READ in a loop
}


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        h.update(str(path.relative_to(directory)).encode() + path.read_bytes())
    return h.hexdigest()


def test_finds_exactly_the_io_loops_with_their_scores() -> None:
    report = analyze(FIXTURES)
    found = {(str(b.path), b.start_line): b.score for b in report.blocks}
    assert found == TRUTH  # precision and recall 1: no compute loop, no I/O loop missed
    assert report.files == 3 and report.unparsed == []
    checkpoint = next(b for b in report.blocks if b.function == "checkpoint")
    assert checkpoint.end_line == 17
    assert [(c.name, c.kind, c.depth) for c in checkpoint.calls] == [("fwrite", "write", 2)]
    assert report.blocks[0].score >= report.blocks[-1].score, "most intensive first"


def test_min_score_filters_light_blocks() -> None:
    assert {b.score for b in analyze(FIXTURES, min_score=6).blocks} == {6, 12}


def test_inject_marks_a_copy_and_never_the_input(tmp_path: Path) -> None:
    before = digest(FIXTURES)
    out = tmp_path / "marked"
    marked = inject(analyze(FIXTURES), out)
    assert digest(FIXTURES) == before
    assert {(str(b.path), b.start_line) for b in marked} == set(TRUTH) - {("writer.c", 29)}
    writer = (out / "writer.c").read_text().splitlines()
    begin = writer.index("  #pragma harmonia io_begin(checkpoint_writer_14)")
    assert writer[begin + 1].lstrip().startswith("for (int s = 0")
    assert writer[begin + 5] == "  #pragma harmonia io_end"
    assert writer[writer.index("  if (cond)") + 1].startswith("    for (int i = 0; i < 2;"), (
        "the if body is left alone"
    )
    fortran = (out / "output.f90").read_text()
    assert "  call harmonia_io_begin('output_output_7')\n  do step = 1, 5" in fortran
    assert "  end do\n  call harmonia_io_end()\n  close(10)" in fortran
    # The C markers are what `harmonia annotate` turns into calls.
    annotated = annotate((out / "writer.c").read_text(), "writer.c")
    assert annotated.markers == 4 and 'harmonia_io_begin("checkpoint_writer_14", 0);' in (
        annotated.text
    )


def test_inject_refuses_a_non_empty_or_nested_output(tmp_path: Path) -> None:
    report = analyze(FIXTURES)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with pytest.raises(SourceError, match="not empty"):
        inject(report, tmp_path / "busy")
    copy = tmp_path / "src"
    shutil.copytree(FIXTURES, copy)
    with pytest.raises(SourceError, match="inside"):
        inject(analyze(copy), copy / "out")


def test_unparsable_files_are_skipped_and_named(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES, tmp_path / "src")
    (tmp_path / "src" / "broken.c").write_text("int main( { for (;;) \n")
    report = analyze(tmp_path / "src")
    assert [str(p) for p, _ in report.unparsed] == ["broken.c"]
    assert "broken.c:1: cannot parse it as c" in report.unparsed[0][1]
    assert len(report.blocks) == len(TRUTH)


def test_cli_table_json_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["phases", "--source", str(FIXTURES), "--json"])
    assert shown.exit_code == 0, shown.output
    blocks = json.loads(shown.output)["blocks"]
    assert len(blocks) == len(TRUTH) and blocks[0]["calls"][0]["loop_depth"] >= 1
    missing = runner.invoke(app, ["phases", "--source", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "not a directory" in missing.output
    both = runner.invoke(app, ["phases"])
    assert both.exit_code == 2 and "exactly one" in both.output
    no_out = runner.invoke(app, ["phases", "--source", str(FIXTURES), "--inject"])
    assert no_out.exit_code == 2 and "--out" in no_out.output


def test_marked_fortran_program_reports_its_phases(tmp_path: Path) -> None:
    if not shutil.which("gfortran") or not (LIBRARY_DIR / "libharmonia.so").is_file():
        pytest.skip("needs gfortran and libharmonia")
    inject(analyze(FIXTURES), tmp_path / "marked")
    program = tmp_path / "output"
    subprocess.run(
        ["gfortran", str(tmp_path / "marked" / "output.f90"), f"-L{LIBRARY_DIR}", "-lharmonia",
         "-o", str(program)],
        check=True, capture_output=True,
    )  # fmt: skip
    trace = tmp_path / "trace.jsonl"
    env = {**os.environ, "LD_LIBRARY_PATH": str(LIBRARY_DIR), "HARMONIA_PHASE_TRACE": str(trace)}
    subprocess.run([str(program)], cwd=tmp_path, env=env, check=True, timeout=60)
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    declared = [(e["event"], e["name"]) for e in events if e["event"] in ("begin", "end")]
    assert declared == [
        ("begin", "output_output_7"), ("end", "output_output_7"),
        ("begin", "output_output_15"), ("end", "output_output_15"),
    ]  # fmt: skip
