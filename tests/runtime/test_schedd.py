"""harmonia-schedd with real jobs under libharmonia: directives followed, daemon failures
survived, malformed input refused (docs/control.md)."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prefetch_support import receive_frame
from schedd_support import (
    PhaseKeeper,
    SteppedWriter,
    expected_bytes,
    finish,
    frame,
    job_env,
    keep_writing,
    kept_in_phase,
    read_while_busy,
    running_daemon,
    start_daemon,
    start_writer,
    status,
    stop_daemon,
    wait_until,
)


def jobs_by_key(address: Path) -> dict[str, dict[str, object]]:
    return {job["job"]: job for job in status(address)["jobs"]}


def staging_behind(
    busy: PhaseKeeper, address: Path, path: Path, chunks: int
) -> PhaseKeeper:
    """Job B, once A (kept in its phase by `busy`) is in its phase under 2a: opened and
    registered, then writing a chunk to `path` every 0.1 s until it has written `chunks` and
    the last of them were staged; B is still in its phase. (The library waits a second for its
    phase's first directive: under load, B's first writes may go straight to the file, as they
    should.) Its keeper counts the chunks B wrote; B is killed if this fails."""
    b = PhaseKeeper(SteppedWriter(address, "B", path))
    try:
        assert busy.wait(lambda: "B" in jobs_by_key(address)), "B registered"
        assert keep_writing(
            [busy, b],
            lambda: (
                b.chunks_written >= chunks
                and path.stat().st_size < b.chunks_written * 1_000_000
            ),
        ), "B stages"
    except BaseException:
        b.writer.kill()
        raise
    return b


def staged_behind(
    busy: PhaseKeeper, address: Path, path: Path, chunks: int
) -> PhaseKeeper:
    """B as staging_behind leaves it, once its phase ended and it waits in line to flush."""
    b = staging_behind(busy, address, path, chunks)
    try:
        assert busy.wait(
            lambda: jobs_by_key(address).get("B", {}).get("wants_flush") == 1
        ), (
            f"B waits in line to flush: {jobs_by_key(address)}, {path.stat().st_size} bytes"
        )
    except BaseException:
        b.writer.kill()
        raise
    return b


def test_strategy_2a_makes_the_second_comer_stage_and_wait(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    with (
        running_daemon(address, "--strategy", "2a"),
        kept_in_phase(address, "A", tmp_path / "a") as busy,
    ):
        # B wrote into its staging area at once; its close waits for A's phase to end.
        b = staged_behind(busy, address, tmp_path / "b", chunks=4)
        try:
            b_job = jobs_by_key(address)["B"]
            assert b_job["directive"]["mode"] == "MODE_STAGE"  # type: ignore[index]
            assert (tmp_path / "b").stat().st_size < b.chunks_written * 1_000_000, (
                "staged"
            )
            b.writer.start_close()
            assert not busy.wait(lambda: b.writer.closed_within(0), timeout=1), (
                "B's close waits while A writes"
            )
            busy.writer.close()
            assert b.writer.closed_within(10), "B's close returns once A's phase ended"
            b.writer.finish()
        finally:
            b.writer.kill()
    assert (tmp_path / "a").read_bytes() == expected_bytes(busy.chunks_written)
    assert (tmp_path / "b").read_bytes() == expected_bytes(b.chunks_written)


def test_an_open_file_follows_a_changed_directive(tmp_path: Path) -> None:
    """A file's write plan is re-decided when the daemon's directive changes, not only when the
    file is opened: B stages behind A (2a), and once A's phase ends B's writes to the same open
    file go straight through, so the file is whole while B still holds it open."""
    address = tmp_path / "schedd.sock"
    target = tmp_path / "b"
    with running_daemon(address, "--strategy", "2a"):
        # A stays in its phase until B is seen staging behind it.
        with kept_in_phase(address, "A", tmp_path / "a") as busy:
            # No detected phase end during the hold: only A's phase end changes B's
            # directive.
            second = start_writer(
                address, "B", target, chunks=60, pause=0.1, hold=4, HARMONIA_PHASE_GAP="30"
            )  # fmt: skip
            assert busy.wait(
                lambda: (
                    jobs_by_key(address).get("B", {}).get("directive", {}).get("mode")
                    == "MODE_STAGE"
                )
            ), "B stages behind A"
            a_stopped = time.time()
            busy.writer.close()
        assert wait_until(
            lambda: target.exists() and target.stat().st_size == 60_000_000, timeout=30
        )
        whole = time.time()
        b_times = finish(second)
    assert a_stopped < b_times["written"], "B wrote on after A's phase"
    # Whole within a second and a half of B's last write, seconds before its close.
    assert whole - b_times["written"] < 1.5
    assert b_times["closed"] - whole > 2
    assert target.read_bytes() == expected_bytes(60)


def test_without_coordination_nobody_waits(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    with (
        running_daemon(address, "--strategy", "none"),
        kept_in_phase(address, "A", tmp_path / "a") as busy,
    ):
        second = start_writer(address, "B", tmp_path / "b", chunks=4, pause=0)
        assert busy.wait(lambda: second.poll() is not None), (
            "B finished while A was still writing"
        )
        finish(second)
        busy.writer.close()
    assert (tmp_path / "b").read_bytes() == expected_bytes(4)


def test_a_dead_daemon_releases_waiting_jobs_within_a_second(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    daemon = start_daemon(address, "--strategy", "2a")
    try:
        with kept_in_phase(address, "A", tmp_path / "a") as busy:
            b = staged_behind(busy, address, tmp_path / "b", chunks=4)
            try:
                b.writer.start_close()
                stop_daemon(daemon, hard=True)
                assert b.writer.closed_within(1.0), "B writes through within a second"
                assert "lost the scheduler daemon" in b.writer.finish()
            finally:
                b.writer.kill()
            busy.writer.close()
    finally:
        stop_daemon(daemon, hard=True)
    assert (tmp_path / "a").read_bytes() == expected_bytes(busy.chunks_written)
    assert (tmp_path / "b").read_bytes() == expected_bytes(b.chunks_written)


def test_staged_bytes_survive_a_restart_of_the_daemon(tmp_path: Path) -> None:
    """B stages behind A (2a) and the daemon is restarted while B holds its bytes: both jobs
    come back to the new daemon (which puts them in line in the order they come back), and
    B's bytes reach the file once its turn comes, while B still holds it open."""
    address = tmp_path / "schedd.sock"
    target = tmp_path / "b"
    daemon = start_daemon(address, "--strategy", "2a")
    try:
        with kept_in_phase(address, "A", tmp_path / "a") as busy:
            b = staging_behind(busy, address, target, chunks=4)
            try:
                stop_daemon(daemon, hard=True)
                daemon = start_daemon(address, "--strategy", "2a")
                assert busy.wait(lambda: set(jobs_by_key(address)) == {"A", "B"}), (
                    "both jobs back"
                )
                busy.writer.close()
                assert wait_until(
                    lambda: target.read_bytes() == expected_bytes(b.chunks_written), 15
                ), "B's bytes reach the file while B holds it open"
                b.writer.close()
            finally:
                b.writer.kill()
    finally:
        stop_daemon(daemon, hard=True)
    assert (tmp_path / "a").read_bytes() == expected_bytes(busy.chunks_written)


def test_a_restarted_daemon_gets_its_jobs_back(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    daemon = start_daemon(address, "--strategy", "2a")
    writer = start_writer(address, "A", tmp_path / "a", chunks=40, pause=0.1)
    try:
        assert wait_until(lambda: "A" in jobs_by_key(address))
        stop_daemon(daemon, hard=True)
        daemon = start_daemon(address, "--strategy", "2a")
        assert wait_until(
            lambda: jobs_by_key(address).get("A", {}).get("in_phase") == 1, 3
        )
        finish(writer)
    finally:
        stop_daemon(daemon)
    assert (tmp_path / "a").read_bytes() == expected_bytes(40)


def test_a_silent_process_loses_its_lease(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    with running_daemon(address, "--strategy", "2a", "--lease", "0.5"):
        writer = start_writer(address, "A", tmp_path / "a", chunks=30, pause=0.1)
        assert wait_until(lambda: "A" in jobs_by_key(address))
        os.kill(writer.pid, signal.SIGSTOP)
        try:
            assert wait_until(lambda: "A" not in jobs_by_key(address), 3)
        finally:
            os.kill(writer.pid, signal.SIGCONT)
        finish(writer)
    assert (tmp_path / "a").read_bytes() == expected_bytes(30)


def test_throttled_jobs_pace_their_writes(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    with (
        running_daemon(address, "--strategy", "throttle", "--throttle-gap", "0.05"),
        kept_in_phase(address, "A", tmp_path / "a") as busy,
    ):
        # A stays in its phase while B, registered (at its open) before it writes, writes
        # beside it.
        second = SteppedWriter(address, "B", tmp_path / "b")
        try:
            assert busy.wait(lambda: "B" in jobs_by_key(address)), "B registered"
            started = time.monotonic()
            second.write_chunks(12)
            writing = time.monotonic() - started
            second.close()
        finally:
            second.kill()
        busy.writer.close()
    # 12 writes with starts 50 ms apart take at least 11 gaps.
    assert writing >= 11 * 0.05 * 0.9
    assert (tmp_path / "b").read_bytes() == expected_bytes(12)


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _reply(connection: socket.socket) -> bytes:
    header = connection.recv(4, socket.MSG_WAITALL)
    assert len(header) == 4, "the daemon answers"
    (length,) = struct.unpack(">I", header)
    return connection.recv(length, socket.MSG_WAITALL)


def test_malformed_and_oversized_frames_get_errors_and_the_daemon_lives_on(
    tmp_path: Path,
) -> None:
    address = tmp_path / "schedd.sock"
    with running_daemon(address, "--strategy", "2a") as daemon:
        with socket.socket(socket.AF_UNIX) as connection:
            connection.connect(str(address))
            connection.sendall(_frame(b"\xff\xff\xff\xff garbage"))
            # Error (field 13): tag 0x6a, then code MALFORMED (field 1 = 1).
            assert b"\x6a" in _reply(connection) and daemon.poll() is None
            connection.sendall(_frame(b"\x50\x01"))  # an unknown field only: no body
            assert b"no message this daemon knows" in _reply(connection)
            connection.sendall(struct.pack(">I", 1 << 30))
            assert b"at most 65536" in _reply(connection)
            assert connection.recv(1) == b"", "then it closes the stream"
        assert daemon.poll() is None
        assert status(address)["jobs"] == []


def test_cli_run_and_status(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["COLUMNS"] = "200"  # rich wraps tables to the terminal width
    harmonia = Path(sys.executable).with_name("harmonia")
    with running_daemon(address, "--strategy", "2b"):
        job = subprocess.Popen(
            [str(harmonia), "run", "--schedd", str(address), "--job", "cli-job", "--",
             sys.executable, str(Path(__file__).with_name("slow_writer.py")),
             str(tmp_path / "c"), "10", "0.1", "4"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert wait_until(lambda: "cli-job" in jobs_by_key(address))
        # The job stays registered for 4 s more (it holds its file open): time enough for a
        # `harmonia status` started on a loaded machine.
        shown = subprocess.run(
            [str(harmonia), "status", "--schedd", str(address)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        assert "cli-job" in shown.stdout and "strategy 2b" in shown.stdout
        finish(job)
    assert (tmp_path / "c").read_bytes() == expected_bytes(10)
    unreachable = subprocess.run(
        [str(harmonia), "status", "--schedd", str(tmp_path / "none.sock")],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert unreachable.returncode == 1 and "cannot connect" in unreachable.stderr


def test_jobs_without_a_daemon_write_through(tmp_path: Path) -> None:
    writer = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("slow_writer.py")), str(tmp_path / "x"),
         "3", "0"],
        env=job_env(tmp_path / "absent.sock", "X"),
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert "cannot reach the scheduler daemon" in writer.stderr
    assert (tmp_path / "x").read_bytes() == expected_bytes(3)


def test_strategy_3a_places_each_jobs_files_on_its_servers(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    root = tmp_path / "pfs"
    for server in range(8):
        (root / f"ost{server}").mkdir(parents=True)
    gate = tmp_path / "gate"
    script = Path(__file__).with_name("many_files.py")
    with running_daemon(address, "--strategy", "3a", "--pfs-servers", "8"):
        jobs = {
            name: subprocess.Popen(
                [sys.executable, str(script), str(root), name, "12", str(gate)],
                env=job_env(
                    address,
                    name,
                    HARMONIA_PFS_ROOT=str(root),
                    HARMONIA_BYTES_PER_PROCESS=per_process,
                ),
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, per_process in (("A", "48e6"), ("B", "16e6"))
        }
        assert wait_until(lambda: set(jobs_by_key(address)) == {"A", "B"})
        gate.touch()
        assert wait_until(
            lambda: all(Path(f"{gate}.{name}.done").exists() for name in jobs)
        )
        Path(f"{gate}.exit").touch()
        for job in jobs.values():
            _, err = job.communicate(timeout=30)
            assert job.returncode == 0, err
    servers: dict[str, set[str]] = {"A": set(), "B": set()}
    for name in ("A", "B"):
        for k in range(12):
            logical = root / f"{name}-{k}"
            assert logical.is_symlink(), "the name stays where the job created it"
            assert logical.read_bytes() == bytes([k % 256]) * 65536
            servers[name].add(os.readlink(logical).split("/")[0])
    # 48 MB against 16 MB per process on 8 servers: 6 and 2 (BBIO section III-B), in the order
    # the jobs registered.
    assert len(servers["A"]) == 6 and len(servers["B"]) == 2
    assert not servers["A"] & servers["B"]


def test_two_fio_jobs_coordinated_and_verified(tmp_path: Path) -> None:
    """Two real external clients: fio A writes at a limited rate; fio B, started during A's
    phase, is told to stage (2a); both verify their data when done."""
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    address = tmp_path / "schedd.sock"

    def fio(job: str, rate: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["fio", f"--name={job}", f"--directory={tmp_path}", "--rw=write", "--bs=256k",
             "--size=16m", "--ioengine=psync", f"--rate={rate}", "--verify=crc32c",
             "--do_verify=1", "--end_fsync=1", "--verify_state_save=0",
             "--output-format=terse", "--terse-version=3"],
            env=job_env(address, job), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    with running_daemon(address, "--strategy", "2a"):
        first = fio("fio-A", "8m")
        assert wait_until(
            lambda: jobs_by_key(address).get("fio-A", {}).get("in_phase", 0) > 0
        )
        second = fio("fio-B", "0")
        staged = wait_until(
            lambda: (
                jobs_by_key(address).get("fio-B", {}).get("directive", {}).get("mode")  # type: ignore[union-attr]
                == "MODE_STAGE"
            ),
            10,
            0.01,
        )
        results = [job.communicate(timeout=120) for job in (first, second)]
    assert staged, "B staged while A was writing"
    for job, (out, err) in zip((first, second), results, strict=True):
        assert job.returncode == 0, err
        fields = out.strip().split(";")
        assert fields[4] == "0", f"fio reported error {fields[4]}"
        assert int(fields[5]) > 0, "verification read the data back"


@contextmanager
def b_waiting_behind_a(
    address: Path, tmp_path: Path
) -> Iterator[tuple[PhaseKeeper, PhaseKeeper]]:
    """2a: A writes to tmp_path/a, kept in its phase; B writes 5 chunks or more to
    tmp_path/b, holds the file open (computes), and waits in line to flush with its last
    chunks staged. Yields A's and B's keepers; each is killed at the end unless the block
    closed it."""
    with kept_in_phase(address, "A", tmp_path / "a") as busy:
        b = staged_behind(busy, address, tmp_path / "b", chunks=5)
        try:
            assert (tmp_path / "b").stat().st_size < b.chunks_written * 1_000_000, (
                "still staged, in line behind A"
            )
            yield busy, b
        finally:
            b.writer.kill()


def test_staged_data_is_flushed_behind_computation_once_allowed(tmp_path: Path) -> None:
    """2a: B stages while A writes, ends its phase holding the data (so it asks to flush and
    waits in line), and computes with the file open; when A is done, B's data goes out at once,
    before B closes the file."""
    address = tmp_path / "schedd.sock"
    with (
        running_daemon(address, "--strategy", "2a"),
        b_waiting_behind_a(address, tmp_path) as (busy, b),
    ):
        # B's detected phase ended after a second without writes.
        assert jobs_by_key(address)["B"]["in_phase"] == 0
        busy.writer.close()
        # B still holds its file open (computes): its data goes out meanwhile.
        whole = b.chunks_written * 1_000_000
        assert wait_until(lambda: (tmp_path / "b").stat().st_size == whole, 3)
        assert wait_until(
            lambda: jobs_by_key(address).get("B", {}).get("wants_flush") == 0
        )
        b.writer.close()
    assert (tmp_path / "b").read_bytes() == expected_bytes(b.chunks_written)


def test_a_daemon_stalled_within_the_timeout_keeps_its_jobs_in_line(
    tmp_path: Path,
) -> None:
    """2a: B waits in line behind A with its data staged, and the daemon stops answering for
    2.5 s, within the jobs' HARMONIA_SCHEDD_TIMEOUT (10 s here): B keeps its data staged and its
    place in line, and flushes only once A's phase ends. (With the default of 1 s it would have
    written through.)"""
    address = tmp_path / "schedd.sock"
    with (
        running_daemon(address, "--strategy", "2a") as daemon,
        b_waiting_behind_a(address, tmp_path) as (busy, b),
    ):
        daemon.send_signal(signal.SIGSTOP)
        try:
            busy.keep(2.5)
        finally:
            daemon.send_signal(signal.SIGCONT)
        assert jobs_by_key(address)["B"]["wants_flush"] == 1, "still in line"
        assert (tmp_path / "b").stat().st_size < b.chunks_written * 1_000_000, (
            "still staged"
        )
        busy.writer.close()
        assert wait_until(
            lambda: (tmp_path / "b").stat().st_size == b.chunks_written * 1_000_000
        )
        assert "lost the scheduler daemon" not in b.writer.close()
    assert (tmp_path / "b").read_bytes() == expected_bytes(b.chunks_written)


def test_bad_agent_settings_are_reported_and_fall_back(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    target = tmp_path / "out.bin"
    with running_daemon(address):
        # A job that lives long enough for its agent to register (where the settings are read).
        job = (
            f"import os, time; fd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT, 0o644)\n"
            "os.write(fd, bytes(1 << 20))\ntime.sleep(0.5)\nos.close(fd)"
        )
        done = subprocess.run(
            [sys.executable, "-c", job],
            env=job_env(address, "bad", HARMONIA_PRIORITY="abc", HARMONIA_BYTES_PER_PROCESS="-1",
                        HARMONIA_PHASE_TRACE=str(tmp_path / "missing" / "trace.jsonl")),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "HARMONIA_PRIORITY=abc: expected an integer" in done.stderr
    assert "HARMONIA_BYTES_PER_PROCESS=-1: expected bytes" in done.stderr
    assert (
        "HARMONIA_PHASE_TRACE=" in done.stderr
        and "phases are not traced" in done.stderr
    )
    assert target.read_bytes() == bytes(1 << 20)


def test_another_process_opening_a_staged_file_sees_its_bytes(tmp_path: Path) -> None:
    """Open-to-open coherence: B's data waits staged in line behind A (2a); C, another job,
    opens B's file for reading and gets every byte written before its open, without waiting for
    A; B's data stays B's (it keeps staging)."""
    address = tmp_path / "schedd.sock"
    with (
        running_daemon(address, "--strategy", "2a"),
        b_waiting_behind_a(address, tmp_path) as (busy, b),
    ):
        # A stays in its phase until it is closed: C cannot be served by A's end.
        read_while_busy(
            busy, tmp_path / "b", job_env(address, "C"), chunks=b.chunks_written,
            why="C waited for A's phase to end",
        )  # fmt: skip
        assert jobs_by_key(address)["A"]["in_phase"] == 1, "A still writes"
        busy.writer.close()
        b.writer.close()
    assert (tmp_path / "b").read_bytes() == expected_bytes(b.chunks_written)


PARENT_AND_CHILD = r"""
import os, subprocess, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"p" * 1_000_000)  # the parent is in its I/O phase
child = "import os, sys; f = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644); "
child += "os.write(f, b'c' * 1_000_000); os.close(f)"
start = time.monotonic()
subprocess.run([sys.executable, "-c", child, sys.argv[2]], check=True)
print(time.monotonic() - start)
os.write(fd, b"p" * 1_000_000)
os.close(fd)
"""


def test_a_program_and_the_tool_it_runs_are_one_job_by_default(tmp_path: Path) -> None:
    """Without HARMONIA_JOB (or a batch system's or MPI's key), a process's job is its session:
    a child writing and closing a file while its parent is in its phase does not wait for the
    parent's phase to end (under 2a, two jobs would: the parent waits for the child, the child
    for the parent's phase, until a second without writes ends it)."""
    address = tmp_path / "schedd.sock"
    env = {
        key: value
        for key, value in job_env(address, "").items()
        if key != "HARMONIA_JOB"
    }
    with running_daemon(address, "--strategy", "2a"):
        run = subprocess.run(
            [sys.executable, "-c", PARENT_AND_CHILD, str(tmp_path / "p"), str(tmp_path / "c")],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert float(run.stdout) < 0.8, f"the child took {float(run.stdout):.2f} s"
    assert (tmp_path / "p").read_bytes() == b"p" * 2_000_000
    assert (tmp_path / "c").read_bytes() == b"c" * 1_000_000


CLOSES_EVERYTHING = r"""
import os, sys
first = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(first, b"a" * 100_000)  # registered, in a phase, staged
os.closerange(3, 1 << 16)  # a daemon-style cleanup: every descriptor above stderr
second = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(second, b"b" * 100_000)
os.close(second)
os.closerange(3, 1 << 16)
"""


def test_a_program_closing_every_descriptor_leaves_the_librarys_alone(
    tmp_path: Path,
) -> None:
    """closefrom(3)-style cleanup (Python's os.closerange, close_range over the table) closes
    the program's descriptors, its staged file written out first, and passes by the library's
    own (its connection to the scheduler, its duplicates): no "lost the scheduler daemon", and
    both files whole."""
    address = tmp_path / "schedd.sock"
    with running_daemon(address, "--strategy", "2a"):
        run = subprocess.run(
            [sys.executable, "-c", CLOSES_EVERYTHING, str(tmp_path / "a"), str(tmp_path / "b")],
            env=job_env(address, "closer"), capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "lost" not in run.stderr, run.stderr
    assert (tmp_path / "a").read_bytes() == b"a" * 100_000
    assert (tmp_path / "b").read_bytes() == b"b" * 100_000


# A process of the job: writes a file (the library meets its daemon), then waits.
WRITE_AND_WAIT = (
    "import sys, time; open(sys.argv[1], 'w').write('x' * 100000); time.sleep(5)"
)


def _read_envelopes(connection: socket.socket, pb: Any, until: float) -> Iterator[Any]:
    """The Envelopes a process sends on `connection`, until the monotonic time `until`."""
    while (left := until - time.monotonic()) > 0:
        connection.settimeout(left)
        body = receive_frame(connection)
        if body is None:  # closed, or the time is up
            return
        yield pb.Envelope.FromString(body)


def test_a_settle_order_that_arrives_with_the_registration_reply_is_answered(
    tmp_path: Path, pb: Any
) -> None:
    """The daemon may push a settle order (another process opens a file) right behind its reply
    to a registration, and the process may read both at once: it must answer that order, or the
    other process's open waits the daemon's whole wait for nothing."""
    path = tmp_path / "schedd.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)
        process = subprocess.Popen(
            [sys.executable, "-c", WRITE_AND_WAIT, str(tmp_path / "out")],
            env=job_env(path, "settled"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            listener.settimeout(10)
            connection, _ = listener.accept()
            with connection:
                first = next(_read_envelopes(connection, pb, time.monotonic() + 10))
                assert first.HasField("register_process")
                registered = pb.Envelope(seq=first.seq)
                registered.registered.protocol_version = (
                    first.register_process.protocol_version
                )
                registered.registered.lease_seconds = 10
                order = pb.Envelope()
                order.settle_order.id = 7
                order.settle_order.file.path = str(tmp_path / "data")
                order.settle_order.file.inode = 1
                connection.sendall(frame(registered.SerializeToString()) +
                                   frame(order.SerializeToString()))  # fmt: skip
                answered = []
                for envelope in _read_envelopes(connection, pb, time.monotonic() + 3):
                    if envelope.HasField("settle_done"):
                        answered.append(envelope.settle_done.id)
                        break
        finally:
            process.kill()
            process.wait()
    assert answered == [7]
