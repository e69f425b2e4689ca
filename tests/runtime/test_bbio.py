"""libharmonia under LD_PRELOAD: the same calls give the same results and the same file bytes as
without it, in RAM and with an on-disk log; and the data really is staged until a flush."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from bbio_support import LIBRARY, RECOVER, Compare, preload, run_driver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MODES = {
    "ram": lambda stage: {},
    "disk": lambda stage: {"HARMONIA_STAGE_DIR": str(stage)},
    "ram-tiny": lambda stage: {"HARMONIA_STAGE_SIZE": "4K"},
    "disk-tiny": lambda stage: {
        "HARMONIA_STAGE_DIR": str(stage),
        "HARMONIA_STAGE_SIZE": "4K",
    },
}


@pytest.mark.parametrize("mode", MODES)
def test_writes_seeks_and_reads_match_plain_io(
    compare: Compare, stage_dir: Path, mode: str
) -> None:
    commands = [
        "open", "rwct",
        "write", "1000", "1",
        "write", "3000", "2",
        "lseek", "100", "set",
        "write", "50", "3",        # overwrite inside staged data
        "pwrite", "200", "4", "5000",  # past the end: a hole
        "writev", "600", "5",
        "pwritev", "300", "6", "20",
        "lseek", "0", "cur",
        "lseek", "-10", "end",
        "write", "10", "7",
        "pread", "500", "50",      # sees the overwrite
        "fstat",
        "ftruncate", "2500",
        "lseek", "0", "end",
        "write", "100", "8",
        "lseek", "0", "set",
        "read", "4096",
        "fsync",
        "close",
    ]  # fmt: skip
    compare(commands, MODES[mode](stage_dir))
    assert list(stage_dir.iterdir()) == [], "logs are removed once flushed and closed"


def test_data_is_staged_until_flush(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    run = run_driver(
        path,
        ["open", "wct", "write", "8192", "1", "peek", "flush", "peek", "write", "10", "2",
         "peek", "close", "peek"],
        preload(),
    )  # fmt: skip
    sizes = [line["size"] for line in run.lines if line["op"] == "peek"]
    assert sizes == [0, 8192, 8192, 8202]


def test_a_child_in_the_parents_memory_leaves_its_files_staged(tmp_path: Path) -> None:
    # The child of clone(CLONE_VM) execs through the library's execl: the staged files it would
    # write out and forget there are its parent's, still written by the parent.
    path = tmp_path / "f.bin"
    run = run_driver(
        path,
        ["open", "wct", "write", "8192", "1", "clone-vm-exec", "peek", "write", "10", "2",
         "peek", "close", "peek"],
        preload(),
    )  # fmt: skip
    assert {"op": "clone-vm-exec", "ret": 0, "errno": 0} in run.lines
    sizes = [line["size"] for line in run.lines if line["op"] == "peek"]
    assert sizes == [0, 0, 8202], "still staged after the child's exec"
    assert run.stderr == ""


def test_append_mode_and_duplicates(compare: Compare, stage_dir: Path) -> None:
    path_setup = ["open", "wct", "write", "100", "1", "close"]
    commands = path_setup + [
        "open", "wa", "write", "50", "2", "lseek", "0", "set", "write", "25", "3",
        "lseek", "0", "cur", "dup", "write", "10", "4", "close",
    ]  # fmt: skip
    compare(commands, {"HARMONIA_STAGE_DIR": str(stage_dir)})


@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_stdio_streams(compare: Compare, stage_dir: Path, mode: str) -> None:
    commands = [
        "fopen", "w+",
        "fwrite", "5000", "1",
        "fputs", "hello stdio\n",
        "fputc", "Z",
        "fprintf", "42",
        "ftell",
        "fseek", "10",
        "fwrite", "20", "2",
        "fileno-fsync",
        "fclose",
        "fopen", "a",
        "fputs", "appended\n",
        "fclose",
    ]  # fmt: skip
    compare(commands, MODES[mode](stage_dir))


@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_exec_flushes_first_and_pipes_pass_through(
    compare: Compare, stage_dir: Path, mode: str
) -> None:
    commands = [
        "open",
        "wct",
        "pipe",
        "write",
        "3000",
        "1",
        "pwrite",
        "10",
        "2",
        "5000",
        "exec",
    ]
    compare(commands, MODES[mode](stage_dir))
    assert list(stage_dir.iterdir()) == []


def test_fork_writes_reach_the_file_exactly_once(compare: Compare) -> None:
    commands = ["open", "wct", "write", "3000", "1", "fork-write", "500", "2", "write", "70", "3",
                "close"]  # fmt: skip
    compare(commands, {})


def test_writes_of_a_child_of_a_raw_clone_reach_the_file(compare: Compare) -> None:
    # No fork wrapper or pthread_atfork handler saw this child: its copy of the library's memory
    # is its own all the same, and its exit writes out what it staged.
    compare(
        ["open", "wct", "write", "3000", "1", "clone-write", "500", "2", "close"], {}
    )


@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_threads_share_one_staged_file(
    compare: Compare, stage_dir: Path, mode: str
) -> None:
    compare(["open", "wct", "threads", "8", "65536", "close"], MODES[mode](stage_dir))


def test_exit_without_close_and_underscore_exit(
    tmp_path: Path, stage_dir: Path
) -> None:
    for ending in ([], ["_exit"]):
        plain, staged = tmp_path / "p.bin", tmp_path / "s.bin"
        commands = [
            "open",
            "wct",
            "write",
            "4096",
            "9",
            "fopen",
            "a",
            "fputs",
            "tail",
            *ending,
        ]
        run_driver(plain, commands)
        run_driver(staged, commands, preload(HARMONIA_STAGE_DIR=str(stage_dir)))
        # _exit does not flush stdio buffers: the FILE's "tail" is lost in both runs alike.
        assert staged.read_bytes() == plain.read_bytes()
        assert list(stage_dir.iterdir()) == []


def test_bad_configuration_is_reported_once_and_passes_through(tmp_path: Path) -> None:
    for env, variable in [
        ({"HARMONIA_STAGE_SIZE": "lots"}, "HARMONIA_STAGE_SIZE=lots"),
        ({"HARMONIA_STAGE_DIR": str(tmp_path / "missing")}, "HARMONIA_STAGE_DIR="),
        ({"HARMONIA_STAGE": "yes"}, "HARMONIA_STAGE=yes"),
        ({"HARMONIA_STAGE_INCLUDE": "relative/path"}, "HARMONIA_STAGE_INCLUDE"),
        (
            {"HARMONIA_SMALL_FILE": "2M"},
            "HARMONIA_SMALL_FILE=2M: expected a size from 0 to 1M",
        ),
        ({"HARMONIA_SMALL_FILE": "tiny"}, "HARMONIA_SMALL_FILE=tiny: expected a size"),
        ({"HARMONIA_NODE_WAIT": "-1"}, "HARMONIA_NODE_WAIT=-1: expected seconds"),
        ({"HARMONIA_NODE_WAIT": "soon"}, "HARMONIA_NODE_WAIT=soon: expected seconds"),
        (
            {"HARMONIA_SCHEDD_TIMEOUT": "0"},
            "HARMONIA_SCHEDD_TIMEOUT=0: expected seconds",
        ),
        ({"HARMONIA_DEBUG": "yes"}, "HARMONIA_DEBUG=yes: must be 0 or 1"),
        # The agent's settings follow the same rule (read with the rest, in config.cpp).
        ({"HARMONIA_PRIORITY": "abc"}, "HARMONIA_PRIORITY=abc: expected an integer"),
        (
            {"HARMONIA_BYTES_PER_PROCESS": "-1"},
            "HARMONIA_BYTES_PER_PROCESS=-1: expected bytes",
        ),
        ({"HARMONIA_HINT": "fast"}, "HARMONIA_HINT=fast: expected flushable or cached"),
        ({"SLURM_PROCID": "first"}, "SLURM_PROCID=first: expected a whole number"),
    ]:
        path = tmp_path / "f.bin"
        run = run_driver(
            path, ["open", "wct", "write", "100", "1", "peek", "close"], preload(**env)
        )
        assert run.stderr.count("libharmonia:") == 1, run.stderr
        assert variable in run.stderr
        assert run.lines[2] == {"op": "peek", "size": 100}, "passed straight through"
    # Every bad variable is named, each once, and staging stays off even for a stage directory.
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    run = run_driver(
        tmp_path / "g.bin",
        ["open", "wct", "write", "100", "1", "peek", "close"],
        preload(
            HARMONIA_STAGE_DIR=str(stage_dir), HARMONIA_PRIORITY="1e3", HARMONIA_HINT=""
        ),
    )
    assert run.stderr.count("libharmonia:") == 1, run.stderr
    assert "HARMONIA_PRIORITY=1e3: expected an integer" in run.stderr
    assert "staging disabled" in run.stderr
    assert run.lines[2] == {"op": "peek", "size": 100}
    run = run_driver(
        tmp_path / "h.bin",
        ["open", "wct", "write", "100", "1", "peek", "close"],
        preload(
            HARMONIA_PRIORITY="x", HARMONIA_PHASE_GAP="0", HARMONIA_STAGE_SIZE="1G"
        ),
    )
    assert run.stderr.count("libharmonia:") == 2, run.stderr
    assert "HARMONIA_PRIORITY=x" in run.stderr and "HARMONIA_PHASE_GAP=0" in run.stderr
    assert run.lines[2] == {"op": "peek", "size": 100}


def test_excluded_and_read_only_files_are_not_staged(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    run = run_driver(
        path,
        ["open", "wct", "write", "100", "1", "peek", "close"],
        preload(HARMONIA_STAGE_EXCLUDE=str(tmp_path)),
    )
    assert run.lines[2] == {"op": "peek", "size": 100}
    run = run_driver(
        path,
        ["open", "wct", "write", "100", "1", "peek", "close"],
        preload(HARMONIA_STAGE_INCLUDE="/nowhere"),
    )
    assert run.lines[2] == {"op": "peek", "size": 100}


MANY_DESCRIPTORS = r"""
import os, sys
directory = sys.argv[1]
spare = [os.open("/dev/null", os.O_RDONLY) for _ in range(500)]
for k in range(50):
    fd = os.open(f"{directory}/new{k}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"x" * 10)
    os.close(fd)
print("created", flush=True)
reader = os.open(f"{directory}/new0", os.O_RDONLY)
fd = os.open(f"{directory}/new0", os.O_WRONLY | os.O_CREAT)
os.write(fd, b"y" * 20)
print(len(os.pread(reader, 100, 0)), flush=True)
os.close(fd)
"""


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed")
def test_a_file_an_open_creates_is_staged_without_a_look_at_every_descriptor(
    tmp_path: Path,
) -> None:
    """A process holding 500 descriptors creates 50 files: no look at its descriptors (none can
    refer to a file the open created). Opening an existing file, already open for reading, looks
    once and finds the reader: that file's writes go straight to it."""
    trace = tmp_path / "trace"
    run = subprocess.run(
        ["strace", "-f", "-e", "trace=openat,write", "-o", str(trace),
         "-E", f"LD_PRELOAD={LIBRARY.resolve()}",
         sys.executable, "-c", MANY_DESCRIPTORS, str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["created", "20"]
    calls = trace.read_text().splitlines()
    created_at = next(i for i, call in enumerate(calls) if '"created' in call)
    # The first look reads the size of the descriptor table; later ones look only at what
    # changed.
    looks = [i for i, call in enumerate(calls) if '"/proc/self/status"' in call]
    assert looks and all(i > created_at for i in looks), "no look while creating files"
    assert len(looks) == 1, "one look when an existing file is opened for writing"
    for k in range(1, 50):
        assert (tmp_path / f"new{k}").read_bytes() == b"x" * 10
    assert (tmp_path / "new0").read_bytes() == b"y" * 20


LOCK_PROBE = r"""
import fcntl, os, sys
for line in sys.stdin:
    fd = os.open(line.strip(), os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0, 0)
        print("lost", flush=True)
    except OSError:
        print("held", flush=True)
    os.close(fd)
"""

LOCK_HOLDER = r"""
import fcntl, mmap, os, subprocess, sys
probe = subprocess.Popen([sys.argv[1], "-c", sys.argv[2]], env={},
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
kept = []
actions = {
    "mmap": lambda fd: kept.append(mmap.mmap(fd, 10)),
    "setfl": lambda fd: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_APPEND),
    "fork": lambda fd: subprocess.run(["true"], preexec_fn=lambda: None, check=True),
    "fsync": lambda fd: os.fsync(fd),
}
for name, action in actions.items():
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_SH, 1, 0, 0)
    os.pwrite(fd, b"x" * 10, 0)
    action(fd)
    probe.stdin.write(name + "\n")
    probe.stdin.flush()
    print(name, probe.stdout.readline().strip(), flush=True)
    os.close(fd)
"""


@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_a_file_leaving_staging_keeps_the_programs_posix_locks(
    tmp_path: Path, stage_dir: Path, mode: str
) -> None:
    """A program holds a POSIX lock on a file it writes; the file leaves staging (mapped, its
    flags changed, a fork) while still open: the lock stays held (closing any descriptor of a
    file drops the process's locks on it, so the library keeps its own until the program
    closes one). sqlite3 in WAL mode died with SIGBUS when a reader took the lost lock."""
    run = subprocess.run(
        [sys.executable, "-c", LOCK_HOLDER, sys.executable, LOCK_PROBE],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **preload(), **MODES[mode](stage_dir)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:-1] == [
        "mmap held", "setfl held", "fork held", "fsync held"
    ], run.stdout  # fmt: skip
    for name in ("mmap", "setfl", "fork", "fsync"):
        assert (tmp_path / name).read_bytes() == b"x" * 10


THREADS_AND_FORK = r"""
import os, subprocess, sys, threading
BLOCK, WRITES, THREADS, FILES = 65536, 64, 4, 50
bad = 0
for n in range(FILES):
    path = os.path.join(sys.argv[1], f"shared{n}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    def worker(k):
        for i in range(WRITES):
            os.pwrite(fd, bytes([65 + k]) * BLOCK, (i * THREADS + k) * BLOCK)
            if k == 0 and i == WRITES // 4:
                subprocess.run(["true"], preexec_fn=lambda: None, check=True)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in threads: t.start()
    for t in threads: t.join()
    os.close(fd)
    data = open(path, "rb").read()
    bad += sum(data[b * BLOCK:(b + 1) * BLOCK] != bytes([65 + b % THREADS]) * BLOCK
               for b in range(WRITES * THREADS))
print(bad)
"""


def test_writes_of_other_threads_survive_a_fork(tmp_path: Path) -> None:
    """Four threads write disjoint blocks of a staged file while one of them forks (the fork
    writes out and stops staging every file): every block reaches the file, including those
    written by threads that waited for the file while the fork released it. 50 files, so a
    lost block shows in nearly every run of a library that loses them (4 runs of 4 here)."""
    run = subprocess.run(
        [sys.executable, "-c", THREADS_AND_FORK, str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, **preload()},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0", "blocks lost"


STDOUT_REOPENED = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None)
os.close(1)
assert os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) == 1
os.write(1, b"A write\n")
libc.printf(b"B printf\n")  # libc's stdout: its own internal write, not the interposed one
libc.fflush(None)
os.write(1, b"C write\n")
os.close(1)
"""


@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_a_file_opened_onto_stdout_takes_printf_and_write_in_order(
    tmp_path: Path, stage_dir: Path, mode: str
) -> None:
    """`close(1); open(file)`, then write(1) and printf mixed: every line in the file, in
    order. libc's stdout writes behind the library's back, so a file opened onto 0, 1 or 2 is
    not staged (staged, the printf line was written over)."""
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-c", STDOUT_REOPENED, str(out)],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **preload(), **MODES[mode](stage_dir)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert out.read_text() == "A write\nB printf\nC write\n"


@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_a_shells_own_descriptor_numbers_are_left_to_it(
    tmp_path: Path, stage_dir: Path, mode: str
) -> None:
    """A script opens files on numbers of its choosing (bash's `exec 3>a`, a dup2 onto 4): the
    library's own descriptors (its duplicate of each staged file, logs, sockets) sit at high
    numbers, so neither side closes or writes the other's (the library's duplicate of `a` sat
    on 4, bash's dup2 put `b` there, and the library later closed it)."""
    run = subprocess.run(
        ["bash", "-c", 'exec 3>a; exec 4>b; echo "for a" >&3; echo "for b" >&4'],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **preload(), **MODES[mode](stage_dir)},
    )  # fmt: skip
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert (tmp_path / "a").read_text() == "for a\n"
    assert (tmp_path / "b").read_text() == "for b\n"


def recover(stage_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RECOVER), str(stage_dir)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_killed_application_is_recovered_from_its_log(
    tmp_path: Path, stage_dir: Path
) -> None:
    plain, staged = tmp_path / "p.bin", tmp_path / "s.bin"
    writes = ["open", "wct", "write", "5000", "1", "pwrite", "300", "2", "100", "write", "7000",
              "3"]  # fmt: skip
    run_driver(plain, [*writes, "close"])
    run = run_driver(staged, [*writes, "kill"], preload(HARMONIA_STAGE_DIR=str(stage_dir)),
                     check=False)  # fmt: skip
    assert run.returncode == -signal.SIGKILL
    assert staged.stat().st_size == 0, "nothing had been flushed when the process died"
    first = recover(stage_dir)
    assert first.returncode == 0, first.stderr
    assert '"records": 3' in first.stdout and '"torn_tail": false' in first.stdout
    assert staged.read_bytes() == plain.read_bytes()
    second = recover(stage_dir)  # idempotent: nothing left to do, file unchanged
    assert second.returncode == 0 and second.stdout == ""
    assert staged.read_bytes() == plain.read_bytes()


def test_recovery_writes_to_the_name_the_program_gave_its_file(
    tmp_path: Path, stage_dir: Path
) -> None:
    # The atomic save, killed after the rename: the bytes written before and after it belong to
    # the new name, and the old one does not come back.
    plain, staged = tmp_path / "p.tmp", tmp_path / "s.tmp"
    writes = ["open", "wct", "write", "1000000", "1"]
    more = ["write", "1000000", "2"]
    run_driver(plain, [*writes, "rename", str(tmp_path / "p"), *more, "close"])
    run = run_driver(staged, [*writes, "rename", str(tmp_path / "s"), *more, "kill"],
                     preload(HARMONIA_STAGE_DIR=str(stage_dir)), check=False)  # fmt: skip
    assert run.returncode == -signal.SIGKILL
    result = recover(stage_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not staged.exists(), "the old name came back"
    assert (tmp_path / "s").read_bytes() == (tmp_path / "p").read_bytes()
    assert list(stage_dir.iterdir()) == []


def test_recovery_never_brings_back_a_file_the_program_deleted(
    tmp_path: Path, stage_dir: Path
) -> None:
    # The temporary-file pattern, killed while the file is open and nameless.
    staged = tmp_path / "scratch"
    run = run_driver(staged, ["open", "wct", "unlink", "write", "2000000", "3", "kill"],
                     preload(HARMONIA_STAGE_DIR=str(stage_dir)), check=False)  # fmt: skip
    assert run.returncode == -signal.SIGKILL
    result = recover(stage_dir)
    assert result.returncode == 0, result.stdout
    assert '"status": "dropped: the program deleted' in result.stdout
    assert not staged.exists()
    assert list(stage_dir.iterdir()) == []


def test_recovery_finds_a_file_another_program_renamed(
    tmp_path: Path, stage_dir: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only CAP_DAC_READ_SEARCH opens files by their handles")
    staged = tmp_path / "out.dat"
    run = run_driver(staged, ["open", "wct", "write", "300000", "4", "kill"],
                     preload(HARMONIA_STAGE_DIR=str(stage_dir)), check=False)  # fmt: skip
    assert run.returncode == -signal.SIGKILL
    (tmp_path / "moved").mkdir()
    os.rename(
        staged, tmp_path / "moved" / "out.dat"
    )  # by a program the library did not see
    staged.write_bytes(b"another file took the name")
    result = recover(stage_dir)
    assert result.returncode == 0, result.stdout
    expected = tmp_path / "e.dat"
    run_driver(expected, ["open", "wct", "write", "300000", "4", "close"])
    assert (tmp_path / "moved" / "out.dat").read_bytes() == expected.read_bytes()
    assert staged.read_bytes() == b"another file took the name"


def test_torn_tail_is_ignored(tmp_path: Path, stage_dir: Path) -> None:
    staged = tmp_path / "s.bin"
    commands = ["open", "wct", "write", "1000", "1", "write", "1000", "2", "kill"]
    run_driver(
        staged, commands, preload(HARMONIA_STAGE_DIR=str(stage_dir)), check=False
    )
    (log,) = stage_dir.iterdir()
    os.truncate(log, log.stat().st_size - 10)  # the second record loses its last bytes
    result = recover(stage_dir)
    assert '"records": 1' in result.stdout and '"torn_tail": true' in result.stdout
    expected = tmp_path / "e.bin"
    run_driver(expected, ["open", "wct", "write", "1000", "1", "close"])
    assert staged.read_bytes() == expected.read_bytes()


def test_full_stage_device_falls_back_to_writing_through(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        plain, staged = tmp_path / "p.bin", tmp_path / "s.bin"
        commands = ["open", "wct"] + [
            a for k in range(8) for a in ("write", "100000", str(k))
        ]
        commands.append("close")
        run_driver(plain, commands)
        run = run_driver(staged, commands, preload(HARMONIA_STAGE_DIR=str(small)))
        assert "writing through" in run.stderr
        assert staged.read_bytes() == plain.read_bytes()
    finally:
        subprocess.run(["umount", str(small)], check=False)


# Random operation sequences: whatever the program does, the bytes are the same.
OPERATION = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 9000), st.integers(0, 99)),
    st.tuples(
        st.just("pwrite"),
        st.integers(0, 9000),
        st.integers(0, 99),
        st.integers(0, 20000),
    ),
    st.tuples(st.just("writev"), st.integers(0, 3000), st.integers(0, 99)),
    st.tuples(
        st.just("lseek"), st.integers(0, 20000), st.sampled_from(["set", "cur", "end"])
    ),
    st.tuples(st.just("ftruncate"), st.integers(0, 20000)),
    st.tuples(st.just("pread"), st.integers(1, 5000), st.integers(0, 20000)),
    st.tuples(st.just("read"), st.integers(1, 5000)),
    st.tuples(st.just("fsync")),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    ops=st.lists(OPERATION, min_size=1, max_size=25), mode=st.sampled_from(list(MODES))
)
def test_random_operation_sequences(
    compare: Compare, stage_dir: Path, ops, mode: str
) -> None:  # type: ignore[no-untyped-def]
    commands = ["open", "rwct"]
    for op in ops:
        commands += [str(part) for part in op]
    commands.append("close")
    compare(commands, MODES[mode](stage_dir))


def test_harmonia_recover_command(tmp_path: Path, stage_dir: Path) -> None:
    staged = tmp_path / "s.bin"
    commands = ["open", "wct", "write", "2048", "5", "kill"]
    run_driver(
        staged, commands, preload(HARMONIA_STAGE_DIR=str(stage_dir)), check=False
    )
    env = {**os.environ, "HARMONIA_RECOVER": str(RECOVER)}
    cli = [sys.executable, "-m", "harmonia", "recover", str(stage_dir)]
    first = subprocess.run(cli, capture_output=True, text=True, env=env, check=False)
    assert first.returncode == 0, first.stderr
    assert "replayed" in first.stdout and staged.stat().st_size == 2048
    second = subprocess.run(cli, capture_output=True, text=True, env=env, check=False)
    assert second.returncode == 0 and "nothing to recover" in second.stdout
    missing = subprocess.run(
        [*cli[:-1], str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert missing.returncode == 2 and "not a directory" in missing.stderr


def test_runtime_phase_detection_groups_io_by_idle_gaps(tmp_path: Path) -> None:
    # Three bursts separated by 300 ms of "computation"; a 100 ms gap ends a phase.
    trace = tmp_path / "phases.jsonl"
    burst = ["write", "4096", "1", "write", "65536", "2", "pwrite", "100", "3", "0"]
    commands = [
        "open",
        "wct",
        *burst,
        "sleep",
        "300",
        *burst,
        "sleep",
        "300",
        *burst,
        "close",
    ]
    run_driver(
        tmp_path / "f.bin",
        commands,
        preload(HARMONIA_PHASE_TRACE=str(trace), HARMONIA_PHASE_GAP="0.1"),
    )
    phases = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [p["event"] for p in phases] == ["phase"] * 3
    for phase in phases:
        assert phase["source"] == "detected"
        assert phase["bytes_written"] == 4096 + 65536 + 100
        assert phase["requests"] == 3 and phase["files"] == 1
        assert phase["request_min"] == 100 and phase["request_max"] == 65536
        assert phase["request_sizes"] == {"64": 1, "4096": 1, "65536": 1}
        assert phase["duration"] < 0.1
    assert phases[1]["begin"] - phases[0]["end"] >= 0.25


def test_phase_gap_must_be_positive(tmp_path: Path) -> None:
    run = run_driver(
        tmp_path / "f.bin", ["open", "wct", "close"], preload(HARMONIA_PHASE_GAP="soon")
    )
    assert "HARMONIA_PHASE_GAP=soon" in run.stderr


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(cut=st.integers(0, 3300), flip=st.one_of(st.none(), st.integers(0, 3400)))
def test_recovery_of_damaged_logs_replays_only_complete_records(
    tmp_path_factory: pytest.TempPathFactory, cut: int, flip: int | None
) -> None:
    # Three 1000-byte records; the log is cut short and/or has one byte flipped anywhere. Recovery
    # must never fail on it, and the file must receive exactly the records before the damage.
    work = tmp_path_factory.mktemp("damaged")
    stage = work / "stage"
    stage.mkdir()
    target = work / "f.bin"
    writes = ["write", "1000", "1", "write", "1000", "2", "write", "1000", "3"]
    run_driver(
        target,
        ["open", "wct", *writes, "kill"],
        preload(HARMONIA_STAGE_DIR=str(stage)),
        check=False,
    )
    (log,) = stage.iterdir()
    data = bytearray(log.read_bytes())
    # The header (magic, the target's path, a checksum), the record of the file's identity, then
    # the data records.
    header = 8 + 4 + len(str(target).encode()) + 8
    records = len(data) - 3 * (32 + 1000)
    if flip is not None and flip < len(data):
        data[flip] ^= 0xFF
    del data[min(cut + records, len(data)) :]
    log.write_bytes(bytes(data))
    result = recover(stage)
    # A record header's 4 reserved bytes (after its magic) carry nothing: flipping them is harmless.
    harmless = flip is not None and (
        (flip >= records and 4 <= (flip - records) % 1032 < 8) or 4 <= flip - header < 8
    )
    damaged_at = min(
        cut + records, flip if flip is not None and not harmless else len(data)
    )
    complete = 0 if damaged_at < records else min(3, (damaged_at - records) // 1032)
    if damaged_at < header:  # the header itself is damaged: reported, nothing written
        assert result.returncode == 1 and "error" in result.stdout
        assert target.stat().st_size == 0
        return
    assert result.returncode == 0, result.stdout + result.stderr
    assert f'"records": {complete}' in result.stdout
    expected = work / "expected.bin"
    run_driver(expected, ["open", "wct", *writes[: 3 * complete], "close"])
    assert target.read_bytes() == expected.read_bytes()


@pytest.mark.parametrize("length_byte", [4, 5, 7])
def test_recovery_survives_a_huge_damaged_record_length(
    tmp_path: Path, length_byte: int
) -> None:
    # A record whose length field claims up to ~2^64 bytes (found by the property test above: it
    # made harmonia-recover allocate that much and abort). It is a torn tail, nothing more.
    stage = tmp_path / "stage"
    stage.mkdir()
    target = tmp_path / "f.bin"
    writes = ["write", "1000", "1", "write", "1000", "2"]
    run_driver(
        target, ["open", "wct", *writes, "kill"], preload(HARMONIA_STAGE_DIR=str(stage)),
        check=False,
    )  # fmt: skip
    (log,) = stage.iterdir()
    data = bytearray(log.read_bytes())
    second = len(data) - (32 + 1000)  # the second record's header
    data[second + 16 + length_byte] ^= 0xFF  # a high byte of its length field
    log.write_bytes(bytes(data))
    result = recover(stage)
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"records": 1' in result.stdout and '"torn_tail": true' in result.stdout
    assert target.stat().st_size == 1000, (
        "the first record, and nothing of the damaged one"
    )


@pytest.mark.parametrize(
    "scheduler", ["sjf", "to-agg,to-agg.max_requests=4", "twins,twins.servers=1", "mlf"]
)
@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_flush_through_a_request_scheduler_keeps_the_bytes(
    compare: Compare, stage_dir: Path, mode: str, scheduler: str
) -> None:
    # Non-overlapping pieces written out of order (the scheduler may reorder and merge them),
    # then overlapping ones (the written order must be kept: the plain flush runs).
    disjoint = []
    for k, (size, at) in enumerate(
        [(700, 9000), (300, 100), (2000, 400), (50, 2400), (4096, 5000)]
    ):
        disjoint += ["pwrite", str(size), str(k + 1), str(at)]
    overlapping = [
        "pwrite",
        "1000",
        "7",
        "0",
        "pwrite",
        "500",
        "8",
        "200",
        "pwrite",
        "10",
        "9",
        "300",
    ]
    env = {**MODES[mode](stage_dir), "HARMONIA_FLUSH_SCHEDULER": scheduler}
    compare(["open", "wct", *disjoint, "flush", *overlapping, "close"], env)


def test_a_bad_flush_scheduler_is_reported(tmp_path: Path) -> None:
    for spec, reason in [("magic", "unknown"), ("sjf,nonsense", "not option=value"),
                         ("twins", "twins.servers")]:  # fmt: skip
        run = run_driver(
            tmp_path / "f.bin", ["open", "wct", "write", "10", "1", "close"],
            preload(HARMONIA_FLUSH_SCHEDULER=spec),
        )  # fmt: skip
        assert (
            f"HARMONIA_FLUSH_SCHEDULER={spec}" in run.stderr and reason in run.stderr
        ), run.stderr
        assert (tmp_path / "f.bin").stat().st_size == 10
