"""`harmonia up --buffers N`: a scheduler daemon and N buffer nodes on this machine, for trying
the burst-buffer scheduler out (docs/buffer-nodes.md); `harmonia reproduce buffers`: the VPIC
buffer-draining case on this machine, real and simulated (harmonia.buffers.experiment)."""

import os
import shlex
import shutil
import signal
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from harmonia.buffers.cluster import (
    BufferCluster,
    ClusterError,
    ClusterSettings,
    device_directory,
    open_run_directory,
)
from harmonia.cli import EXIT_FAILED, EXIT_INVALID, OnlyPolicies, OutDir, Repeat, fail, show_report
from harmonia.names import policy_names
from harmonia.policies import parse_policies
from harmonia.profiler import ProfileError
from harmonia.simulator import SimulatorNotFound
from harmonia.units import format_size, parse_size


class _Stop(Exception):
    """SIGTERM or SIGINT: drain and stop."""


def _raise_stop(_signal: int, _frame: FrameType | None) -> None:
    raise _Stop


def _summary(status: dict[str, Any], running: list[bool]) -> str:
    if not status:
        return "harmonia-schedd does not answer"
    nodes = []
    for b in status.get("buffers", []):
        k = int(b.get("index", 0))
        if k < len(running) and not running[k]:
            state = "DEAD"
        elif not b.get("connected"):
            state = "DOWN"
        else:
            state = "draining" if b.get("draining") else "up"
        nodes.append(
            f"bb{b.get('index', 0)} {format_size(int(b.get('used', 0)))} held, "
            f"{format_size(int(b.get('drained_bytes', 0)))} drained, {state}"
        )
    jobs = len(status.get("jobs", []))
    return f"{jobs} job{'s' * (jobs != 1)} | " + " | ".join(nodes)


def up(
    buffers: Annotated[int, typer.Option(min=1, help="Buffer nodes (harmonia-bbd) to start.")] = 4,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="Holds pfs/ (the PFS the nodes drain to), bb0/.., logs; yours alone (not "
            "writable by others). Default: /run/harmonia-up for root, else a new private one "
            "under /tmp.",
        ),
    ] = None,
    capacity: Annotated[str, typer.Option(help="Capacity of each node.")] = "1 GiB",
    policy: Annotated[str, typer.Option(help="Buffer policy (`harmonia describe` lists them).")] = (
        "max-bandwidth"
    ),
    flush_threshold: Annotated[
        float, typer.Option(min=0, max=1, help="Fill at which nodes drain (section V-D).")
    ] = 0.5,
    backup_flushers: Annotated[
        int, typer.Option(min=0, help="Nodes that may drain exclusively at once (section V-D).")
    ] = 0,
    drain_scheduler: Annotated[
        str, typer.Option(help="Request scheduler ordering each node's drains (fifo, sjf, ...).")
    ] = "fifo",
    sync: Annotated[
        str, typer.Option(help="When nodes acknowledge a write: none (page cache) or data (disk).")
    ] = "none",
    every: Annotated[float, typer.Option(min=0.1, help="Seconds between status lines.")] = 2.0,
) -> None:
    """Start harmonia-schedd with a burst-buffer policy and BUFFERS harmonia-bbd nodes, print the
    environment jobs need, and show the nodes' state until Ctrl-C; then drain every node to the
    PFS and stop. Started again on the same --dir, the nodes recover what they held."""
    if directory is None:
        # Never a name another user could have made first (they could plant links in it).
        directory = (
            Path("/run/harmonia-up")
            if os.getuid() == 0
            else Path(tempfile.mkdtemp(prefix="harmonia-up-"))
        )
    try:
        settings = ClusterSettings(
            directory.absolute(), buffers=buffers, capacity=parse_size(capacity), policy=policy,
            flush_threshold=flush_threshold, backup_flushers=backup_flushers,
            drain_scheduler=drain_scheduler, sync=sync,
        )  # fmt: skip
    except ValueError as error:
        fail([f"--capacity: {error}"], EXIT_INVALID)
    if settings.capacity <= 0:
        fail([f"--capacity {capacity}: must be more than 0 bytes"], EXIT_INVALID)
    if policy not in policy_names():
        fail([f"--policy {policy}: expected one of {', '.join(policy_names())}"], EXIT_INVALID)
    if sync not in ("none", "data"):
        fail([f"--sync {sync}: expected none or data"], EXIT_INVALID)
    if backup_flushers >= buffers:
        fail([f"--backup-flushers {backup_flushers}: at most --buffers - 1"], EXIT_INVALID)
    cluster = BufferCluster(settings)
    try:  # the nodes' devices, the PFS, the logs and env.sh all go there
        cluster.run_fd = open_run_directory(settings.directory)
        tempfile.TemporaryFile(dir=cluster.run_path("")).close()
    except ClusterError as error:
        fail([f"--dir {error}"], EXIT_INVALID)
    except OSError as error:
        cluster.stop()
        fail([f"--dir {directory}: cannot write there: {error.strerror or error}"], EXIT_INVALID)
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    try:
        try:
            cluster.start()
        except (ClusterError, SimulatorNotFound, OSError) as error:
            cluster.stop()
            fail([f"harmonia up: {error} (logs in {settings.directory})"], EXIT_FAILED)
        env_file = settings.directory / "env.sh"
        cluster.write_file(
            "env.sh", "".join(f"export {k}={shlex.quote(v)}\n" for k, v in cluster.env().items())
        )
        typer.echo(
            f"harmonia up: harmonia-schedd at {cluster.socket} (policy {policy}), {buffers} "
            f"buffer nodes of {format_size(settings.capacity)} draining to {cluster.pfs}\n"
            f"jobs write under {cluster.pfs} with the environment in {env_file}:\n"
            f"  . {env_file}\n"
            f"  mpirun -x LD_PRELOAD -x HARMONIA_SCHEDD -x HARMONIA_BUFFER_ROOT "
            f"-x HARMONIA_STAGE_INCLUDE -x HARMONIA_JOB=A ... ./app\n"
            f"Ctrl-C drains every node to {cluster.pfs} and stops."
        )
        last = ""
        while True:
            # A daemon that died is started again: a node recovers what it held.
            for said in cluster.revive():
                typer.echo(f"{time.strftime('%H:%M:%S')} harmonia up: {said}")
            line = _summary(cluster.status(), cluster.running())
            if line != last:
                typer.echo(f"{time.strftime('%H:%M:%S')} {line}")
                last = line
            time.sleep(every)
    except _Stop:
        # A second Ctrl-C must not cut the drain short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        typer.echo("harmonia up: draining the nodes to the PFS")
        failures = cluster.drain_all()
        cluster.stop()
        if failures:
            fail([f"harmonia up: {f}; the node keeps it (start again to drain)" for f in failures],
                 EXIT_FAILED)  # fmt: skip
        typer.echo("harmonia up: stopped")


def reproduce_buffers(
    out: OutDir = Path("results/reproduction-buffers"),
    only: OnlyPolicies = "all",
    repeat: Repeat = 1,
) -> None:
    """The paper's VPIC draining case (Fig. 9) for real on this machine, next to the
    simulator's prediction."""
    from harmonia.buffers.experiment import DrainingCase, run_case, write_outputs
    from harmonia.scenario import ScenarioError

    try:
        policies = tuple(parse_policies(only))
    except ValueError as error:
        fail([f"--only: {error}"], EXIT_INVALID)
    case = DrainingCase(policies=policies, repeat=repeat)
    devices, _ = device_directory(4 << 30)
    try:
        outcome = run_case(case, out, devices, lambda line: typer.echo(line, err=True))
    except (ClusterError, ProfileError, ScenarioError, SimulatorNotFound, OSError) as error:
        fail([f"harmonia reproduce buffers: {error}"], EXIT_FAILED)
    finally:
        shutil.rmtree(devices, ignore_errors=True)
    show_report(write_outputs(outcome, out), out)
