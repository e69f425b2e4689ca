"""munged daemons of the project's own (scripts/munged.sh) for the tests that authenticate with
MUNGE: each with a key of its own, in a directory every user can reach."""

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MUNGED = Path(__file__).resolve().parents[2] / "scripts" / "munged.sh"


@contextmanager
def munged(prefix: str, count: int = 1) -> Iterator[list[str]]:
    """`count` munged daemons, each with a key of its own (one's credentials do not decode at
    another), in a new directory named from `prefix`; their sockets. Stopped and removed
    afterwards."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o711)  # other users' clients pass through to the sockets
    places = [base / f"munged{k}" for k in range(count)]
    try:
        sockets = []
        for where in places:
            started = subprocess.run([str(MUNGED), "start", str(where)], capture_output=True,
                                     text=True, check=False)  # fmt: skip
            assert started.returncode == 0, started.stderr
            sockets.append(started.stdout.strip())
        yield sockets
    finally:
        for where in places:  # stop is harmless where start failed or never ran
            subprocess.run([str(MUNGED), "stop", str(where)], check=False)
        shutil.rmtree(base, ignore_errors=True)
