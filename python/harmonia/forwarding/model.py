"""Forwarding-layer scenarios (`harmonia fwdsim`, docs/forwarding-simulation.md): the TOML users
write, its validation, the normalized JSON `harmonia-fwdsim` reads, and the runs of a scenario:
every scheduler (and "none", no forwarding) with all applications together, and each
application alone when there are several, for the interference factor."""

import json
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harmonia.names import one_of, request_scheduler_names
from harmonia.scenario import (
    Name,
    PositiveBandwidth,
    PositiveSize,
    ScenarioError,
    _read_toml,
    _validate,
)
from harmonia.simulator import find_tool


def _scheduler_choices() -> tuple[str, ...]:
    """The request schedulers, and "none" (no forwarding layer)."""
    return (*request_scheduler_names(), "none")


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Disk(_Table):
    # One data server's disk: a sequential stream of large requests gets `peak_bw`; n concurrent
    # requests share peak_bw / (1 + contention (n - 1)); a request of `size_half` bytes runs at
    # half speed (efficiency size / (size + size_half)).
    peak_bw: PositiveBandwidth = 150e6
    contention: float = Field(default=0.1, ge=0, le=10, allow_inf_nan=False)
    size_half: PositiveSize = 32 * 1024


class App(_Table):
    name: Name
    clients: int = Field(ge=1, le=100_000)
    pattern: Literal["file-per-process", "shared-contiguous", "shared-strided"]
    op: Literal["read", "write"]
    request: PositiveSize
    requests: int = Field(ge=1, le=1_000_000)  # per client


class Forwarding(_Table):
    name: Name
    description: str = ""
    servers: int = Field(ge=1, le=4096)
    nodes: int = Field(ge=1, le=4096)  # forwarding nodes
    node_threads: int = Field(default=4, ge=1, le=1024)  # requests a node has at the servers
    stripe: PositiveSize = 1 << 20
    link_bw: PositiveBandwidth = 1.25e9  # every host's link to the switch
    schedulers: list[Annotated[str, one_of(_scheduler_choices)]] = Field(
        default=["fifo", "twins", "none"], min_length=1
    )
    options: dict[str, str] = {}  # request-scheduler options, e.g. "twins.window_us" = "1000"
    disk: Disk = Disk()
    apps: list[App] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _names_unique(self) -> "Forwarding":
        names = [a.name for a in self.apps]
        if len(set(names)) != len(names):
            raise ValueError("application names must be unique")
        return self


class ForwardingScenario(_Table):
    forwarding: Forwarding


def is_forwarding_scenario(document: dict[str, Any]) -> bool:
    return "forwarding" in document


def load_forwarding(path: Path) -> Forwarding:
    """Read and validate a forwarding scenario; raises ScenarioError (`FILE: key: reason`)."""
    scenario = _validate(ForwardingScenario, _read_toml(path), path)
    f = scenario.forwarding
    if sum(a.clients for a in f.apps) < f.nodes:
        raise ScenarioError([f"{path}: forwarding.nodes: more forwarding nodes than clients"])
    return f


def normalize(
    f: Forwarding, scheduler: str, apps: list[App], alone: str | None = None
) -> dict[str, Any]:
    """The JSON harmonia-fwdsim reads for one run; with `alone`, only that application issues
    requests, the others' clients stay idle in their places on the forwarding nodes."""
    return {
        "seed": 1,
        "platform": {
            "link_bw": f.link_bw, "servers": f.servers, "nodes": f.nodes,
            "node_threads": f.node_threads, "stripe": f.stripe,
            "disk": {"peak_bw": f.disk.peak_bw, "contention": f.disk.contention,
                     "size_half": f.disk.size_half},
        },
        "forwarding": {
            "enabled": scheduler != "none",
            "scheduler": "fifo" if scheduler == "none" else scheduler,
            "options": dict(f.options),
        },
        "apps": [{**a.model_dump(), "idle": alone is not None and a.name != alone} for a in apps],
    }  # fmt: skip


class FwdsimFailed(Exception):
    """harmonia-fwdsim failed; the message has its stderr."""


def run_one(config: dict[str, Any]) -> dict[str, Any]:
    binary = find_tool("harmonia-fwdsim", "HARMONIA_FWDSIM", "src/fwdsim/harmonia-fwdsim")
    with tempfile.TemporaryDirectory(prefix="harmonia-fwdsim-") as work:
        path = Path(work) / "config.json"
        path.write_text(json.dumps(config))
        done = subprocess.run(
            [str(binary), "--config", str(path)], capture_output=True, text=True, check=False,
            timeout=3600,
        )  # fmt: skip
    if done.returncode != 0:
        raise FwdsimFailed(done.stderr.strip() or f"harmonia-fwdsim exited {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run_scenario(
    f: Forwarding, jobs: int, progress: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """Every scheduler with all applications; with several applications, each one alone too.
    Returns results by run name ("twins", "twins/alone/A", ...)."""
    runs: dict[str, dict[str, Any]] = {}
    for scheduler in f.schedulers:
        runs[scheduler] = normalize(f, scheduler, list(f.apps))
        if len(f.apps) > 1:
            for app in f.apps:
                runs[f"{scheduler}/alone/{app.name}"] = normalize(
                    f, scheduler, list(f.apps), alone=app.name
                )
    results: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {name: pool.submit(run_one, config) for name, config in runs.items()}
        for name, future in futures.items():
            results[name] = future.result()
            progress(name)
    return results


def summarize(f: Forwarding, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per scheduler: per-application bandwidth and interference, the mean size of what
    the forwarding nodes sent, and the mean concurrency at the data servers while busy."""
    rows = []
    for scheduler in f.schedulers:
        result = results[scheduler]
        row: dict[str, Any] = {
            "scheduler": scheduler,
            "makespan": result["makespan"],
            "mean_dispatch_bytes": result["mean_dispatch_bytes"],
            "server_concurrency": sum(s["mean_concurrency_when_busy"] for s in result["servers"])
            / len(result["servers"]),
            "apps": {},
        }
        for app in result["apps"]:
            entry = {"bandwidth": app["bandwidth"], "time": app["time"]}
            alone = results.get(f"{scheduler}/alone/{app['name']}")
            if alone is not None:
                entry["interference"] = app["time"] / alone["apps"][0]["time"]
            row["apps"][app["name"]] = entry
        rows.append(row)
    return rows
