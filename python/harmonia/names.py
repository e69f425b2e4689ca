"""The names and defaults the C++ code registers, read once from `harmonia-describe`.

C++ is the one source of the names of policies, coordination strategies, flush orders and request
schedulers, and of their settings' defaults: the Python front end asks the built
`harmonia-describe` (src/tools/describe.cpp) instead of keeping copies. Nothing here runs at import
time; the first question runs the program, and its answer is kept for the process.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from harmonia.simulator import SimulatorNotFound, find_tool

if TYPE_CHECKING:
    from pydantic import AfterValidator


@cache
def described() -> dict[str, Any]:
    """harmonia-describe's JSON. Raises SimulatorNotFound when it is not built or fails."""
    binary = find_tool("harmonia-describe", "HARMONIA_DESCRIBE", "src/tools/harmonia-describe")
    try:
        done = subprocess.run([binary], capture_output=True, text=True, timeout=60, check=False)
    except OSError as error:
        raise SimulatorNotFound(f"{binary}: {error}") from error
    if done.returncode != 0:
        raise SimulatorNotFound(f"{binary} failed ({done.returncode}): {done.stderr.strip()}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def policy_names(*families: str) -> tuple[str, ...]:
    """Registered policies, in registry order, of the given families ("baseline", "harmonia",
    "peer"), or of every family when none is given."""
    return tuple(
        p["name"] for p in described()["policies"] if not families or p["family"] in families
    )


def request_scheduler_names() -> tuple[str, ...]:
    return tuple(s["name"] for s in described()["request_schedulers"])


def pricing_defaults() -> dict[str, Any]:
    """The policy core's default `[pricing]`: node_hour_rate and the I/O service classes
    (core::PricingConfig), each class a dict of name, slowdown and usage_factor."""
    answer: dict[str, Any] = described()["pricing_defaults"]
    return answer


def scheduler_default(key: str) -> Any:
    """The policy core's default for a `[scheduler]` setting (core::SchedulerConfig)."""
    return described()["scheduler_defaults"][key]


def one_of(names: Callable[[], tuple[str, ...]]) -> AfterValidator:
    """A pydantic check that a string is one of `names()`, asked when a value is checked."""
    from pydantic import AfterValidator

    def check(value: str) -> str:
        known = names()
        if value not in known:
            raise ValueError(f"unknown name {value!r} (known: {', '.join(known)})")
        return value

    return AfterValidator(check)
