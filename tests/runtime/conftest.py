"""Fixtures for libharmonia tests: run programs with and without the library and compare."""

import importlib
import importlib.util
import pwd
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from bbio_support import DRIVER, LIBRARY, RECOVER, Compare, Run, preload, run_driver
from harmonia.buffers.cluster import BufferCluster, ClusterSettings
from modes_support import Modes
from users_support import made_users, why_no_users


@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    for path in (LIBRARY, DRIVER, RECOVER):
        if not path.is_file():
            pytest.skip(f"not built: {path}")


@pytest.fixture(scope="module")
def pb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[types.ModuleType]:
    """control.proto's Python classes, made by protoc for the tests that speak the protocol."""
    if (
        shutil.which("protoc") is None
        or importlib.util.find_spec("google.protobuf") is None
    ):
        pytest.skip(
            "needs protoc and the protobuf Python package to speak the protocol"
        )
    out = tmp_path_factory.mktemp("pb")
    proto = Path(__file__).resolve().parents[2] / "src" / "control"
    subprocess.run(
        ["protoc", f"-I{proto}", f"--python_out={out}", str(proto / "control.proto")],
        check=True,
    )
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("control_pb2")
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def ordinary_user() -> Iterator[pwd.struct_passwd]:
    """A user of the test's own, as a site's jobs run (the daemons stay root)."""
    why = why_no_users()
    if why:
        pytest.skip(why)
    with made_users("w") as made:
        yield made["w"]


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory every user can pass through (pytest's own are root's, mode 0700)."""
    where = Path(tempfile.mkdtemp(prefix="harmonia-reachable-"))
    where.chmod(0o711)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def stage_dir(tmp_path: Path) -> Path:
    path = tmp_path / "stage"
    path.mkdir()
    return path


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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BufferCluster]:
    """A scheduler and two buffer nodes for a module's tests in buffer mode."""
    settings = ClusterSettings(tmp_path_factory.mktemp("cluster"), buffers=2,
                               capacity=256 << 20, flush_threshold=0.5)  # fmt: skip
    with BufferCluster(settings) as running:
        yield running


@pytest.fixture
def modes(tmp_path: Path, request: pytest.FixtureRequest) -> Modes:
    return Modes(tmp_path, request)
