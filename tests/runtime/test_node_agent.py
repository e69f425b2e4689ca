"""The node agent (harmonia-agentd, docs/node-agent.md) with real ranks under libharmonia and a
real harmonia-schedd: the ranks' phases reach the scheduler as one, its directives reach every
rank, a killed agent leaves the ranks speaking directly, and a rank of another user is refused."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from bbio_support import BUILD
from schedd_support import (
    PhaseKeeper,
    SteppedWriter,
    expected_bytes,
    finish,
    job_env,
    keep_writing,
    kept_in_phase,
    read_while_busy,
    register_frame,
    running_daemon,
    start_daemon,
    start_writer,
    status,
    stop_daemon,
    wait_listening,
    wait_until,
)
from users_support import made_users, run_as, why_no_users

AGENTD = BUILD / "src" / "agent" / "harmonia-agentd"


def start_agent(
    socket_path: Path, schedd: Path, *args: str, user: list[str] | None = None
) -> subprocess.Popen[str]:
    agent = subprocess.Popen(
        env={**os.environ, "TRACE": "1"},
        args=[
            *(user or []),
            str(AGENTD),
            "--socket",
            str(socket_path),
            "--schedd",
            str(schedd),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return wait_listening(agent, socket_path, "harmonia-agentd")


@contextmanager
def running_agent(
    socket_path: Path, schedd: Path, *args: str
) -> Iterator[subprocess.Popen[str]]:
    agent = start_agent(socket_path, schedd, *args)
    try:
        yield agent
    finally:
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=10)


def start_ranks(
    schedd: Path,
    agent_socket: Path,
    directory: Path,
    count: int,
    chunks: int,
    pause: float = 0.1,
    prefix: str = "r",
    **extra: str,
) -> list[subprocess.Popen[str]]:
    """`count` ranks of job A writing `chunks` chunks each to directory/PREFIXk, through the
    node agent at `agent_socket` (with `extra` environment)."""
    return [
        start_writer(
            schedd,
            "A",
            directory / f"{prefix}{k}",
            chunks=chunks,
            pause=pause,
            HARMONIA_AGENT=str(agent_socket),
            **extra,
        )
        for k in range(count)
    ]


def job(address: Path, key: str) -> dict[str, Any]:
    for entry in status(address)["jobs"]:
        if entry["job"] == key:
            return dict(entry)
    return {}


def test_ranks_speak_through_one_connection_and_their_phase_is_one(
    tmp_path: Path,
) -> None:
    schedd, agent_socket = tmp_path / "s.sock", tmp_path / "agent.sock"
    with (
        running_daemon(schedd, "--strategy", "2a"),
        running_agent(agent_socket, schedd),
    ):
        ranks = start_ranks(schedd, agent_socket, tmp_path, 4, chunks=10)
        assert wait_until(lambda: job(schedd, "A").get("in_phase") == 1)
        seen = job(schedd, "A")
        # Four ranks, one connection: the scheduler sees the group, in one phase.
        assert seen["processes"] == 1
        for rank in ranks:
            finish(rank)
        assert wait_until(lambda: job(schedd, "A") == {})
    for k in range(4):
        assert (tmp_path / f"r{k}").read_bytes() == expected_bytes(10)


def test_the_schedulers_directives_reach_every_rank(tmp_path: Path) -> None:
    schedd, agent_socket = tmp_path / "s.sock", tmp_path / "agent.sock"
    with (
        running_daemon(schedd, "--strategy", "2a"),
        running_agent(agent_socket, schedd),
        # B (direct) is in its phase first, and stays in it until the test lets it end:
        # under 2a, A's ranks must stage and wait to flush.
        kept_in_phase(schedd, "B", tmp_path / "b") as busy,
    ):
        ranks = start_ranks(
            schedd, agent_socket, tmp_path, 3, chunks=3, pause=0, prefix="a"
        )
        assert busy.wait(lambda: job(schedd, "A").get("wants_flush") == 1)
        a = job(schedd, "A")
        assert a["processes"] == 1
        assert a["directive"]["mode"] == "MODE_STAGE"
        # A's ranks are done writing, and still wait while B writes on.
        busy.keep(1)
        assert all(rank.poll() is None for rank in ranks), "A's ranks wait for B"
        b_stopped = time.time()
        busy.writer.close()
        a_times = [finish(rank) for rank in ranks]
    for k, times in enumerate(a_times):
        # Each rank staged at once (its writes waited for nothing, whenever it started), and
        # closed only once B's phase ended: the directive pushed to the agent's one connection
        # reached all three.
        assert times["written"] - times["opened"] < 1.0, k
        assert times["closed"] >= b_stopped, k
        assert (tmp_path / f"a{k}").read_bytes() == expected_bytes(3)
    assert (tmp_path / "b").read_bytes() == expected_bytes(busy.chunks_written)


def test_ranks_speak_directly_once_the_agent_is_killed(tmp_path: Path) -> None:
    schedd, agent_socket = tmp_path / "s.sock", tmp_path / "agent.sock"
    with running_daemon(schedd, "--strategy", "2a"):
        agent = start_agent(agent_socket, schedd)
        ranks = [
            PhaseKeeper(
                SteppedWriter(
                    schedd, "A", tmp_path / f"r{k}", HARMONIA_AGENT=str(agent_socket)
                )
            )
            for k in range(3)
        ]
        try:
            assert keep_writing(ranks, lambda: job(schedd, "A").get("in_phase") == 1)
            assert job(schedd, "A")["processes"] == 1
            agent.kill()
            agent.wait(timeout=10)
            # Each rank registers directly, restating its phase.
            assert keep_writing(ranks, lambda: job(schedd, "A").get("processes") == 3)
            assert keep_writing(ranks, lambda: job(schedd, "A").get("in_phase") == 3)
            stderr = [rank.writer.close() for rank in ranks]
        finally:
            for rank in ranks:
                rank.writer.kill()
            if agent.poll() is None:
                agent.kill()
            agent.wait(timeout=10)
    for k, rank in enumerate(ranks):
        assert (
            "lost the node agent; speaking to the scheduler daemon directly"
            in stderr[k]
        )
        assert (tmp_path / f"r{k}").read_bytes() == expected_bytes(rank.chunks_written)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="running the agent as another user needs root"
)
def test_a_rank_of_another_user_is_refused_and_goes_direct(tmp_path: Path) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to run the agent as another user")
    # Sockets both users reach: pytest's tmp_path is root's alone.
    shared = Path(tempfile.mkdtemp(prefix="harmonia-agent-"))
    try:
        shared.chmod(0o777)
        schedd, agent_socket = shared / "s.sock", shared / "agent.sock"
        nobody = ["--reuid", "65534", "--regid", "65534", "--clear-groups"]
        with running_daemon(schedd, "--strategy", "2a"):
            agent = start_agent(agent_socket, schedd, user=[setpriv, *nobody])
            try:
                # This rank runs as root: the agent (uid 65534) must not speak for it.
                rank = start_writer(
                    schedd,
                    "A",
                    tmp_path / "r",
                    chunks=3,
                    pause=0.2,
                    HARMONIA_AGENT=str(agent_socket),
                )
                assert wait_until(lambda: job(schedd, "A").get("processes") == 1)
                result = finish(rank)
            finally:
                agent.send_signal(signal.SIGTERM)
                out, _ = agent.communicate(timeout=10)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert "registration refused" in result["stderr"]
    assert "speaks for uid 65534, not for uid 0" in result["stderr"]
    assert "speaking to the scheduler daemon directly" in result["stderr"]
    # The agent relayed nothing of it to the scheduler.
    assert '"to_scheduler": 0' in out
    assert (tmp_path / "r").read_bytes() == expected_bytes(3)


def test_ranks_leave_a_hung_agent_and_speak_directly(tmp_path: Path) -> None:
    schedd, agent_socket = tmp_path / "s.sock", tmp_path / "agent.sock"
    # A short lease: the daemon drops the hung agent's connection after 2 s.
    with running_daemon(schedd, "--strategy", "2a", "--lease", "2"):
        agent = start_agent(agent_socket, schedd)
        try:
            # The library's default bound on a silent agent (the tests' jobs wait 10 s).
            ranks = start_ranks(
                schedd,
                agent_socket,
                tmp_path,
                2,
                chunks=40,
                HARMONIA_SCHEDD_TIMEOUT="1",
            )
            assert wait_until(lambda: job(schedd, "A").get("in_phase") == 1)
            agent.send_signal(signal.SIGSTOP)
            # The ranks' requests go unanswered: within a few seconds both speak directly, in
            # their phases, and the agent's connection is gone.
            assert wait_until(
                lambda: (
                    job(schedd, "A").get("processes") == 2
                    and job(schedd, "A").get("in_phase") == 2
                ),
                8,
            )
            results = [finish(rank) for rank in ranks]
        finally:
            agent.kill()
            agent.wait(timeout=10)
    for k, result in enumerate(results):
        assert "lost the node agent" in result["stderr"]
        assert (tmp_path / f"r{k}").read_bytes() == expected_bytes(40)


def test_harmonia_run_starts_a_node_agent_for_its_processes(tmp_path: Path) -> None:
    schedd = tmp_path / "s.sock"
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    harmonia = Path(sys.executable).with_name("harmonia")
    writer = Path(__file__).with_name("slow_writer.py")
    # Two processes of one job under one `harmonia run`, each writing for 2 s.
    script = " & ".join(
        f"{sys.executable} {writer} {tmp_path / name} 20 0.1" for name in ("r0", "r1")
    )
    with running_daemon(schedd, "--strategy", "2a"):
        run = subprocess.Popen(
            [str(harmonia), "run", "--schedd", str(schedd), "--job", "J", "--node-agent",
             "--", "sh", "-c", f"{script} & wait"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert wait_until(lambda: job(schedd, "J").get("in_phase") == 1)
        assert job(schedd, "J")["processes"] == 1, (
            "both processes speak through the agent"
        )
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        assert wait_until(lambda: job(schedd, "J") == {})
    for name in ("r0", "r1"):
        assert (tmp_path / name).read_bytes() == expected_bytes(20)


def test_a_restarted_daemon_gets_the_group_back_through_the_agent(
    tmp_path: Path,
) -> None:
    schedd, agent_socket = tmp_path / "s.sock", tmp_path / "agent.sock"
    daemon = start_daemon(schedd, "--strategy", "2a")
    ranks: list[PhaseKeeper] = []
    try:
        with running_agent(agent_socket, schedd):
            ranks = [
                PhaseKeeper(
                    SteppedWriter(
                        schedd,
                        "A",
                        tmp_path / f"r{k}",
                        HARMONIA_AGENT=str(agent_socket),
                    )
                )
                for k in range(2)
            ]
            assert keep_writing(ranks, lambda: job(schedd, "A").get("in_phase") == 1)
            stop_daemon(daemon, hard=True)
            daemon = start_daemon(schedd, "--strategy", "2a")
            # The ranks come back through the agent (one connection), restating their phases.
            assert keep_writing(
                ranks,
                lambda: (
                    job(schedd, "A").get("processes") == 1
                    and job(schedd, "A").get("in_phase") == 1
                ),
            )
            # Both ranks retry every 0.5 s: both are back by now, still as one.
            keep_writing(ranks, lambda: False, timeout=1.0)
            assert job(schedd, "A")["processes"] == 1
            for rank in ranks:
                rank.writer.close()
    finally:
        for rank in ranks:
            rank.writer.kill()
        stop_daemon(daemon)
    for k, rank in enumerate(ranks):
        assert (tmp_path / f"r{k}").read_bytes() == expected_bytes(rank.chunks_written)


def test_a_rank_opening_a_file_another_rank_of_its_group_stages_sees_its_bytes(
    tmp_path: Path,
) -> None:
    """Open-to-open coherence within one group: the daemon asks the opener's own agent too, and
    the agent asks the group's other ranks (docs/node-agent.md)."""
    schedd, agent_socket = tmp_path / "s.sock", tmp_path / "agent.sock"
    with (
        running_daemon(schedd, "--strategy", "2a"),
        running_agent(agent_socket, schedd) as agent,
        # A stays in its phase, writing a chunk every 0.1 s, for as long as the test needs it:
        # a fixed-length phase could end before B (slow to start under load) has staged.
        kept_in_phase(schedd, "A", tmp_path / "a") as busy,
    ):
        writer: SteppedWriter | None = None
        try:
            # B's data waits staged in line behind A (2a), held by one of B's ranks, which
            # registers (at its open) before it writes.
            writer = SteppedWriter(
                schedd, "B", tmp_path / "b", HARMONIA_AGENT=str(agent_socket)
            )
            b = PhaseKeeper(writer)
            assert busy.wait(lambda: job(schedd, "B").get("processes") == 1)
            # B writes until a chunk of its is staged: a first write whose directive is late
            # (the library waits 1 s for it, through the agent; longer under load) goes
            # straight to the file, as it should.
            assert keep_writing(
                [busy, b],
                lambda: (
                    b.chunks_written > 0
                    and (tmp_path / "b").stat().st_size < b.chunks_written * 1_000_000
                ),
            ), "a chunk of B staged"
            seen: list[
                tuple[Any, ...]
            ] = []  # B as the daemon saw it, for a failure's report

            def b_asks_to_flush() -> bool:
                b_job = job(schedd, "B")
                state = (
                    b_job.get("processes"),
                    b_job.get("in_phase"),
                    b_job.get("wants_flush"),
                )
                if not seen or seen[-1][1:] != state:
                    seen.append((round(time.monotonic(), 2), *state))
                return b_job.get("wants_flush") == 1

            if not busy.wait(b_asks_to_flush):
                writer.process.kill()
                agent.terminate()
                pytest.fail(
                    f"B never asked to flush; B seen as (time, processes, in_phase, "
                    f"wants_flush): {seen}; b holds {(tmp_path / 'b').stat().st_size} bytes; "
                    f"the daemon's status: {status(schedd)}; "
                    f"B: {writer.process.communicate(timeout=10)!r}; "
                    f"the agent: {agent.communicate(timeout=10)!r}"
                )
            assert (tmp_path / "b").stat().st_size < b.chunks_written * 1_000_000, (
                "still staged"
            )
            # Another rank of B, through the same agent and group, opens the file while B's
            # data is still staged.
            read_while_busy(
                busy, tmp_path / "b", job_env(schedd, "B", HARMONIA_AGENT=str(agent_socket)),
                chunks=b.chunks_written, why="the read waited for A's phase to end",
            )  # fmt: skip
            assert job(schedd, "B")["processes"] == 1, (
                "both ranks spoke through the agent"
            )
            busy.writer.close()
            writer.close()
        finally:
            if writer:
                writer.kill()
    assert (tmp_path / "a").read_bytes() == expected_bytes(busy.chunks_written)
    assert (tmp_path / "b").read_bytes() == expected_bytes(b.chunks_written)


def _agentd(
    agent_socket: Path,
    schedd: Path,
    args: list[str],
    environment: dict[str, str],
    as_user: list[str] | None = None,
) -> subprocess.Popen[str]:
    """harmonia-agentd with `args` and `environment` added to this one, run after the command
    prefix `as_user` (another user), not waited for."""
    return subprocess.Popen(
        [
            *(as_user or []),
            str(AGENTD),
            "--socket",
            str(agent_socket),
            "--schedd",
            str(schedd),
            *args,
        ],
        env={**os.environ, **environment},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class SilentScheduler:
    """A listener in harmonia-schedd's place that takes connections and their requests and never
    answers (a hung daemon)."""

    def __init__(self, path: Path) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(connection)

    def close(self) -> None:
        # Shut down first: a thread blocked in accept() keeps the descriptor open otherwise.
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=5)
        for connection in self.connections:
            connection.close()


# A rank as its own process: connects to the agent at argv[1], sends the frame argv[3] (hex) and
# prints the seconds until the agent closes the connection (at most argv[2]).
SILENT_RANK = """
import socket, sys, time
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as rank:
    rank.connect(sys.argv[1])
    rank.settimeout(float(sys.argv[2]))
    started = time.monotonic()
    rank.sendall(bytes.fromhex(sys.argv[3]))
    while rank.recv(4096):
        pass
    print(time.monotonic() - started)
"""


@contextmanager
def as_a_job_user() -> Iterator[tuple[list[str], int, Path]]:
    """What a site runs harmonia-agentd and its ranks as, the job's ordinary user: a command
    prefix that runs a program as that user (empty when this test already is not root), the
    user's uid, and a directory of the user's own for their sockets."""
    if os.geteuid() != 0:
        with tempfile.TemporaryDirectory() as directory:
            yield [], os.geteuid(), Path(directory)
        return
    if why := why_no_users():
        pytest.skip(why)
    with made_users("rank") as users, tempfile.TemporaryDirectory() as directory:
        user = users["rank"]
        os.chown(directory, user.pw_uid, user.pw_gid)
        yield run_as(user), user.pw_uid, Path(directory)


@pytest.mark.parametrize(
    ("args", "environment", "bound"),
    [(["--schedd-timeout", "2.5"], {}, 2.5), ([], {"HARMONIA_SCHEDD_TIMEOUT": "2.5"}, 2.5),
     ([], {}, 1.0)],
    ids=["option", "environment", "default"],
)  # fmt: skip
def test_the_agent_waits_for_a_silent_scheduler_as_long_as_it_is_told(
    args: list[str], environment: dict[str, str], bound: float
) -> None:
    """A rank registers through the agent with a scheduler that never answers: the agent gives
    the registration up, closing the rank's connection, after --schedd-timeout seconds (or
    HARMONIA_SCHEDD_TIMEOUT's, the ranks' own bound), 1 s by default, not sooner. The agent and
    its rank run as an ordinary user, as at a site."""
    with as_a_job_user() as (as_user, uid, directory):
        scheduler = SilentScheduler(directory / "schedd.sock")
        (directory / "schedd.sock").chmod(0o666)  # the user's agent connects to it
        agent_socket = directory / "agent.sock"
        agent = _agentd(
            agent_socket, directory / "schedd.sock", args, environment, as_user
        )
        try:
            wait_listening(agent, agent_socket, "harmonia-agentd")
            assert os.stat(f"/proc/{agent.pid}").st_uid == uid, (
                "the agent runs as the user"
            )
            rank = subprocess.run(
                [*as_user, sys.executable, "-c", SILENT_RANK, str(agent_socket),
                 str(bound + 10), register_frame("A").hex()],
                capture_output=True, text=True, check=True, timeout=bound + 20,
            )  # fmt: skip
            waited = float(rank.stdout)
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=10)
            scheduler.close()
    assert bound - 0.05 <= waited < bound + 1.0, waited


@pytest.mark.parametrize(
    ("args", "environment", "message"),
    [(["--schedd-timeout", "0"], {}, "--schedd-timeout 0: expected seconds > 0, at most 3600"),
     (["--schedd-timeout", "4000"], {}, "--schedd-timeout 4000: expected seconds > 0"),
     ([], {"HARMONIA_SCHEDD_TIMEOUT": "abc"}, "HARMONIA_SCHEDD_TIMEOUT=abc: expected seconds > 0"),
     (["--schedd-timeout", "2"], {"HARMONIA_SCHEDD_TIMEOUT": "abc"}, None)],
)  # fmt: skip
def test_a_bad_schedd_timeout_is_named_and_the_agent_does_not_start(
    tmp_path: Path, args: list[str], environment: dict[str, str], message: str | None
) -> None:
    """A bad bound, given or from the environment, is named and refused (exit 2) before the
    agent listens; a good option wins over a bad variable."""
    agent_socket = tmp_path / "agent.sock"
    agent = _agentd(agent_socket, tmp_path / "none.sock", args, environment)
    if message is None:
        try:
            wait_listening(agent, agent_socket, "harmonia-agentd")
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=10)
        return
    _out, err = agent.communicate(timeout=10)
    assert agent.returncode == 2, err
    assert message in err
    assert not agent_socket.exists()
