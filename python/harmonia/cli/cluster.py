"""`harmonia cluster up|restart|down|status|purge`: a Slurm cluster on this machine whose burst
buffers are Harmonia's buffer nodes (docs/slurm.md)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail
from harmonia.names import policy_names
from harmonia.simulator import SimulatorNotFound
from harmonia.slurm import SlurmCluster, SlurmClusterError, SlurmSettings
from harmonia.slurm_bb import RETENTION_HOURS, HookError, Hooks
from harmonia.units import parse_size

cluster = typer.Typer(help="A Slurm cluster with Harmonia's burst buffers on this machine.",
                      no_args_is_help=True)  # fmt: skip

Directory = Annotated[
    Path, typer.Option("--dir", help="The cluster's own directory: configuration, state, logs.")
]


@cluster.command()
def up(
    directory: Directory = Path("harmonia-cluster"),
    nodes: Annotated[int, typer.Option(min=1, max=64, help="slurmd nodes.")] = 2,
    cpus: Annotated[int, typer.Option(min=1, help="CPUs of each slurmd node.")] = 1,
    buffers: Annotated[int, typer.Option(min=1, help="Buffer nodes (harmonia-bbd).")] = 4,
    capacity: Annotated[str, typer.Option(help="Capacity of each buffer node.")] = "1 GiB",
    mode: Annotated[
        str, typer.Option(help="datawarp (reserve for the whole job) or harmonia (a policy).")
    ] = "harmonia",
    policy: Annotated[str, typer.Option(help="Harmonia mode's buffer policy.")] = "max-bandwidth",
    controller_port: Annotated[int, typer.Option(help="slurmctld's port; 0: a free one.")] = 0,
    node_port: Annotated[int, typer.Option(help="The first slurmd's port; 0: free ones.")] = 0,
    keep_on_failure: Annotated[
        bool,
        typer.Option(
            help="Keep a job's buffer space after a failed stage-in or stage-out "
            "(burst_buffer.conf without Flags=TeardownFailure): the job stays held or "
            "in STAGE_OUT until scancel."
        ),
    ] = False,
    retention_hours: Annotated[
        float,
        typer.Option(
            min=0,
            help="Hours the files of a job that were not staged out are kept "
            "before a teardown or `harmonia cluster purge` removes them.",
        ),
    ] = RETENTION_HOURS,
    accounting: Annotated[
        bool,
        typer.Option(
            help="Run slurmdbd on a MariaDB of the cluster's own (in --dir): sacct "
            "shows each job, its burst-buffer space as the bb/lua TRES."
        ),
    ] = False,
) -> None:
    """Start munged, harmonia-schedd with BUFFERS harmonia-bbd nodes, slurmctld and NODES slurmd
    with their configuration generated in --dir; again on a running cluster, do nothing."""
    if mode not in ("datawarp", "harmonia"):
        fail([f"--mode {mode}: expected datawarp or harmonia"], EXIT_INVALID)
    scheduling = tuple(p for p in policy_names() if p != "datawarp")
    if mode == "harmonia" and policy not in scheduling:
        choices = ", ".join(scheduling)
        fail([f"--policy {policy}: expected one of {choices}"], EXIT_INVALID)
    try:
        size = parse_size(capacity)
    except ValueError as error:
        fail([f"--capacity {capacity}: {error}"], EXIT_INVALID)
    if size <= 0:
        fail([f"--capacity {capacity}: must be more than 0 bytes"], EXIT_INVALID)
    settings = SlurmSettings(
        directory, nodes=nodes, cpus=cpus, buffers=buffers, capacity=size,
        policy="datawarp" if mode == "datawarp" else policy,
        controller_port=controller_port, node_port=node_port, keep_on_failure=keep_on_failure,
        retention_hours=retention_hours, accounting=accounting,
    )  # fmt: skip
    try:
        SlurmCluster(settings).up(progress=lambda line: typer.echo(f"harmonia cluster: {line}"))
    except (SlurmClusterError, SimulatorNotFound) as error:
        fail([f"harmonia cluster up: {error}"], EXIT_FAILED)
    typer.echo(
        f"harmonia cluster: up; in a shell:\n  . {settings.directory}/env.sh\n"
        f"  sbatch job.sh   # with #BB_LUA directives (docs/slurm.md)"
    )


@cluster.command()
def restart(
    daemons: Annotated[
        list[str] | None,
        typer.Argument(
            help="munged, harmonia, mariadb, slurmdbd, slurmctld, slurmd (each), "
            "slurmd-hnK or hnK, supervisor; none: all."
        ),
    ] = None,
    directory: Directory = Path("harmonia-cluster"),
) -> None:
    """Stop (when running) and start DAEMONS, recording their PIDs; a node drained because its
    slurmd would not restart is resumed."""
    try:
        SlurmCluster(SlurmSettings(directory)).restart(
            daemons or [], progress=lambda line: typer.echo(f"harmonia cluster: {line}")
        )
    except SlurmClusterError as error:
        fail([f"harmonia cluster restart: {error}"], EXIT_FAILED)


@cluster.command()
def down(directory: Directory = Path("harmonia-cluster")) -> None:
    """Stop everything the cluster runs: its jobs (cancelled; their buffers drained), every
    daemon, restarted ones included, and any process of it left behind."""
    problems = SlurmCluster(SlurmSettings(directory)).down(
        progress=lambda line: typer.echo(f"harmonia cluster: {line}")
    )
    if problems:
        fail([f"harmonia cluster down: {p}" for p in problems], EXIT_FAILED)


@cluster.command()
def status(
    directory: Directory = Path("harmonia-cluster"),
    as_json: Annotated[bool, typer.Option("--json", help="As JSON.")] = False,
) -> None:
    """Which daemons run (restarted by hand too), and each node's state; exit 1 when a daemon
    is not running."""
    found = SlurmCluster(SlurmSettings(directory)).status()
    if not found:
        fail([f"harmonia cluster status: no cluster in {directory}"], EXIT_FAILED)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
    else:
        typer.echo(f"cluster in {found['directory']} (policy {found['policy']}"
                   f"{', accounting' if found['accounting'] else ''}), "
                   f"SLURM_CONF={found['slurm_conf']}")  # fmt: skip
        for name, daemon in found["daemons"].items():
            state = "running" if daemon["running"] else "NOT RUNNING"
            if daemon["running"] and not daemon["recorded"]:
                state += " (restarted outside harmonia cluster)"
            typer.echo(f"  {name:<14} pid {daemon['pid'] or '-':<8} {state}")
        for name, node in found["nodes"].items():
            reason = f"  {node['reason']}" if node.get("reason") else ""
            typer.echo(f"  node {name:<9} {node.get('state', 'unknown')}{reason}")
    if not all(d["running"] for d in found["daemons"].values()):
        raise typer.Exit(EXIT_FAILED)


@cluster.command()
def purge(
    directory: Directory = Path("harmonia-cluster"),
    older_than: Annotated[
        float | None,
        typer.Option(min=0, help="Hours; default: the cluster's --retention-hours."),
    ] = None,
) -> None:
    """Remove the kept files of jobs torn down without staging them out, older than the
    retention time; each removal is a line here and in jobs/harmonia-bb.log."""
    config = directory / "etc" / "harmonia-bb.json"
    try:
        hooks = Hooks(json.loads(config.read_text()))
        removed = hooks.purge("" if older_than is None else str(older_than))
    except (OSError, ValueError, HookError) as error:
        fail([f"harmonia cluster purge: {config}: {error}"], EXIT_FAILED)
    typer.echo(removed or "harmonia cluster purge: nothing older than the retention time")
