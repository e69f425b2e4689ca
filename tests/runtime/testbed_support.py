"""Hosts of their own for the tests that need them (scripts/testbed.py): why this machine cannot
make them, and a test bed that is up for a block and whose namespaces are all gone after it."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TESTBED = Path(__file__).resolve().parents[2] / "scripts" / "testbed.py"


def why_no_testbed(name: str, *tools: str) -> str:
    """Why this machine cannot bring up a test bed named `name` (and run `tools`); "" if it
    can. Tries making one network namespace (and removes it)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", *tools):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: iproute2, munge, openmpi-bin)"
    probe = subprocess.run(["ip", "netns", "add", f"{name}probe"], check=False,
                           capture_output=True, text=True)  # fmt: skip
    if probe.returncode != 0:
        return f"this machine cannot make network namespaces: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"{name}probe"], check=False)
    return ""


@contextmanager
def hosts_of_their_own(name: str) -> Iterator[dict[str, Any]]:
    """The test bed `name` (examples/testbed/testbed.toml), as `testbed.py up` describes it;
    down afterwards, every namespace of it removed."""
    up = subprocess.run([sys.executable, str(TESTBED), "up", name], capture_output=True,
                        text=True, check=False)  # fmt: skip
    assert up.returncode == 0, up.stderr
    try:
        yield json.loads(up.stdout)
    finally:
        subprocess.run([sys.executable, str(TESTBED), "down", name], check=False)
        left = subprocess.run(
            ["ip", "netns", "list"], check=False, capture_output=True, text=True
        ).stdout
        assert name not in left, "the test bed's namespaces were all removed"
