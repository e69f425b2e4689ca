"""Runs one operation sequence with the executor (fsexec) in a mode and as a user, and collects
what it printed and the tree it left: no library (the oracle), RAM staging, SSD staging
(HARMONIA_STAGE_DIR) and buffer nodes (a scheduler and two harmonia-bbd under a PFS root)."""

import ctypes
import json
import os
import pwd
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from harmonia.buffers.cluster import BufferCluster, ClusterSettings

BUILD = Path(os.environ.get("HARMONIA_BUILD", "build")).absolute()
FSEXEC = BUILD / "tests" / "fsoracle" / "fsexec"
FAULTY = BUILD / "tests" / "fsoracle" / "libfsoracle_faulty.so"
LIBRARY = BUILD / "src" / "runtime" / "bbio" / "libharmonia.so"
RECOVER = BUILD / "src" / "storage" / "harmonia-recover"
BBD = BUILD / "src" / "bbd" / "harmonia-bbd"

#: "buffers" sends every file to the buffer nodes, whatever its size (HARMONIA_SMALL_FILE=0);
#: "buffers-small" keeps the library's default, under which a small file goes to the PFS at its
#: close (docs/buffer-nodes.md, "Client").
MODES = ("plain", "ram", "disk", "buffers", "buffers-small")
#: The modes every sequence is checked in by default.
LIBRARY_MODES = ("ram", "disk", "buffers")


def through_nodes(mode: str) -> bool:
    """Whether `mode` writes through buffer nodes."""
    return mode in ("buffers", "buffers-small")


RUN_TIMEOUT = 60.0


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    @property
    def label(self) -> str:
        """`root`, or `user` for an ordinary user (whatever its name)."""
        return "root" if self.uid == 0 else "user"


def current_user() -> User:
    entry = pwd.getpwuid(os.getuid())
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid)


def ordinary_user() -> User | None:
    """`nobody`, when this process may act as it (it runs as root); None otherwise."""
    if os.getuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid)


@dataclass
class Outcome:
    """What one run printed (one JSON object per line of the sequence), the tree it left, read
    after every process exited (and, through buffer nodes, after the drain), and how it ended."""

    lines: list[dict[str, Any]]
    tree: dict[str, dict[str, Any]]
    status: int
    stderr: str


StepHook = Callable[[int, dict[str, Any], subprocess.Popen[bytes], Path], bool]
"""Called after line k's result with the running executor and the run's directory; False: stop
feeding lines (the hook killed the program)."""


def read_tree(root: Path) -> dict[str, dict[str, Any]]:
    """Every name below root with its lstat fields and, for files, their bytes (read as the
    harness's user, after the program ended)."""
    tree: dict[str, dict[str, Any]] = {}
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = Path(directory) / name
            st = path.lstat()
            entry: dict[str, Any] = {
                "type": "d" if path.is_dir() and not path.is_symlink() else "f",
                "mode": f"{st.st_mode & 0o7777:04o}",
                "size": st.st_size,
                "nlink": st.st_nlink,
                "uid": st.st_uid,
                "gid": st.st_gid,
                "ino": st.st_ino,
                "mtime": [st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9],
                "atime": [st.st_atime_ns // 10**9, st.st_atime_ns % 10**9],
            }
            if path.is_symlink():
                entry["type"] = "l"
                entry["target"] = os.readlink(path)
            elif entry["type"] == "f":
                entry["content"] = path.read_bytes()
            tree[str(path.relative_to(root))] = entry
    return tree


@dataclass
class Workspace:
    """Directories, stage directories and the buffer nodes that many runs share: a directory of
    its own under the system's temporary directory (every user can reach it), removed by close."""

    modes: tuple[str, ...] = MODES
    base: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="fsoracle-"))
    )
    cluster: BufferCluster | None = None
    runs: int = 0

    def __post_init__(self) -> None:
        self.base.chmod(0o755)
        reap_orphans(True)
        if any(through_nodes(mode) for mode in self.modes):
            directory = self.base / "c"  # short: Unix socket paths below it stay short
            directory.mkdir(mode=0o755)
            settings = ClusterSettings(directory, buffers=2, capacity=256 << 20,
                                       flush_threshold=0.5)  # fmt: skip
            self.cluster = BufferCluster(settings)
            try:
                self.cluster.start()
            except BaseException:
                self.close()  # what did start must not outlive the workspace
                raise
            self.cluster.pfs.chmod(0o755)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        reap_orphans(False)
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def fresh_directory(self, mode: str, user: User, length: int = 0) -> Path:
        """An empty directory for one run, owned by its user (through buffer nodes, under the
        PFS root); its path padded to `length` characters, so that names below it reach
        limits (108 bytes for a Unix socket) at the same depth in every mode."""
        self.runs += 1
        parent = self.cluster.pfs if through_nodes(mode) and self.cluster else self.base
        name = f"{mode}-{user.label}-{self.runs}"
        path = parent / name.ljust(length - len(str(parent)) - 1, "_")
        path.mkdir()
        os.chown(path, user.uid, user.gid)
        return path

    @staticmethod
    def stage_directory(directory: Path, user: User) -> Path:
        """The SSD staging directory of a run in `directory`: the user's own (so that staging
        stays on), beside it, new for each run (a crash's logs stay with their run)."""
        path = directory.with_name(directory.name + ".stage")
        if not path.exists():
            path.mkdir(mode=0o700)
            os.chown(path, user.uid, user.gid)
        return path

    def environment(self, mode: str, user: User, directory: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HARMONIA_") and k != "LD_PRELOAD"}  # fmt: skip
        if mode == "plain":
            return env
        env["LD_PRELOAD"] = str(LIBRARY.resolve())
        if mode == "disk":
            env["HARMONIA_STAGE_DIR"] = str(self.stage_directory(directory, user))
        if through_nodes(mode):
            assert self.cluster is not None
            env.update(self.cluster.env())
            env["HARMONIA_JOB"] = f"fsoracle-{self.runs}"
            if mode == "buffers":
                env["HARMONIA_SMALL_FILE"] = "0"
        return env

    def drain(self) -> list[str]:
        """Every buffer node writes out all it holds; the failures, if any."""
        return self.cluster.drain_all(timeout=60) if self.cluster else []

    def run(self, lines: list[str], mode: str, user: User, step: StepHook | None = None,
            after: Callable[[Path], str] | None = None, trace: bool = False,
            env: dict[str, str] | None = None) -> Outcome:  # fmt: skip
        """Runs the sequence, with `step` called after each line when given; once the program
        ended, `after` (recovery, say) runs and says what went wrong, then the tree is read.
        `trace`: results name the inode behind each descriptor (FSEXEC_TRACE_INODES); `env`:
        more environment. The run's directory is removed afterwards."""
        directory = self.fresh_directory(mode, user)
        sequence = directory.with_name(directory.name + ".seq")
        sequence.write_text("".join(line + "\n" for line in lines))
        extra = {**({"FSEXEC_TRACE_INODES": "1"} if trace else {}), **(env or {})}
        try:
            with (
                tempfile.TemporaryFile() as errors,
                self.executor(
                    directory, sequence, mode, user, step is not None, errors, extra
                ) as program,
            ):
                printed = self._feed(program, step, directory)
                status = program.wait()
                errors.seek(0)
                stderr = errors.read().decode(errors="replace")
            if after is not None:
                stderr += after(directory)
            if through_nodes(mode):
                for failure in self.drain():
                    stderr += f"\nharmonia-bbctl drain: {failure}"
            tree = read_tree(directory)
            return Outcome(printed, tree, status, stderr)
        finally:
            sequence.unlink(missing_ok=True)
            shutil.rmtree(directory, ignore_errors=True)
            shutil.rmtree(
                directory.with_name(directory.name + ".stage"), ignore_errors=True
            )

    @contextmanager
    def executor(self, directory: Path, sequence: Path, mode: str, user: User, stepping: bool,
                 errors: Any, extra: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
        command = [
            str(FSEXEC),
            *(["--step"] if stepping else []),
            str(directory),
            str(sequence),
        ]
        as_user: dict[str, Any] = {}
        if user.uid != os.getuid():
            as_user = {"user": user.uid, "group": user.gid, "extra_groups": []}
        env = {**self.environment(mode, user, directory), **extra}
        program = subprocess.Popen(
            command, stdin=subprocess.PIPE if stepping else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=errors,
            env=env,
            start_new_session=True, **as_user,
        )  # fmt: skip
        try:
            yield program
        finally:
            if program.poll() is None:
                kill_group(program)

    @staticmethod
    def _feed(program: subprocess.Popen[bytes], step: StepHook | None,
              directory: Path) -> list[dict[str, Any]]:  # fmt: skip
        """Reads the results line by line (answering each with a go-ahead when stepping); a run
        past RUN_TIMEOUT is killed, and says so in a last line."""
        assert program.stdout is not None
        source = program.stdout.fileno()
        printed: list[dict[str, Any]] = []
        pending = b""
        deadline = time.monotonic() + RUN_TIMEOUT
        feeding = step is not None
        while True:
            ready, _, _ = select.select(
                [source], [], [], max(0.0, deadline - time.monotonic())
            )
            if not ready:
                kill_group(program)
                printed.append({"timeout": RUN_TIMEOUT})
                return printed
            chunk = os.read(source, 1 << 20)
            if not chunk:
                return printed
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                printed.append(json.loads(line))
                if feeding and step is not None:
                    feeding = step(len(printed) - 1, printed[-1], program, directory)
                    if feeding:
                        assert program.stdin is not None
                        program.stdin.write(b"go\n")
                        program.stdin.flush()


def kill_group(program: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the executor and every process it started (they share its session), and
    wait until none is left, zombies included: harmonia-recover skips the logs of processes
    that still exist, and a killed worker's parent is gone, so this process (a subreaper while
    a Workspace is open) reaps it."""
    try:
        os.killpg(program.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    program.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        members = group_members(program.pid)
        if not members:
            return
        for pid, state, parent in members:
            if state == "Z" and parent == os.getpid():
                os.waitpid(pid, 0)
        time.sleep(0.005)


def group_members(group: int) -> list[tuple[int, str, int]]:
    """The processes of a process group: pid, state (Z: zombie) and parent."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group:
            members.append((int(stat.parent.name), fields[0], int(fields[1])))
    return members


def reap_orphans(on: bool) -> None:
    """Makes this process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER), or
    no longer."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
