"""The coordination service from Python: the site configuration of `harmonia schedd`, where the
daemon listens, and how to run a job under libharmonia (docs/control.md)."""

import json
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from harmonia.names import coordination_default, flush_order_names, one_of, strategy_names
from harmonia.scenario import ScenarioError, _read_toml, _validate
from harmonia.simulator import find_tool
from harmonia.units import parse_size

DEFAULT_SOCKET = "/tmp/harmonia-schedd.sock"


def default_address() -> str:
    """$HARMONIA_SCHEDD, else the default Unix socket."""
    return os.environ.get("HARMONIA_SCHEDD") or DEFAULT_SOCKET


def _output_cap(value: object) -> int:
    """harmonia-schedd --max-output: a size of at least 1 MiB (docs/limits.md)."""
    size = parse_size(value)
    if size < 1 << 20:
        raise ValueError(f"must be at least 1 MiB, got {json.dumps(value)}")
    return size


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Schedd(_Table):
    socket: str = DEFAULT_SOCKET  # "" to listen on TCP only
    # "HOST:PORT": a loopback address (its peers known from the kernel), or, with auth = "munge",
    # any address (every TCP client from another host authenticates)
    tcp: str = ""
    strategy: Annotated[str, one_of(strategy_names)] = "none"
    flush_order: Annotated[str, one_of(flush_order_names)] = "free"
    # seconds, flush_order=window
    window: float = Field(
        default_factory=lambda: coordination_default("window"), gt=0, allow_inf_nan=False
    )
    pfs_servers: int = Field(default=1, ge=1, le=65536)
    throttle_gap: float = Field(  # seconds
        default_factory=lambda: coordination_default("throttle_gap"),
        gt=0,
        le=10,
        allow_inf_nan=False,
    )
    lease: float = Field(default=10.0, gt=0, le=3600, allow_inf_nan=False)  # seconds
    tick: float = Field(default=0.05, ge=0.001, le=10, allow_inf_nan=False)  # seconds
    # Replies queued for all clients together; past it the client holding most is dropped.
    max_output: Annotated[int, BeforeValidator(_output_cap)] = 256 << 20
    # A flush token held longer than this while others wait passes on (0: never).
    max_token_seconds: float = Field(
        default_factory=lambda: coordination_default("max_token_seconds"),
        ge=0,
        le=86400,
        allow_inf_nan=False,
    )
    max_ranks: int = Field(default=1 << 20, ge=1, le=1 << 30)  # processes a job may declare
    # Identity (docs/security.md): TCP clients prove their user with MUNGE ("munge") or not.
    auth: Literal["peer", "munge"] = "peer"
    munge_socket: str = ""  # munged's socket ("": HARMONIA_MUNGE_SOCKET, else munged's own)
    auth_window: float = Field(default=60.0, ge=1, le=3600, allow_inf_nan=False)  # seconds
    admin_uids: list[Annotated[int, Field(ge=0, le=(1 << 32) - 2)]] = []  # act for any job


class SiteConfig(_Table):
    schedd: Schedd = Schedd()


def load_site_config(path: Path) -> SiteConfig:
    """Read and validate a site file; raises ScenarioError with `FILE: key: reason` lines."""
    config = _validate(SiteConfig, _read_toml(path), path)
    if not config.schedd.socket and not config.schedd.tcp:
        raise ScenarioError([f"{path}: schedd.socket: give a socket path or schedd.tcp"])
    return config


def daemon_command(config: SiteConfig) -> list[str]:
    """The harmonia-schedd command line for `config`."""
    s = config.schedd
    command = [
        str(find_tool("harmonia-schedd", "HARMONIA_SCHEDD_BIN", "src/schedd/harmonia-schedd"))
    ]
    if s.socket:
        command += ["--socket", s.socket]
    if s.tcp:
        command += ["--tcp", s.tcp]
    command += [
        "--strategy", s.strategy,
        "--flush-order", s.flush_order,
        "--window", repr(s.window),
        "--pfs-servers", str(s.pfs_servers),
        "--throttle-gap", repr(s.throttle_gap),
        "--lease", repr(s.lease),
        "--tick", repr(s.tick),
        "--max-output", str(s.max_output),
        "--max-token-seconds", repr(s.max_token_seconds),
        "--max-ranks", str(s.max_ranks),
        "--auth", s.auth,
        "--auth-window", repr(s.auth_window),
    ]  # fmt: skip
    if s.munge_socket:
        command += ["--munge-socket", s.munge_socket]
    for uid in s.admin_uids:
        command += ["--admin-uid", str(uid)]
    return command


def library_path() -> Path:
    """libharmonia.so, for LD_PRELOAD."""
    return find_tool("libharmonia.so", "HARMONIA_LIBRARY", "src/runtime/bbio/libharmonia.so")


def job_environment(
    address: str, job: str | None = None, priority: int | None = None
) -> dict[str, str]:
    """What `harmonia run` adds to a job's environment."""
    preload = os.environ.get("LD_PRELOAD", "")
    library = str(library_path().resolve())
    env = {
        "LD_PRELOAD": f"{library}:{preload}" if preload else library,
        "HARMONIA_SCHEDD": address,
    }
    if job is not None:
        env["HARMONIA_JOB"] = job
    if priority is not None:
        env["HARMONIA_PRIORITY"] = str(priority)
    return env
