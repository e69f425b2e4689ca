"""Reading job traces in the Standard Workload Format (SWF, Feitelson's Parallel Workloads
Archive, version 2.2): one job a line, 18 whitespace-separated numeric fields, -1 for unknown,
header and comment lines starting with ';'. Only the fields the mixes use are kept."""

from dataclasses import dataclass
from pathlib import Path

FIELDS = 18


class SwfError(Exception):
    """A trace that is not valid SWF; the message names the file and line."""


@dataclass(frozen=True)
class SwfJob:
    number: int
    submit: float  # seconds since the trace's start
    run_time: float  # seconds; -1 unknown
    processors: int  # allocated, else requested; -1 unknown
    requested_time: float  # the user's time limit; -1 unknown
    user: int  # -1 unknown


def read_swf(path: Path) -> list[SwfJob]:
    """Every job line of the trace, in file order. Raises SwfError naming the line at fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SwfError(f"{path}: cannot read: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise SwfError(f"{path}: not a text file: {error}") from error
    jobs = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.strip()
        if not content or content.startswith(";"):
            continue
        parts = content.split()
        if len(parts) != FIELDS:
            raise SwfError(f"{path}:{number}: {len(parts)} fields, SWF has {FIELDS}")
        try:
            values = [float(p) for p in parts]
        except ValueError as error:
            raise SwfError(f"{path}:{number}: not a number: {error}") from error
        if any(v != v or v in (float("inf"), float("-inf")) for v in values):
            raise SwfError(f"{path}:{number}: fields must be finite numbers")
        if values[1] < 0:
            raise SwfError(f"{path}:{number}: field 2 (submit time) must be >= 0")
        allocated, requested = int(values[4]), int(values[7])
        jobs.append(
            SwfJob(
                number=int(values[0]),
                submit=values[1],
                run_time=values[3],
                processors=allocated if allocated > 0 else requested,
                requested_time=values[8],
                user=int(values[11]),
            )
        )
    if not jobs:
        raise SwfError(f"{path}: no job lines")
    return jobs
