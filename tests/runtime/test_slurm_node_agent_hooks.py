"""harmonia-node-agent.sh's four hooks run as slurmd and slurmstepd run them (root for the
Prolog and Epilog, the job's user `nobody` for the task hooks, SLURM_SCRIPT_CONTEXT naming the
hook), without Slurm: the cases a real job does not reach (docs/node-agent.md, "Under Slurm")."""

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bbio_support import BUILD, LIBRARY
from harmonia.slurm import node_agent_script, pid_alive

AGENTD = BUILD / "src" / "agent" / "harmonia-agentd"
USER = "nobody"


def _why_not() -> str:
    if os.geteuid() != 0:
        return "the Prolog and Epilog run as root, the task hooks as another user"
    for tool in ("runuser", "flock", "setsid"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: util-linux)"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no user {USER}"
    return "" if AGENTD.is_file() else "harmonia-agentd is not built"


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "-")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended
        return b""


class Hooks:
    def __init__(self, root: Path) -> None:
        self.base = root / "agents"
        self.script = root / "harmonia-node-agent.sh"
        self.script.write_text(node_agent_script(str(AGENTD), self.base))
        self.script.chmod(0o755)
        self.uid = pwd.getpwnam(USER).pw_uid
        self.job_dir = self.base / "7.n0"

    def run(self, context: str, as_user: bool = False, **env: str) -> str:
        variables = {"PATH": os.environ["PATH"], "SLURM_SCRIPT_CONTEXT": context,
                     "SLURM_JOB_ID": "7", "SLURMD_NODENAME": "n0",
                     "SLURM_JOB_UID": str(self.uid), "SLURM_JOB_GID": "65534", **env}  # fmt: skip
        command = [str(self.script)]
        if as_user:
            command = ["runuser", "-u", USER, "--", "env", *[f"{k}={v}" for k, v in
                                                              variables.items()], *command]  # fmt: skip
        done = subprocess.run(command, env=variables, capture_output=True, text=True,
                              timeout=30, check=False)  # fmt: skip
        assert done.returncode == 0, (
            done.stderr
        )  # a hook never fails a job or drains a node
        return done.stdout

    def task(self, context: str, procid: int, **env: str) -> subprocess.Popen[str]:
        variables = {"SLURM_SCRIPT_CONTEXT": context, "SLURM_JOB_ID": "7",
                     "SLURMD_NODENAME": "n0", "SLURM_STEP_ID": "0",
                     "SLURM_PROCID": str(procid), "HARMONIA_NODE_AGENT": "1",
                     "HARMONIA_SCHEDD": "/nonexistent/schedd.sock",
                     "LD_PRELOAD": str(LIBRARY.resolve()), **env}  # fmt: skip
        return subprocess.Popen(
            ["runuser", "-u", USER, "--", "env", f"PATH={os.environ['PATH']}",
             *[f"{k}={v}" for k, v in variables.items()], str(self.script)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    # Not pytest's tmp_path (root's, 0700): the job's user must reach its directory.
    root = Path(tempfile.mkdtemp(prefix="harmonia-agent-hooks-"))
    root.chmod(0o755)
    h = Hooks(root)
    try:
        yield h
    finally:
        h.run("epilog_slurmd")  # stops any agent a failed test left
        shutil.rmtree(root, ignore_errors=True)


def test_the_prolog_makes_the_users_directory_only_under_a_closed_base(
    hooks: Hooks,
) -> None:
    for gid in ("65534", ""):  # without SLURM_JOB_GID: the user's, with root's group
        hooks.run("prolog_slurmd", SLURM_JOB_GID=gid)
        info = hooks.job_dir.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (hooks.uid, 0o700), gid
        shutil.rmtree(hooks.job_dir)
    # A base others may write to: a user could have put the job's directory there first.
    hooks.base.chmod(0o777)
    hooks.run("prolog_slurmd")
    assert not hooks.job_dir.exists()


def test_eight_concurrent_tasks_share_one_agent_which_the_last_task_epilog_stops(
    hooks: Hooks,
) -> None:
    hooks.run("prolog_slurmd")
    prologs = [hooks.task("prolog_task", k) for k in range(8)]
    outputs = [p.communicate(timeout=30)[0] for p in prologs]
    socket_path = hooks.job_dir / "0.sock"
    assert outputs == [f"export HARMONIA_AGENT={socket_path}\n"] * 8, outputs
    pid = int((hooks.job_dir / "0.pid").read_text())
    agents = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and pid_alive(int(entry.name))
        and str(socket_path).encode() in _read(entry / "cmdline")
    ]  # fmt: skip
    assert agents == [pid]  # one agent, the one the PID file names
    # It runs as the user, without libharmonia, in a session of its own.
    status = Path(f"/proc/{pid}/status").read_text()
    assert f"Uid:\t{hooks.uid}\t" in status
    assert b"LD_PRELOAD" not in Path(f"/proc/{pid}/environ").read_bytes()
    assert os.getsid(pid) == pid
    for k in (7, 2, 0, 5, 3, 6, 4):
        hooks.task("epilog_task", k).communicate(timeout=30)
        assert pid_alive(pid), k
    hooks.task("epilog_task", 1).communicate(timeout=30)
    assert not pid_alive(pid) and not socket_path.exists()
    assert (
        '"from_ranks": 0' in (hooks.job_dir / "0.log").read_text()
    )  # it stopped on SIGTERM


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"HARMONIA_NODE_AGENT": "maybe"},
            "HARMONIA_NODE_AGENT=maybe: expected 1 or 0",
        ),
        ({"HARMONIA_SCHEDD": ""}, "HARMONIA_SCHEDD is not set"),
    ],
)
def test_a_task_that_cannot_have_an_agent_keeps_speaking_to_the_daemon(
    hooks: Hooks, env: dict[str, str], said: str
) -> None:
    hooks.run("prolog_slurmd")
    out, _ = hooks.task(
        "prolog_task", 0, HARMONIA_AGENT="/elsewhere.sock", **env
    ).communicate(timeout=30)
    lines = out.splitlines()
    assert lines[-1] == "unset HARMONIA_AGENT" and said in lines[0], lines
    assert lines[0].startswith("print harmonia: ")
    assert not (hooks.job_dir / "0.pid").exists()


def test_a_task_prolog_without_the_prologs_directory_starts_nothing(
    hooks: Hooks,
) -> None:
    out, _ = hooks.task("prolog_task", 0).communicate(timeout=30)
    assert "is not this user's directory" in out and out.endswith(
        "unset HARMONIA_AGENT\n"
    )
    # A job that does not ask gets nothing, not even a message.
    out, _ = hooks.task("prolog_task", 0, HARMONIA_NODE_AGENT="0").communicate(
        timeout=30
    )
    assert out == ""


def test_the_epilog_stops_only_the_jobs_agent(hooks: Hooks) -> None:
    hooks.run("prolog_slurmd")
    hooks.task("prolog_task", 0).communicate(timeout=30)
    agent = int((hooks.job_dir / "0.pid").read_text())
    # PID files the user wrote: a process of root's whose command line names the job's
    # directory, one of the user's that is no agent of this job, and a FIFO that would block
    # a reader.
    root_sleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                   "--socket", f"{hooks.job_dir}/0.sock"])  # fmt: skip
    users_sleep = subprocess.Popen(["setpriv", f"--reuid={hooks.uid}", "--regid=65534",
                                    "--clear-groups", "sleep", "60"])  # fmt: skip
    try:
        (hooks.job_dir / "root.pid").write_text(f"{root_sleep.pid}\n")
        (hooks.job_dir / "user.pid").write_text(f"{users_sleep.pid}\n")
        os.mkfifo(hooks.job_dir / "fifo.pid")
        started = time.monotonic()
        hooks.run("epilog_slurmd")
        assert time.monotonic() - started < 5
        assert not pid_alive(agent) and not hooks.job_dir.exists()
        assert pid_alive(root_sleep.pid) and pid_alive(users_sleep.pid)
    finally:
        for other in (root_sleep, users_sleep):
            other.send_signal(signal.SIGTERM)
            other.wait(timeout=10)
    log = (hooks.base / "node-agent.log").read_text()
    stopped = [line.split(": ", 1)[1] for line in log.splitlines() if "epilog" in line]
    assert stopped == [f"epilog: stopped harmonia-agentd pid {agent}"], log
