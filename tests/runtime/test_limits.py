"""The daemons' resource limits (docs/limits.md) and their bad arguments. Each test starts its
daemon itself and stops it; loopback and Unix sockets only."""

import subprocess
from pathlib import Path

import pytest
from bbio_support import BUILD
from schedd_support import SCHEDD

BBD = BUILD / "src" / "bbd" / "harmonia-bbd"
pytestmark = pytest.mark.skipif(
    not (BBD.is_file() and SCHEDD.is_file()), reason="the daemons are not built"
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            [BBD, "--listen", "127.0.0.1:99999"],
            "--listen 127.0.0.1:99999: port 99999 out of range",
        ),
        (
            [SCHEDD, "--tcp", "127.0.0.1:65536"],
            "tcp 127.0.0.1:65536: port 65536 out of range",
        ),
        ([SCHEDD, "--buffers", "-1"], "--buffers: Value -1 not in range"),
        ([SCHEDD, "--buffers", "100000000"], "--buffers: Value 100000000 not in range"),
        ([SCHEDD, "--pfs-servers", "0"], "--pfs-servers: Value 0 not in range"),
    ],
)
def test_bad_ports_and_counts(
    tmp_path: Path, command: list[Path | str], expected: str
) -> None:
    program, *args = command
    if program == BBD:
        args += ["--device", str(tmp_path), "--pfs", str(tmp_path)]
    else:
        args += ["--socket", str(tmp_path / "s.sock")]
    done = subprocess.run(
        [str(program), *args], capture_output=True, text=True, timeout=20, check=False
    )
    assert done.returncode != 0 and expected in done.stderr, done.stderr
    assert "bad_alloc" not in done.stderr
    assert not (tmp_path / "s.sock").exists()
