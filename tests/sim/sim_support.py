"""Helpers for the simulator tests: hand-written normalized scenarios and the device curve."""

from pathlib import Path
from typing import Any, Protocol

SSD_SLOPE = (7.69 - 1) / 7
HDD_SLOPE = (11.90 - 1) / 7


def efficiency(slope: float, n: int) -> float:
    """The core's slope curve (docs/scheduling-model.md), computed independently."""

    def relative(k: int) -> float:
        return k / (1 + slope * (k - 1))

    return min(1.0, relative(n) / max(relative(k) for k in range(1, 33)))


def scenario(apps: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    """A normalized scenario: 4 SSD buffers of 100 GB, 8 HDD PFS servers, a 10 Gb/s switch."""
    base: dict[str, Any] = {
        "name": "closed-form",
        "seed": 7,
        "devices": {
            "ssd": {
                "write_bw": 500e6,
                "read_bw": 550e6,
                "concurrency": 2,
                "interference_slope": SSD_SLOPE,
            },
            "hdd": {
                "write_bw": 95e6,
                "read_bw": 115e6,
                "concurrency": 1,
                "interference_slope": HDD_SLOPE,
            },
        },
        "platform": {
            "network": "switch",
            "link_bw": 1.25e9,
            "link_latency": 0.0,
            "compute_nodes": 16,
        },
        "buffers": {"count": 4, "device": "ssd", "capacity": 100e9},
        "pfs": {"servers": 8, "device": "hdd"},
        "scheduler": {"max_colocated": 3},
        "apps": apps,
    }
    base.update(overrides)
    return base


def app(
    name: str, phases: list[tuple[float, float]], nodes: int = 4, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "nodes": nodes,
        "phases": [{"compute": c, "size": s} for c, s in phases],
        **extra,
    }


class RunSim(Protocol):
    """The run_sim fixture: a scenario run under a policy, harmonia-sim's options added."""

    def __call__(
        self, doc: dict[str, Any], policy: str, *options: str
    ) -> dict[str, Any]: ...


def sim_command(
    simulator: Path, src: Path, policy: str, out: Path, *options: str
) -> list[str]:
    """The harmonia-sim command line that runs scenario `src` under `policy` into `out`."""
    return [
        str(simulator),
        "--scenario",
        str(src),
        "--policy",
        policy,
        "--out",
        str(out),
        *options,
    ]
