"""`harmonia status`: the scheduler daemon's view of jobs, phases and directives."""

import json
import subprocess
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from harmonia.cli import EXIT_FAILED, fail
from harmonia.simulator import SimulatorNotFound, find_tool


def query_status(address: str) -> dict[str, Any]:
    """The daemon's Status message as a dict; raises RuntimeError when it cannot be reached."""
    tool = find_tool("harmonia-schedctl", "HARMONIA_SCHEDCTL", "src/schedd/harmonia-schedctl")
    done = subprocess.run(
        [str(tool), "--address", address, "status", "--compact"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"harmonia-schedctl exited {done.returncode}")
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def _directive(d: dict[str, Any]) -> str:
    parts = ["stage" if d.get("mode") == "MODE_STAGE" else "write through"]
    parts.append("may flush" if d.get("flush_allowed") else "flush waits")
    if d.get("servers"):
        parts.append("servers " + ",".join(str(s) for s in d["servers"]))
    if d.get("min_request_gap"):
        parts.append(f"gap {d['min_request_gap'] * 1e3:g} ms")
    return ", ".join(parts)


def status(
    schedd: Annotated[
        str | None, typer.Option(help="Daemon address (default $HARMONIA_SCHEDD or the socket).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw status as JSON.")] = False,
) -> None:
    """Show the jobs the daemon knows, their I/O phases and the directives in force."""
    from harmonia.coordination import default_address

    address = schedd or default_address()
    try:
        state = query_status(address)
    except (RuntimeError, SimulatorNotFound) as error:
        fail([f"{address}: {error}"], EXIT_FAILED)
    if as_json:
        typer.echo(json.dumps(state, indent=1))
        return
    # A line of its own: as a table title it would wrap to the table's width.
    typer.echo(
        f"harmonia-schedd at {address}: strategy {state['strategy']}, flush order "
        f"{state['flush_order']}, {state['pfs_servers']} PFS servers, "
        f"up {state['uptime_seconds']:.0f} s, {state['requests']} requests, "
        f"{state.get('pushes', 0)} pushes"
    )
    table = Table()
    for column in ("job", "name", "processes", "in phase", "flush waits", "phases", "directive"):
        table.add_column(
            column, justify="left" if column in ("job", "name", "directive") else "right"
        )
    for job in state["jobs"]:
        table.add_row(
            job["job"],
            job["name"],
            f"{job['processes']}/{job['ranks']}",
            str(job["in_phase"]),
            str(job["wants_flush"]),
            str(job["phases"]),
            _directive(job["directive"]),
        )
    Console().print(table)
    if not state["jobs"]:
        typer.echo("no jobs registered")
