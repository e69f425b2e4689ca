"""`harmonia phases --binary`: I/O entry points found in real executables, stripped or not."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.phases.binary import inspect

PROGRAM = """#include <stdio.h>
#include <unistd.h>
#include <fcntl.h>
int main(void) {
  FILE* f = fopen("x", "w"); fwrite("a", 1, 1, f); fclose(f);
  int fd = open("y", O_RDONLY); char b; read(fd, &b, 1); close(fd);
  return 0;
}
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not shutil.which("cc") or not shutil.which("strip"):
        pytest.skip("needs cc and strip")
    work = tmp_path_factory.mktemp("binaries")
    (work / "p.c").write_text(PROGRAM)
    plain, stripped = work / "plain", work / "stripped"
    subprocess.run(["cc", str(work / "p.c"), "-o", str(plain)], check=True)
    shutil.copy(plain, stripped)
    subprocess.run(["strip", str(stripped)], check=True)
    return plain, stripped


def test_finds_stdio_writes_and_posix_reads(programs: tuple[Path, Path]) -> None:
    plain, stripped = programs
    for binary, is_stripped in ((plain, False), (stripped, True)):
        report = inspect(binary)
        assert report.stripped is is_stripped
        assert report.calls["stdio"]["write"] == ["fwrite"]
        assert report.calls["stdio"]["open"] == ["fopen"]
        assert report.calls["posix"]["read"] == ["read"]
        assert "mpi-io" not in report.calls
        assert report.writes and report.reads
    assert "approximate" in inspect(stripped).verdict()


def test_cli_json_and_errors(programs: tuple[Path, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["phases", "--binary", str(programs[0]), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["calls"]["stdio"]["close"] == ["fclose"]
    text = tmp_path / "notes.txt"
    text.write_text("not a program")
    bad = runner.invoke(app, ["phases", "--binary", str(text)])
    assert bad.exit_code == 2 and "not an ELF" in bad.output
    missing = runner.invoke(app, ["phases", "--binary", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "no such file" in missing.output
