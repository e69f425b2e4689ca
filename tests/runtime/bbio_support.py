"""Helpers for libharmonia tests: where the built programs are, and how to run the driver."""

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BUILD = Path(os.environ.get("HARMONIA_BUILD", "build"))
LIBRARY = BUILD / "src" / "runtime" / "bbio" / "libharmonia.so"
DRIVER = BUILD / "tests" / "runtime" / "bbio_driver"
RECOVER = BUILD / "src" / "storage" / "harmonia-recover"


@dataclass
class Run:
    lines: list[dict[str, object]]
    stderr: str
    returncode: int


def run_driver(
    path: Path,
    commands: list[str],
    env: dict[str, str] | None = None,
    check: bool = True,
) -> Run:
    done = subprocess.run(
        [str(DRIVER), str(path), *commands],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=120,
    )
    if check:
        assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return Run(lines, done.stderr, done.returncode)


def preload(**extra: str) -> dict[str, str]:
    """Environment that loads libharmonia, plus HARMONIA_* settings."""
    return {"LD_PRELOAD": str(LIBRARY.resolve()), **extra}


Compare = Callable[[list[str], dict[str, str]], tuple[Run, Run]]
