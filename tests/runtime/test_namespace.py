"""Names and metadata around staged writes, in every mode (RAM, SSD, buffer nodes) against plain
I/O: renames and deletions after close and while open, a second process's stat and read right
after close, times and modes set by path, errno after successful calls, unreadable paths. What
each program sees must be what it sees without the library, and so must the tree it leaves once
everything has drained (docs/staging-library.md, "Names, metadata and other processes")."""

import json
import os
import sys
from pathlib import Path

import pytest
from harmonia.buffers.cluster import BufferCluster
from modes_support import ALL_MODES, Modes, run

PROGRAMS = Path(__file__).with_name("namespace_programs.py")
SCENARIOS = [
    "rename-after-close",
    "rename-while-open",
    "atomic-save-over-a-target",
    "unlink-after-close",
    "unlink-while-open",
    "stat-right-after-close",
    "metadata-by-path-after-close",
    "errno-after-success",
    "unreadable-path",
]


def tree(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry's name, kind, bytes and mode (times differ between runs; the scenarios that
    set them report them)."""
    out: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        key = str(path.relative_to(root))
        kind = "file" if path.is_file() and not path.is_symlink() else "other"
        out[key] = (kind, path.read_bytes() if kind == "file" else b"", oct(st.st_mode))
    return out


def settled(modes: Modes, mode: str) -> None:
    """Everything the nodes hold reaches the PFS (in the other modes it is there at exit)."""
    if mode == "buffers":
        cluster: BufferCluster = modes.request.getfixturevalue("cluster")
        assert cluster.drain_all() == []


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_a_program_sees_its_names_and_metadata_as_without_the_library(
    modes: Modes, mode: str, name: str
) -> None:
    results = {}
    trees = {}
    for label in ("plain", mode):
        directory = modes.directory(label)
        env = modes.env(label)
        results[label] = json.loads(run([sys.executable, str(PROGRAMS), name, str(directory)],
                                        env))  # fmt: skip
        settled(modes, label)
        trees[label] = tree(directory)
    assert results[mode] == results["plain"]
    assert trees[mode] == trees["plain"]
    if name == "errno-after-success":
        assert all(errno_after == 4242 for _, errno_after in results["plain"].values())
    if name == "metadata-by-path-after-close":
        assert results["plain"]["private"]["mode"] == oct(0o100600)
        assert results["plain"]["timed-mtime"] == 1_500_000_000_987_654_321
    if name == "unreadable-path":
        assert results["plain"]["0"] == [-1, "EFAULT"]


def test_the_tree_is_checked_by_bytes_names_and_modes(tmp_path: Path) -> None:
    # The comparison itself must see what the scenarios change.
    (tmp_path / "a").write_bytes(b"x")
    before = tree(tmp_path)
    os.chmod(tmp_path / "a", 0o600)
    assert tree(tmp_path) != before
    os.rename(tmp_path / "a", tmp_path / "b")
    assert set(tree(tmp_path)) == {"b"}
