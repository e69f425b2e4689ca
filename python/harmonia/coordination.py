"""The coordination service from Python: how `harmonia schedd` starts the daemon, where it
listens, and how to run a job under libharmonia (docs/control.md)."""

import os
from pathlib import Path

from harmonia.simulator import find_tool

#: The scheduler's socket when neither $HARMONIA_SCHEDD nor an installed daemon's says otherwise.
DEFAULT_SOCKET = "/tmp/harmonia-schedd.sock"
#: Where the packaged harmonia-schedd listens (its unit's RuntimeDirectory, docs/deploy.md).
INSTALLED_SOCKET = "/run/harmonia/schedd.sock"


def default_address() -> str:
    """$HARMONIA_SCHEDD, else the installed daemon's socket when it exists, else the default."""
    if address := os.environ.get("HARMONIA_SCHEDD"):
        return address
    return INSTALLED_SOCKET if Path(INSTALLED_SOCKET).exists() else DEFAULT_SOCKET


def daemon_command(config: Path | None) -> list[str]:
    """The harmonia-schedd command line for the site file `config` (None: the daemon's default,
    $HARMONIA_CONFIG or the installed harmonia.toml). The daemon reads and checks the file
    itself (docs/configuration.md)."""
    command = [
        str(find_tool("harmonia-schedd", "HARMONIA_SCHEDD_BIN", "src/schedd/harmonia-schedd"))
    ]
    return command + (["--config", str(config)] if config is not None else [])


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
