"""Paths, sample scenarios and helpers shared by the front-end tests."""

import json
from pathlib import Path

from fake_sim import fake_result

from harmonia.policies import POLICIES

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# A small valid scenario; tests append [[apps]] entries or replace lines in it.
BASE_SCENARIO = """\
[scenario]
name = "small"
seed = 7

[platform]
network = "switch"
link_bw = "10 Gb/s"
compute_nodes = 16

[buffers]
count = 2
device = "ssd"
capacity = "100 GB"

[pfs]
servers = 2
device = "hdd"
"""

SYNTHETIC_APP = """
[[apps]]
name = "bench"
workload = "synthetic"
[apps.synthetic]
class = "balanced"
phases = 2
phase_size = "8 GB"
"""


def make_result_dir(
    directory: Path, scenario: dict[str, object], policies: tuple[str, ...] = POLICIES
) -> Path:
    """Fill `directory` like `harmonia sim` would, with fake results for `policies`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scenario.json").write_text(json.dumps(scenario), encoding="utf-8")
    for policy in policies:
        (directory / f"{policy}.json").write_text(
            json.dumps(fake_result(scenario, policy)), encoding="utf-8"
        )
    return directory


def assert_png(path: Path) -> None:
    """The file exists and is a PNG image."""
    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
