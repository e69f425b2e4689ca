"""Reading job traces in the Standard Workload Format (SWF, Feitelson's Parallel Workloads
Archive, version 2.2): one job a line, 18 whitespace-separated numeric fields, -1 for unknown,
header and comment lines starting with ';'. Plain or gzip-compressed (as the archive ships them).
Only the fields the mixes use are kept.

`read_swf` returns every job line but the placeholders (every field -1); `load_trace` returns the
jobs a simulation can replay (run time and processors known), in submit order, within a window,
with the header's machine size and one note counting what it skipped."""

import gzip
import re
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


@dataclass(frozen=True)
class SwfHeader:
    """What the header says of the machine (None when it does not say)."""

    max_nodes: int | None = None
    max_procs: int | None = None
    computer: str = ""


@dataclass(frozen=True)
class Trace:
    """The replayable jobs of a trace window: run time and processors known, in submit order
    (ties by job number), their submit times from the window's first job (which submits at 0)."""

    path: Path
    header: SwfHeader
    jobs: tuple[SwfJob, ...]
    placeholders: int  # lines with every field -1
    unknown: int  # jobs whose run time or processors are unknown
    outside: int  # usable jobs outside the window

    def note(self, too_large: int = 0, machine_nodes: int = 0) -> str:
        """One line on what was replayed and what was left out, for the user; `too_large` jobs
        of the window were left out as larger than the machine's `machine_nodes` nodes."""
        left = []
        if self.placeholders:
            left.append(f"{self.placeholders} placeholder lines (every field -1)")
        if self.unknown:
            left.append(f"{self.unknown} jobs with unknown run time or processors")
        if self.outside:
            left.append(f"{self.outside} jobs outside the window")
        if too_large:
            left.append(f"{too_large} jobs larger than the machine's {machine_nodes} nodes")
        skipped = f"; skipped {', '.join(left)}" if left else ""
        return f"{self.path.name}: {len(self.jobs) - too_large} jobs replayed{skipped}"


def trace_lines(path: Path) -> list[str]:
    """The lines of an SWF file, plain or gzip-compressed (told by its first bytes)."""
    try:
        with path.open("rb") as probe:
            compressed = probe.read(2) == b"\x1f\x8b"
        raw = gzip.decompress(path.read_bytes()) if compressed else path.read_bytes()
        return raw.decode("utf-8").splitlines()
    except OSError as error:  # gzip.BadGzipFile is an OSError too
        reason = error.strerror or str(error)
        raise SwfError(f"{path}: cannot read: {reason}") from error
    except (UnicodeDecodeError, EOFError) as error:
        raise SwfError(f"{path}: not a text file: {error}") from error


_HEADER_NUMBER = re.compile(r";\s*(MaxNodes|MaxProcs)\s*:\s*(\d+)")
_HEADER_COMPUTER = re.compile(r";\s*Computer\s*:\s*(.*)")


def _parse(path: Path) -> tuple[SwfHeader, list[SwfJob], int]:
    """The header, every job line but the placeholders, and how many placeholders there were."""
    sizes: dict[str, int] = {}
    computer = ""
    jobs = []
    placeholders = 0
    for number, line in enumerate(trace_lines(path), start=1):
        content = line.strip()
        if not content:
            continue
        if content.startswith(";"):
            if found := _HEADER_NUMBER.match(content):
                sizes[found.group(1)] = int(found.group(2))
            elif found := _HEADER_COMPUTER.match(content):
                computer = found.group(1).strip()
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
        if all(v == -1 for v in values):
            placeholders += 1
            continue
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
    header = SwfHeader(sizes.get("MaxNodes"), sizes.get("MaxProcs"), computer)
    return header, jobs, placeholders


def read_swf(path: Path) -> list[SwfJob]:
    """Every job line of the trace (placeholders aside), in file order. Raises SwfError naming
    the line at fault."""
    return _parse(path)[1]


def load_trace(
    path: Path,
    jobs: int | None = None,
    start: float | None = None,
    end: float | None = None,
) -> Trace:
    """The replayable jobs of `path`: run time and processors known, in submit order, those
    submitted in [start, end) seconds after the first of them, then the first `jobs` of those;
    submit times counted from the window's first job. Raises SwfError naming the file when no
    job is left."""
    header, every, placeholders = _parse(path)
    usable = [j for j in every if j.run_time > 0 and j.processors > 0]
    unknown = len(every) - len(usable)
    if not usable:
        raise SwfError(f"{path}: no job with a run time and processors")
    usable.sort(key=lambda j: (j.submit, j.number))
    origin = usable[0].submit
    window = [
        j
        for j in usable
        if (start is None or j.submit - origin >= start)
        and (end is None or j.submit - origin < end)
    ]
    if jobs is not None:
        window = window[:jobs]
    if not window:
        raise SwfError(f"{path}: no job in the window")
    first = window[0].submit
    shifted = tuple(
        SwfJob(j.number, j.submit - first, j.run_time, j.processors, j.requested_time, j.user)
        for j in window
    )
    return Trace(path, header, shifted, placeholders, unknown, len(usable) - len(window))
