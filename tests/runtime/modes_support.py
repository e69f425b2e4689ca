"""Running one program in each of libharmonia's modes, to compare what it sees with plain I/O:
no library ("plain"), RAM staging, SSD staging ("disk") and buffer nodes ("buffers"). The
`modes` and `cluster` fixtures are in conftest.py."""

import os
import subprocess
from pathlib import Path

import pytest
from bbio_support import preload
from buffers_support import BBD, needs
from harmonia.buffers.cluster import BufferCluster

MODES = ["ram", "disk", "buffers"]


class Modes:
    """Where a mode's files go and the environment that runs a program in it."""

    def __init__(self, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.tmp_path = tmp_path
        self.request = request

    def directory(self, mode: str, name: str = "") -> Path:
        if mode == "buffers":
            cluster: BufferCluster = self.request.getfixturevalue("cluster")
            base = cluster.pfs / f"{self.request.node.name}{name}".replace(
                "[", "-"
            ).strip("]")
        else:
            base = self.tmp_path / f"{mode}{name}"
        base.mkdir(parents=True)
        return base

    def env(self, mode: str) -> dict[str, str]:
        if mode == "plain":
            return {}
        if mode == "ram":
            return preload()
        if mode == "disk":
            stage = self.tmp_path / "stage"
            stage.mkdir(exist_ok=True)
            return preload(HARMONIA_STAGE_DIR=str(stage))
        cluster: BufferCluster = self.request.getfixturevalue("cluster")
        return {**cluster.env(), "HARMONIA_JOB": self.request.node.name}


def buffers_mark(mode: str) -> object:
    return pytest.param(mode, marks=needs(BBD)) if mode == "buffers" else mode


ALL_MODES = [buffers_mark(m) for m in MODES]


def run(
    command: list[str], env: dict[str, str], cwd: Path | None = None, stdin: str = ""
) -> str:
    done = subprocess.run(command, env={**os.environ, **env}, cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, f"{command[0]} exited {done.returncode}: {done.stderr}"
    assert "libharmonia" not in done.stderr, done.stderr
    return done.stdout


def tree_snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every file's bytes, mode and modification time, and every directory's mode."""
    out: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        key = str(path.relative_to(root))
        if path.is_symlink():
            out[key] = ("link", os.readlink(path), st.st_mtime_ns)
        elif path.is_file():
            out[key] = ("file", path.read_bytes(), oct(st.st_mode), st.st_mtime_ns)
        else:
            out[key] = ("dir", oct(st.st_mode))
    return out
