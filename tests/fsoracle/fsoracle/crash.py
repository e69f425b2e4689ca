"""Crash consistency: a sequence killed with SIGKILL at a chosen point, then recovered, must
leave a tree the program could have seen (docs/staging-library.md, "The model the tester
checks", the crash rule):

1. names: exactly the names the program had when it was killed (none it removed comes back,
   none it made is missing), with their types, modes and link targets;
2. bytes: each file's size and every byte come from the file's states between its last
   durable point and the kill (a byte may also be 0 where some such state ended before it),
   so no byte is one the program never wrote there; a file's durable point is its last
   fsync or fdatasync, the close of the writer's last descriptor of it, or its writer's
   exit, and, with SSD staging, every write that returned (the log holds it); a file written
   by two processes has none (either may lose its unsettled bytes);
3. inside a long write (killed while it runs), the state after that write counts too.

Killed are: the program (SSD staging, then `harmonia-recover`; buffer nodes, then the nodes
drain), a buffer node (killed and started again while the program goes on) and the scheduler
(likewise); after those two, the program's whole run must match the oracle, as without a
crash: acknowledged bytes are on the node's device and a close waits for a node that is down."""

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fsoracle.compare import Difference, differences, digest
from fsoracle.differential import classify
from fsoracle.generator import Draw
from fsoracle.harness import RECOVER, Outcome, User, Workspace, kill_group, read_tree
from fsoracle.known import KnownDefect

Tree = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Crash:
    """What is killed (`program`, `node` or `scheduler`), in which mode, after which line of
    the sequence; `delay` (seconds): instead, kill the program that long after the next line
    has started (inside a long write)."""

    target: str
    mode: str
    after: int
    delay: float | None = None

    def __str__(self) -> str:
        when = (f"{self.delay * 1000:.0f} ms into line {self.after + 1}" if self.delay is not None
                else f"after line {self.after}")  # fmt: skip
        return f"{self.target} killed {when} ({self.mode})"


def states(workspace: Workspace, sequence: list[str], user: User) -> tuple[list[dict[str, Any]],
                                                                           list[Tree]]:  # fmt: skip
    """The oracle's lines (with the inode behind each descriptor) and its tree after each
    line, read between two lines."""
    trees: list[Tree] = []

    def snapshot(
        index: int, line: dict[str, Any], program: Any, directory: Path
    ) -> bool:
        trees.append(read_tree(directory))
        return True

    outcome = workspace.run(sequence, "plain", user, step=snapshot, trace=True)
    return outcome.lines, trees


def recover(user: User) -> Any:
    """harmonia-recover of the user's stage directory, as that user; returns what it said
    when it failed."""

    def run(directory: Path) -> str:
        stage = Workspace.stage_directory(directory, user)
        as_user: dict[str, Any] = {}
        if user.uid != os.getuid():
            as_user = {"user": user.uid, "group": user.gid, "extra_groups": []}
        done = subprocess.run([str(RECOVER), str(stage)], capture_output=True, text=True,
                              timeout=60, check=False, **as_user)  # fmt: skip
        return (
            "" if done.returncode == 0 else f"\nharmonia-recover: {done.stderr.strip()}"
        )

    return run


def durable_points(
    lines: list[dict[str, Any]], sequence: list[str], mode: str
) -> dict[int, int]:
    """Per inode (the oracle's numbers), the last line after which its bytes are promised."""
    writers: dict[int, set[int]] = {}
    last: dict[int, int] = {}
    for index, (line, call) in enumerate(zip(lines, sequence, strict=False)):
        process, name = int(call.split()[0]), call.split()[1]
        inode = int(line.get("fino", 0))
        if (
            name in ("write", "pwrite", "writev", "pwritev", "fwrite", "ftruncate")
            and inode
        ):
            writers.setdefault(inode, set()).add(process)
            if mode == "disk" and name != "fwrite" and line.get("ret", -1) >= 0:
                last[inode] = index  # in the log before the call returned
        if mode == "disk" and name == "fflush" and inode and line.get("ret") == 0:
            last[inode] = index
        if name in ("fsync", "fdatasync") and inode and line.get("ret") == 0:
            last[inode] = index
        if name in ("close", "fclose") and inode and line.get("others") == 0:
            last[inode] = index
        if name == "exit":
            for written, by in writers.items():
                if process in by:
                    last[written] = index
    return {
        inode: (-1 if len(writers.get(inode, ())) > 1 else at)
        for inode, at in last.items()
    }


def allowed_bytes(content: bytes, history: list[bytes]) -> str | None:
    """Why `content` is not made of the history's states (None: it is)."""
    if len(content) not in {len(state) for state in history}:
        return f"size {len(content)}, never one of {sorted({len(s) for s in history})}"
    got = np.frombuffer(content, dtype=np.uint8)
    ok = np.zeros(len(got), dtype=bool)
    for state in history:
        known = np.frombuffer(state, dtype=np.uint8)[: len(got)]
        ok[: len(known)] |= got[: len(known)] == known
        ok[len(known) :] |= got[len(known) :] == 0  # a hole where this state had ended
    if not ok.all():
        first = int(np.argmin(ok))
        return f"byte {first} is {got[first]}, which no state of the file had there"
    return None


def check_crash_state(recovered: Tree, trees: list[Tree], lines: list[dict[str, Any]],
                      sequence: list[str], crash: Crash) -> list[str]:  # fmt: skip
    """The crash rule: what is wrong with the recovered tree (empty: nothing)."""
    last = crash.after + (1 if crash.delay is not None else 0)
    last = min(last, len(trees) - 1)
    candidates = [trees[crash.after], trees[last]]
    problems: list[str] = []
    names = set(recovered)
    if names not in ({*t} for t in candidates):
        expected = set(candidates[0])
        problems.append(f"names: expected {sorted(expected)}, got {sorted(names)} "
                        f"(missing {sorted(expected - names)}, extra {sorted(names - expected)})")  # fmt: skip
        return problems
    durable = durable_points(lines[: last + 1], sequence[: last + 1], crash.mode)
    for name in sorted(names):
        entry = recovered[name]
        shapes = [{k: t[name][k] for k in ("type", "mode", "target") if k in t[name]}
                  for t in candidates if name in t]  # fmt: skip
        shape = {k: entry[k] for k in ("type", "mode", "target") if k in entry}
        if shape not in shapes:
            problems.append(f"{name}: {shape}, expected {shapes[0]}")
            continue
        if entry["type"] != "f":
            continue
        inode = next(t[name]["ino"] for t in candidates if name in t)
        since = durable.get(inode, -1)
        history = [entry_of(trees[j], inode) for j in range(max(since, 0), last + 1)]
        if since < 0:
            history.insert(0, b"")
        why = allowed_bytes(entry["content"], [h for h in history if h is not None])
        if why is not None:
            problems.append(f"{name}: {digest(entry['content'])}: {why} (durable since line "
                            f"{since})")  # fmt: skip
    return problems


def entry_of(tree: Tree, inode: int) -> bytes | None:
    """The bytes of the file with that inode in a tree, under any of its names."""
    for entry in tree.values():
        if entry.get("ino") == inode and entry["type"] == "f":
            content: bytes = entry["content"]
            return content
    return None


def killer(crash: Crash, workspace: Workspace) -> Any:
    """The step hook that does the killing."""

    def step(index: int, line: dict[str, Any], program: Any, directory: Path) -> bool:
        if index != crash.after:
            return True
        if crash.target == "program":
            if crash.delay is not None:
                program.stdin.write(b"go\n")
                program.stdin.flush()
                time.sleep(crash.delay)
            kill_group(program)
            return False
        cluster = workspace.cluster
        assert cluster is not None
        if crash.target == "node":
            cluster.kill_node(0)
            cluster.start_node(0)
        else:
            assert cluster.schedd is not None
            cluster.schedd.kill()
            cluster.schedd.wait()
            cluster.start_schedd()
        return True

    return step


def check_crash(workspace: Workspace, sequence: list[str], user: User,
                crash: Crash) -> list[str] | list[Difference]:  # fmt: skip
    """Runs the sequence with the crash; the problems found (empty: none)."""
    if crash.target != "program":
        oracle = workspace.run(sequence, "plain", user)
        run = workspace.run(sequence, crash.mode, user, step=killer(crash, workspace))
        # the library says on stderr that it lost a daemon: what it should do
        return [d for d in differences(sequence, oracle, run, crash.mode, user.label)
                if d.field != "stderr"]  # fmt: skip
    lines, trees = states(workspace, sequence, user)
    after = recover(user) if crash.mode == "disk" else None
    outcome: Outcome = workspace.run(sequence, crash.mode, user, step=killer(crash, workspace),
                                     after=after)  # fmt: skip
    problems = check_crash_state(outcome.tree, trees, lines, sequence, crash)
    if "harmonia-recover:" in outcome.stderr or "drain:" in outcome.stderr:
        problems.append(outcome.stderr.strip())
    return problems


CRASHES = (("program", "disk"), ("program", "buffers"), ("node", "buffers"),
           ("scheduler", "buffers"))  # fmt: skip
LONG_WRITE = 1_000_000


@st.composite
def crashes(draw: Draw, sequence: list[str]) -> Crash:
    """A crash for a sequence: what is killed, after which line, and, before a long write,
    perhaps while it runs."""
    target, mode = draw(st.sampled_from(CRASHES))
    after = draw(st.integers(0, len(sequence) - 2))
    following = sequence[after + 1].split()
    long_write = following[1] in ("write", "pwrite") and int(following[3]) >= LONG_WRITE
    delay = None
    if target == "program" and long_write and draw(st.booleans()):
        delay = draw(st.sampled_from((0.0005, 0.002, 0.01)))
    return Crash(target, mode, after, delay)


def explained(problems: list[str] | list[Difference], crash: Crash, sequence: list[str],
              known: list[KnownDefect]) -> list[str]:  # fmt: skip
    """The problems no known defect explains."""
    if problems and isinstance(problems[0], Difference):
        _, new = classify(
            [p for p in problems if isinstance(p, Difference)], sequence, known
        )
        return [] if new is None else [str(new)]
    ran = sequence[: crash.after + 2 if crash.delay is not None else crash.after + 1]
    return [p for p in map(str, problems)
            if not any(k.explains_crash(p, crash.target, crash.mode, ran) for k in known)]  # fmt: skip
