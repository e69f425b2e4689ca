"""libharmonia's per-file write plan (src/runtime/bbio/staged_file.cpp): it is decided once and
re-decided when harmonia-schedd's directive changes, so that an open file's next write follows
the new directive at once, not at the next flush the agent happens to start."""

from pathlib import Path
from typing import Any

from schedd_support import SteppedWriter, running_daemon, status, wait_until

CHUNK = 1_000_000


def chunk(k: int) -> bytes:
    return bytes([65 + k % 26]) * CHUNK


def job_status(address: Path, job: str) -> dict[str, Any]:
    """The daemon's record of `job` (harmonia-schedctl status), empty if it has none."""
    for entry in status(address)["jobs"]:
        if entry["job"] == job:
            found: dict[str, Any] = entry
            return found
    return {}


def directive_mode(address: Path, job: str) -> str | None:
    mode: str | None = job_status(address, job).get("directive", {}).get("mode")
    return mode


def in_phase(address: Path, job: str) -> bool:
    return bool(job_status(address, job).get("in_phase") == 1)


def test_writes_after_a_change_to_write_through_reach_the_file_before_close(
    tmp_path: Path,
) -> None:
    """B stages its first chunk in line behind A's phase (strategy 2a). A ends: the daemon tells
    B to write through, and the agent writes the staged chunk out. B's next write must then go
    to the file during the write call itself; a plan kept from the open file's first write
    would stage it, and nothing would move it before B's close (no directive comes while B
    waits)."""
    address = tmp_path / "schedd.sock"
    target = tmp_path / "b"
    with running_daemon(address, "--strategy", "2a"):
        first = SteppedWriter(address, "A", tmp_path / "a")
        second = None
        try:
            first.write(
                0
            )  # A's phase begins: its first write waits for the daemon's reply
            assert in_phase(address, "A")
            second = SteppedWriter(address, "B", target)
            second.write(0)
            assert directive_mode(address, "B") == "MODE_STAGE", "B stages behind A"
            assert target.stat().st_size == 0, "B's first chunk is staged"

            first.close()  # A exits: its phase ends
            assert wait_until(lambda: directive_mode(address, "B") != "MODE_STAGE"), (
                "B told to write through once A's phase ended"
            )
            assert wait_until(lambda: target.read_bytes() == chunk(0)), (
                "the staged chunk written out"
            )

            second.write(1)
            # Looked at while B waits with the file open: no flush is under way to land it.
            assert target.read_bytes() == chunk(0) + chunk(1), (
                "B's write after the change to write-through is not in the file while B holds "
                "it open: the file's write plan was not re-decided"
            )
            second.write(2)
            assert target.stat().st_size == 3 * CHUNK
            second.close()
        finally:
            first.kill()
            if second is not None:
                second.kill()
    assert target.read_bytes() == chunk(0) + chunk(1) + chunk(2)
