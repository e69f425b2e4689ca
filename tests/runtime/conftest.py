"""Fixtures for libharmonia tests: run programs with and without the library and compare."""

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("HARMONIA_BUILD", "build"))
LIBRARY = BUILD / "src" / "runtime" / "bbio" / "libharmonia.so"
DRIVER = BUILD / "tests" / "runtime" / "bbio_driver"
RECOVER = BUILD / "src" / "runtime" / "bbio" / "harmonia-recover"


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


@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    for path in (LIBRARY, DRIVER, RECOVER):
        if not path.is_file():
            pytest.skip(f"not built: {path}")


@pytest.fixture
def stage_dir(tmp_path: Path) -> Path:
    path = tmp_path / "stage"
    path.mkdir()
    return path


Compare = Callable[[list[str], dict[str, str]], tuple[Run, Run]]


@pytest.fixture
def compare(tmp_path: Path) -> Compare:
    """Run the same commands without and with the library on two files; assert that every call
    returned the same and that the files end up byte-identical."""

    def run(commands: list[str], env: dict[str, str]) -> tuple[Run, Run]:
        plain_file = tmp_path / "plain.bin"
        staged_file = tmp_path / "staged.bin"
        plain = run_driver(plain_file, commands)
        staged = run_driver(staged_file, commands, preload(**env))
        assert staged.stderr == ""
        assert staged.lines == plain.lines
        assert staged_file.read_bytes() == plain_file.read_bytes()
        return plain, staged

    return run
