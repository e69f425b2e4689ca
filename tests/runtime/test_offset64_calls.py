"""Calls that programs built with 64-bit offsets make in place of the ones libharmonia wrapped
first: CPython's os.dup is fcntl64(F_DUPFD_CLOEXEC) and its os.preadv is preadv2. Staged bytes
must be seen through them as through dup and preadv."""

import os
import subprocess
import sys
from pathlib import Path

from bbio_support import preload

PROGRAM = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"AAAA")
buffer = bytearray(4)
print(os.preadv(fd, [buffer], 0), bytes(buffer).decode())
copy = os.dup(fd)
os.pwrite(copy, b"BB", 0)
os.close(copy)
os.close(fd)
"""


def test_preadv2_sees_staged_bytes_and_a_fcntl64_duplicate_shares_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **preload()},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4", "AAAA"]
    # The duplicate's write lands after the staged one, as without the library.
    assert path.read_bytes() == b"BBAA"
