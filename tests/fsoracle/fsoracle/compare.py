"""What a run must agree on with the oracle, and how differences are reported.

Compared, line by line: every call's result and errno (errno also after calls that succeed),
the bytes every read saw, the stat fields (type, mode with its set-user-ID, set-group-ID and
sticky bits, size of files and links, link count, owner, group) and the times a program set
itself; then the tree the run left, read after it ended: the same fields
and every file's bytes, and which names of one tree share an inode. Not compared: descriptor
numbers (the executor names descriptors, the library may hold numbers of its own), inode numbers
themselves (a file system may give a deleted file's number to a new file at any time), a
directory's size (how the file system lays out entries), st_blocks (allocation), ctime, and
times the clock set (a time before 2010 is one the program set; any later one is the clock's,
and then the run must show a clock time too, not a set one)."""

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fsoracle.harness import Outcome

#: Times before 2010-01-01 can only be ones the program set with utimensat or futimens.
CLOCK_BEGINS = 1_262_304_000


@dataclass(frozen=True)
class Difference:
    """One field in which a run differs from the oracle."""

    mode: str
    user: str
    index: (
        int  # line of the sequence; -1: the tree after the run; -2: how the run ended
    )
    call: str  # the line of the sequence (or the path, for the tree)
    field: str
    expected: Any
    got: Any

    def __str__(self) -> str:
        where = {-1: "tree after the run", -2: "the run"}.get(
            self.index, f"line {self.index}"
        )
        return (f"{self.mode}/{self.user}: {where} `{self.call}`: {self.field}: expected "
                f"{self.expected!r}, got {self.got!r}")  # fmt: skip


def when(stamp: list[int]) -> str:
    sec, nsec = stamp
    return f"{sec}.{nsec:09d}" if sec < CLOCK_BEGINS else "clock"


def digest(content: bytes) -> str:
    return f"{len(content)} bytes, sha256 {hashlib.sha256(content).hexdigest()[:16]}"


def normal_stat(st: dict[str, Any], inodes: dict[int, int] | None) -> dict[str, Any]:
    """Times become the time a program set, or `clock`; a directory's size is dropped; the
    inode number becomes its order of appearance in `inodes` (one tree listing), or is dropped:
    only which names of one listing share an inode is compared, since a file system may give
    a deleted file's number to a new file at any time."""
    out = dict(st)
    number = int(out.pop("ino"))
    if inodes is not None:
        out["ino"] = inodes.setdefault(number, len(inodes))
    out["mtime"] = when(st["mtime"])
    out["atime"] = when(st["atime"])
    if out.get("type") == "d":
        out.pop("size", None)
    return out


def normal_line(line: dict[str, Any]) -> dict[str, Any]:
    out = dict(line)
    if "st" in out:
        out["st"] = normal_stat(out["st"], None)
    if "entries" in out:
        inodes: dict[int, int] = {}
        out["entries"] = {
            e["path"]: {**{k: v for k, v in e.items() if k not in ("path", "st")},
                        **normal_stat(e["st"], inodes)}
            for e in out["entries"]
        }  # fmt: skip
    return out


def normal_tree(tree: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    inodes: dict[int, int] = {}
    out = {}
    for path, entry in tree.items():
        normal = normal_stat(entry, inodes)
        if "content" in normal:
            normal["content"] = digest(normal["content"])
        out[path] = normal
    return out


def normalized(
    outcome: Outcome,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    return [normal_line(line) for line in outcome.lines], normal_tree(outcome.tree)


def compare_fields(
    expected: dict[str, Any], got: dict[str, Any], prefix: str = ""
) -> Iterator[tuple[str, Any, Any]]:
    for key in sorted(set(expected) | set(got)):
        a, b = expected.get(key, "absent"), got.get(key, "absent")
        if isinstance(a, dict) and isinstance(b, dict):
            yield from compare_fields(a, b, f"{prefix}{key}.")
        elif a != b:
            yield f"{prefix}{key}", a, b


def differences(sequence: list[str], oracle: Outcome, run: Outcome, mode: str,
                user: str) -> list[Difference]:  # fmt: skip
    """Every field in which `run` differs from `oracle`."""
    found: list[Difference] = []
    expected_lines, expected_tree = normalized(oracle)
    got_lines, got_tree = normalized(run)
    for index in range(max(len(expected_lines), len(got_lines))):
        call = sequence[index] if index < len(sequence) else "(none)"
        a = expected_lines[index] if index < len(expected_lines) else {"line": "absent"}
        b = got_lines[index] if index < len(got_lines) else {"line": "absent"}
        for name, x, y in compare_fields(a, b):
            found.append(Difference(mode, user, index, call, name, x, y))
    for path in sorted(set(expected_tree) | set(got_tree)):
        if path not in got_tree or path not in expected_tree:
            found.append(Difference(mode, user, -1, path, "entry",
                                    expected_tree.get(path, "absent"),
                                    got_tree.get(path, "absent")))  # fmt: skip
            continue
        for name, x, y in compare_fields(expected_tree[path], got_tree[path]):
            found.append(Difference(mode, user, -1, path, name, x, y))
    if run.status != oracle.status:
        found.append(Difference(mode, user, -2, "exit status", "status", oracle.status,
                                run.status))  # fmt: skip
    if run.stderr.strip() != oracle.stderr.strip():
        found.append(Difference(mode, user, -2, "stderr", "stderr", oracle.stderr.strip(),
                                run.stderr.strip()))  # fmt: skip
    return found
