"""Real external clients under libharmonia: fio with data verification, and MPI programs writing
file-per-process with lseek+write and with pwrite."""

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from bbio_support import BUILD, preload
from harmonia.buffers.cluster import BufferCluster, ClusterSettings
from users_support import run_as

MPI_WRITER = BUILD / "tests" / "runtime" / "mpi_writer"


@pytest.mark.parametrize("engine", ["sync", "psync", "pvsync"])
@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_fio_verifies_its_data(tmp_path: Path, engine: str, mode: str) -> None:
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    stage = tmp_path / "stage"
    stage.mkdir()
    env = preload(**({"HARMONIA_STAGE_DIR": str(stage)} if mode == "disk" else {}))
    done = subprocess.run(
        ["fio", "--name=staged", f"--directory={tmp_path}", "--rw=randwrite", "--bs=16k",
         "--size=8m", f"--ioengine={engine}", "--verify=crc32c", "--do_verify=1",
         "--output-format=terse", "--terse-version=3", "--verify_state_save=0"],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fields = done.stdout.strip().split(";")
    assert fields[4] == "0", f"fio reported error {fields[4]}"
    assert int(fields[5]) > 0, "verification read the data back"
    assert list(stage.iterdir()) == []


@pytest.mark.parametrize("mode", ["seek", "pwrite"])
def test_mpi_file_per_process(tmp_path: Path, mode: str) -> None:
    mpirun = shutil.which("mpirun")
    if not mpirun or not MPI_WRITER.is_file():
        pytest.skip("MPI is not available")
    outputs = {}
    for label, env in [("plain", {}), ("staged", preload())]:
        out = tmp_path / label
        out.mkdir()
        command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4"]
        for key, value in env.items():
            command += ["-x", f"{key}={value}"]
        command += [str(MPI_WRITER), str(out), mode, "64", "65536"]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        outputs[label] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert len(outputs["plain"]) == 4
    assert outputs["staged"] == outputs["plain"]


def test_short_processes_appending_in_parallel_leave_and_say_nothing(
    cluster: BufferCluster,
) -> None:
    """`xargs -P4` runs a shell per line that appends it to one file through buffer mode: each
    opening asks the others to settle the file, and a process may be leaving when it carries
    that out. It must not answer the daemon after it left (the daemon then complains, and the
    process printed that complaint), and no opening may wait for a process that left."""
    directory = cluster.pfs / "appends"
    directory.mkdir()
    started = time.monotonic()
    done = subprocess.run(
        "seq 1 200 | xargs -P4 -I{} sh -c 'echo {} >> lines'", shell=True, cwd=directory,
        env={**os.environ, **cluster.env(), "HARMONIA_JOB": "appends"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", "the library said something"
    lines = (directory / "lines").read_text().split()
    assert sorted(map(int, lines)) == list(range(1, 201))
    assert seconds < 20, f"{seconds:.1f} s: openings waited for processes that had left"


# How the next command runs the program: a shell's exec of ./prog, and execv of a relative
# name without a slash (no PATH search: the working directory's file).
RUNNERS = {
    "shell": ["sh", "-c", "./prog --version"],
    "execv": [
        sys.executable,
        "-c",
        "import os; os.execv('prog', ['prog', '--version'])",
    ],
}


@contextmanager
def _job_beside_root_daemons(
    request: pytest.FixtureRequest, tmp_path: Path, who: str
) -> Iterator[tuple[BufferCluster, list[str], Path]]:
    """Buffer nodes and a scheduler run as root, as at a site; the job's commands run as root
    or as an ordinary user (a command prefix). Yields the cluster, the prefix and a directory
    of the job's user outside the buffer root, on the same file system."""
    user = request.getfixturevalue("ordinary_user") if who == "user" else None
    base = request.getfixturevalue("reachable") if user else tmp_path
    settings = ClusterSettings(
        base / "c", buffers=2, capacity=64 << 20, flush_threshold=0.5
    )
    outside = base / "outside"
    outside.mkdir()
    if user:
        os.chown(outside, user.pw_uid, user.pw_gid)
    with BufferCluster(settings) as cluster:
        yield cluster, run_as(user) if user else [], outside


# Copies argv[1] to a new file argv[2] of mode argv[3] (octal), says so, and waits for a line on
# stdin: its job, still running, keeps what the nodes hold of the file there.
WRITE_AND_HOLD = """
import os, sys
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, int(sys.argv[3], 8))
os.write(fd, open(sys.argv[1], "rb").read())
os.close(fd)
print("written", flush=True)
sys.stdin.readline()
"""


@contextmanager
def _held_on_the_nodes(
    cluster: BufferCluster, as_user: list[str], env: dict[str, str], source: Path,
    target: Path, mode: str,
) -> Iterator[None]:  # fmt: skip
    """`source` copied to `target` through the nodes, which still hold every byte of it while
    the block runs (the writer's job goes on)."""
    writer = subprocess.Popen(
        [*as_user, sys.executable, "-c", WRITE_AND_HOLD, str(source), str(target), mode],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdin and writer.stdout
    try:
        assert writer.stdout.readline().strip() == "written", writer.stderr
        assert cluster.node_total("used") >= source.stat().st_size, (
            "the nodes do not hold the file: this test tests nothing"
        )
        yield
    finally:
        writer.stdin.close()
        writer.wait(timeout=60)


@pytest.mark.parametrize("who", ["root", "user"])
@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_program_written_through_the_nodes_runs_at_once(
    request: pytest.FixtureRequest, tmp_path: Path, runner: str, who: str
) -> None:
    """A program written into the PFS directory through buffer nodes (created executable, no
    chmod after) is run by the next command: the node that holds it keeps the file open for
    writing until it drains it, and an exec of a file open for writing fails (ETXTBSY), so the
    exec refused so is tried again once the nodes drained it."""
    program = Path(shutil.which("ls") or "/bin/ls")
    with _job_beside_root_daemons(request, tmp_path, who) as (cluster, as_user, _):
        env = {**os.environ, **cluster.env(), "HARMONIA_JOB": "programs",
               "HARMONIA_SMALL_FILE": "0"}  # fmt: skip
        with _held_on_the_nodes(
            cluster, as_user, env, program, cluster.pfs / "prog", "755"
        ):
            ran = subprocess.run([*as_user, *RUNNERS[runner]], cwd=cluster.pfs, env=env,
                                 capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout


@pytest.mark.parametrize("who", ["root", "user"])
@pytest.mark.parametrize("command", ["mv", "ln"])
def test_a_file_given_a_name_outside_the_buffer_root_reads_whole_at_once(
    request: pytest.FixtureRequest, tmp_path: Path, command: str, who: str
) -> None:
    """A file written through the nodes and then moved (or hard-linked) to a directory outside
    the buffer root, on the same file system, is read whole there by the next command: past
    the root nothing asks the scheduler what the nodes hold, so the move drains the file first."""
    with _job_beside_root_daemons(request, tmp_path, who) as (
        cluster,
        as_user,
        outside,
    ):
        source = outside.parent / "source.bin"
        source.write_bytes(os.urandom(6 << 20))
        env = {**os.environ, **cluster.env(), "HARMONIA_JOB": f"outside-{command}"}
        written = cluster.pfs / "data"
        with _held_on_the_nodes(cluster, as_user, env, source, written, "644"):
            subprocess.run([*as_user, command, str(written), str(outside / "data")], env=env,
                           check=True, timeout=60)  # fmt: skip
            read = subprocess.run([*as_user, "cat", str(outside / "data")], env=env,
                                  capture_output=True, check=True, timeout=60)  # fmt: skip
    assert read.stdout == source.read_bytes()
