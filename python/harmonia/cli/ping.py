"""`harmonia ping`: whether the scheduler and buffer nodes answer, for scripts and health checks
(exit 0: all answered; 1: one did not)."""

import json
import subprocess
import time
from typing import Annotated, Any

import typer

from harmonia.cli import EXIT_FAILED, fail
from harmonia.simulator import SimulatorNotFound, find_tool


def _ask(command: list[str], timeout: float) -> tuple[dict[str, Any] | None, str, float]:
    """Runs a status command: its JSON answer (None when it failed), why not, and the seconds."""
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout:g} s", time.monotonic() - start
    seconds = time.monotonic() - start
    if done.returncode != 0:
        return None, done.stderr.strip() or f"exit {done.returncode}", seconds
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer, "", seconds


def ping(
    schedd: Annotated[
        str | None, typer.Option(help="Scheduler address (default $HARMONIA_SCHEDD or the socket).")
    ] = None,
    node: Annotated[
        list[str] | None,
        typer.Option(help="Also ask this buffer node (HOST:PORT) directly; repeatable."),
    ] = None,
    all_nodes: Annotated[
        bool,
        typer.Option(help="Fail unless every buffer node the scheduler knows is connected."),
    ] = False,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds to wait for each answer.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Ask harmonia-schedd (and, with --node, buffer nodes) for their status: one line each, and
    exit 0 when every one answered (1 otherwise)."""
    from harmonia.coordination import default_address

    address = schedd or default_address()
    try:
        schedctl = find_tool(
            "harmonia-schedctl", "HARMONIA_SCHEDCTL", "src/schedd/harmonia-schedctl"
        )
        bbctl = (
            find_tool("harmonia-bbctl", "HARMONIA_BBCTL", "src/bbd/harmonia-bbctl")
            if node
            else None
        )
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)
    results: list[dict[str, Any]] = []
    state, why, seconds = _ask(
        [str(schedctl), "--address", address, "status", "--compact"], timeout
    )
    result: dict[str, Any] = {"daemon": "harmonia-schedd", "address": address,
                              "ok": state is not None, "seconds": round(seconds, 6)}  # fmt: skip
    if state is None:
        result["error"] = why
    else:
        buffers = state.get("buffers", [])
        connected = sum(1 for b in buffers if b.get("connected"))
        result |= {"uptime_seconds": state.get("uptime_seconds", 0),
                   "jobs": len(state.get("jobs", [])),
                   "buffer_nodes": len(buffers), "buffer_nodes_connected": connected}  # fmt: skip
        if all_nodes and connected < len(buffers):
            result["ok"] = False
            result["error"] = (
                f"{len(buffers) - connected} of {len(buffers)} buffer nodes not connected"
            )
    results.append(result)
    for where in node or []:
        status, why, seconds = _ask([str(bbctl), "--node", where, "status"], timeout)
        entry: dict[str, Any] = {
            "daemon": "harmonia-bbd",
            "address": where,
            "ok": status is not None,
            "seconds": round(seconds, 6),
        }
        if status is None:
            entry["error"] = why
        else:
            entry |= {
                "used": int(status.get("used", 0)),
                "capacity": int(status.get("capacity", 0)),
                "draining": bool(status.get("draining", False)),
            }
        results.append(entry)
    if as_json:
        typer.echo(json.dumps(results, indent=1))
    else:
        for r in results:
            if "error" in r and "uptime_seconds" not in r:
                line = f"{r['daemon']} at {r['address']}: DOWN ({r['error']})"
            elif r["daemon"] == "harmonia-schedd":
                line = (f"harmonia-schedd at {r['address']}: up {r['uptime_seconds']:.0f} s, "
                        f"{r['jobs']} jobs, {r['buffer_nodes_connected']}/{r['buffer_nodes']} "
                        f"buffer nodes connected ({r['seconds'] * 1e3:.0f} ms)")  # fmt: skip
                if "error" in r:
                    line += f": {r['error']}"
            else:
                line = (f"harmonia-bbd at {r['address']}: up, {r['used']} of {r['capacity']} "
                        f"bytes held{', draining' if r['draining'] else ''} "
                        f"({r['seconds'] * 1e3:.0f} ms)")  # fmt: skip
            typer.echo(line, err=not r["ok"])
    if not all(r["ok"] for r in results):
        raise typer.Exit(EXIT_FAILED)
