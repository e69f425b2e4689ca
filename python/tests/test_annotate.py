"""`harmonia annotate`: pragma markers become libharmonia calls, with correct line numbers, and a
program compiled through the wrapper reports its declared phases at run time."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.phases.annotate import AnnotateError, annotate
from harmonia.simulator import BUILD_TREE

LIBRARY = BUILD_TREE / "src" / "runtime" / "bbio" / "libharmonia.so"

PROGRAM = """#include <stdio.h>
int main(void) {
  FILE* f = fopen(OUTPUT, "w");
  for (int step = 0; step < 2; ++step) {
    #pragma harmonia io_begin(checkpoint, 4096)
    for (int i = 0; i < 4096; ++i) fputc('x', f);
    fflush(f);
    #pragma harmonia io_end
  }
  fclose(f);
  return 0;
}
"""


def test_markers_become_calls_and_keep_line_numbers() -> None:
    result = annotate(PROGRAM, "prog.c")
    assert result.markers == 2
    lines = result.text.splitlines()
    assert lines[0] == "#include <harmonia/bbio.h>"
    assert lines[1] == '#line 1 "prog.c"'
    body = lines[2:]
    assert body[4].strip() == 'harmonia_io_begin("checkpoint", 4096);'
    assert body[7].strip() == "harmonia_io_end();"
    assert len(body) == len(PROGRAM.splitlines())
    quoted = annotate('#pragma harmonia io_begin("dump \\"a\\"")\n', "q.c").text
    assert 'harmonia_io_begin("dump \\"a\\"", 0);' in quoted
    assert annotate("int x;\n", "none.c").text == "int x;\n"


def test_unknown_marker_names_file_and_line() -> None:
    with pytest.raises(
        AnnotateError, match=r"bad.c:2: unknown marker '#pragma harmonia io_start\(x\)'"
    ):
        annotate("int a;\n#pragma harmonia io_start(x)\n", "bad.c")
    runner = CliRunner()
    result = runner.invoke(app, ["annotate", "/nonexistent.c"])
    assert result.exit_code == 2 and "cannot read" in result.output


def test_compiler_wrapper_builds_a_program_that_reports_its_phases(tmp_path: Path) -> None:
    if not LIBRARY.is_file() or not shutil.which("cc"):
        pytest.skip("needs libharmonia.so and a C compiler")
    source = tmp_path / "prog.c"
    source.write_text(PROGRAM)
    binary = tmp_path / "prog"
    output = tmp_path / "out.txt"
    wrap = [sys.executable, "-m", "harmonia", "annotate", "--cc", "--"]
    compile_ = subprocess.run(
        [*wrap, "cc", f'-DOUTPUT="{output}"', str(source), "-o", str(binary),
         f"-L{LIBRARY.parent}", "-lharmonia", f"-Wl,-rpath,{LIBRARY.parent}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert compile_.returncode == 0, compile_.stderr
    trace = tmp_path / "trace.jsonl"
    run = subprocess.run(
        [str(binary)], env={**os.environ, "HARMONIA_PHASE_TRACE": str(trace)}, check=False
    )
    assert run.returncode == 0
    assert output.read_text() == "x" * 8192
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    declared = [(e["event"], e["name"]) for e in events if e["event"] in ("begin", "end")]
    assert declared == [("begin", "checkpoint"), ("end", "checkpoint")] * 2
    # The same I/O is also seen by the runtime detector.
    assert any(e["event"] == "phase" and e["bytes_written"] == 8192 for e in events)


def test_compiler_errors_pass_through(tmp_path: Path) -> None:
    if not shutil.which("cc"):
        pytest.skip("needs a C compiler")
    source = tmp_path / "broken.c"
    source.write_text("int main(void) {\n#pragma harmonia io_end\n  return undefined_name;\n}\n")
    result = subprocess.run(
        [sys.executable, "-m", "harmonia", "annotate", "--cc", "--", "cc", "-c", str(source),
         "-o", str(tmp_path / "b.o")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert f"{source}:3" in result.stderr, "the error points at the original file and line"
