"""`harmonia run -- CMD`: run a job under libharmonia, coordinated by harmonia-schedd."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.simulator import SimulatorNotFound, find_tool
from harmonia.sockets import accepting


def run(
    command: Annotated[list[str], typer.Argument(help="The job's command line (after --).")],
    schedd: Annotated[
        str | None, typer.Option(help="Daemon address (default $HARMONIA_SCHEDD or the socket).")
    ] = None,
    job: Annotated[
        str | None, typer.Option(help="Job key (default: Slurm or MPI job id, else per process).")
    ] = None,
    priority: Annotated[int | None, typer.Option(help="Priority for priority flushing.")] = None,
    node_agent: Annotated[
        bool,
        typer.Option(
            "--node-agent",
            help="Start a node agent (harmonia-agentd) for CMD's processes on this node: they "
            "speak to the daemon through it, 64 per connection (docs/node-agent.md).",
        ),
    ] = False,
) -> None:
    """Run CMD with libharmonia preloaded and HARMONIA_SCHEDD set: it registers with the daemon,
    reports its I/O phases and follows the daemon's directives. All processes CMD starts (MPI
    ranks under mpirun -x, forks) inherit the settings."""
    from harmonia.coordination import default_address, job_environment

    program = shutil.which(command[0])
    if program is None:
        fail([f"{command[0]}: command not found"], EXIT_INVALID)
    address = schedd or default_address()
    try:
        env = job_environment(address, job, priority)
        if not node_agent:
            os.execve(program, command, {**os.environ, **env})
        agentd = find_tool("harmonia-agentd", "HARMONIA_AGENTD", "src/agent/harmonia-agentd")
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    raise typer.Exit(_run_with_agent(agentd, address, job, [program, *command[1:]], env))


def _run_with_agent(
    agentd: Path, address: str, job: str | None, command: list[str], env: dict[str, str]
) -> int:
    """Runs `command` with a node agent of its own, stopped (by its PID) when it ends; the
    command's exit status. If the agent cannot start, the command speaks to the daemon
    directly."""
    with tempfile.TemporaryDirectory(prefix="harmonia-agent-") as directory:
        socket_path = Path(directory) / "agent.sock"
        agent = subprocess.Popen(
            [str(agentd), "--socket", str(socket_path), "--schedd", address]
            + (["--job", job] if job else []),
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 5
            ready = accepting(socket_path)
            while not ready and agent.poll() is None and time.monotonic() <= deadline:
                time.sleep(0.01)
                ready = accepting(socket_path)
            if ready:
                env = {**env, "HARMONIA_AGENT": str(socket_path)}
            else:
                print(
                    "harmonia run: the node agent did not start; the processes speak to "
                    "the daemon directly",
                    file=sys.stderr,
                )
            return subprocess.run(command, env={**os.environ, **env}, check=False).returncode
        finally:
            if agent.poll() is None:
                agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
