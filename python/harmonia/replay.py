"""`harmonia replay`: regenerate an imported workload's I/O for real on this machine.

Each phase of the workload file (docs/formats.md section 4) becomes real reads or writes by a few
processes standing for the job's ranks: the phase's bytes times `scale`, split evenly among the
processes, in requests of the phase's mean request size, each process on its own file. Compute
time between phases becomes sleep, times `time_scale`. Write phases end with fsync (unless
`sync` is off) so that the data reaches the device. Read phases read files written by an earlier
write phase of the replay when there is one, else a file prepared before the phase (not timed).
"""

import multiprocessing as mp
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harmonia.scenario import ImportedApp, ImportedPhase, ScenarioError, load_workload

MAX_REQUEST = 64 << 20  # larger requests are split (memory per process)


class ReplayError(Exception):
    """Bad arguments or a failed run; the message names what."""


@dataclass(frozen=True)
class PhaseResult:
    index: int
    op: str
    bytes: int
    request_size: int
    processes: int
    logged_duration: float
    measured_duration: float

    @property
    def bandwidth(self) -> float:
        return self.bytes / self.measured_duration if self.measured_duration > 0 else 0.0


def select_app(path: Path, name: str | None) -> ImportedApp:
    try:
        workload = load_workload(path)
    except ScenarioError as error:
        raise ReplayError("\n".join(error.lines)) from error
    names = [a.name for a in workload.apps]
    if name is None:
        if len(names) > 1:
            raise ReplayError(
                f"{path}: holds {len(names)} applications ({', '.join(names)}): --app"
            )
        return workload.apps[0]
    if name not in names:
        raise ReplayError(f'{path}: no application "{name}" (it holds {", ".join(names)})')
    return workload.apps[names.index(name)]


def _io(op: str, path: str, nbytes: int, request: int, sync: bool, start: float) -> None:
    """One process's share of a phase (runs in a child process)."""
    delay = start - time.time()
    if delay > 0:
        time.sleep(delay)
    if op == "write":
        block = b"h" * min(request, nbytes)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            left = nbytes
            while left > 0:
                view = memoryview(block)[: min(left, len(block))]
                left -= os.write(fd, view)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    else:
        fd = os.open(path, os.O_RDONLY)
        try:
            left = nbytes
            while left > 0:
                got = len(os.read(fd, min(left, request)))
                if got == 0:
                    os.lseek(fd, 0, os.SEEK_SET)  # a shorter file is read again from the start
                    continue
                left -= got
        finally:
            os.close(fd)


def _prepare(path: Path, nbytes: int) -> None:
    with path.open("wb") as out:
        out.truncate(0)
        chunk = b"r" * min(nbytes, 8 << 20)
        left = nbytes
        while left > 0:
            left -= out.write(chunk[: min(left, len(chunk))])


def replay(
    app: ImportedApp,
    directory: Path,
    scale: float,
    processes: int,
    time_scale: float,
    sync: bool,
    on_phase: Callable[[int, ImportedPhase], None],
) -> list[PhaseResult]:
    """Runs every phase of `app` for real in `directory` and returns the measured phase times.
    The files are removed at the end."""
    if not scale > 0 or not time_scale >= 0 or processes < 1:
        raise ReplayError("--scale must be > 0, --time-scale >= 0 and --processes >= 1")
    workers = min(processes, app.ranks)
    directory.mkdir(parents=True, exist_ok=True)
    scratch = directory / f"harmonia-replay-{app.name}-{os.getpid()}"
    scratch.mkdir()
    context = mp.get_context("fork")
    results: list[PhaseResult] = []
    written: list[Path] = []  # files of the last write phase, for the reads that follow
    try:
        for index, phase in enumerate(app.phases):
            on_phase(index, phase)
            time.sleep(phase.compute * time_scale)
            total = max(1, round(phase.size * scale))
            share = max(1, total // workers)
            request = max(1, min(phase.request_size or share, share, MAX_REQUEST))
            paths = [scratch / f"phase{index}-p{k}.dat" for k in range(workers)]
            if phase.op == "read":
                if written:
                    paths = [written[k % len(written)] for k in range(workers)]
                else:
                    for path in paths:
                        _prepare(path, share)
            start = time.time() + 0.05  # all processes begin together
            jobs = [
                context.Process(target=_io, args=(phase.op, str(path), share, request, sync, start))
                for path in paths
            ]
            for job in jobs:
                job.start()
            for job in jobs:
                job.join()
            elapsed = time.time() - start
            failed = [job.exitcode for job in jobs if job.exitcode != 0]
            if failed:
                raise ReplayError(
                    f"phase {index} ({phase.op}): a process failed (exit {failed[0]})"
                )
            if phase.op == "write":
                written = paths
            results.append(
                PhaseResult(index, phase.op, share * workers, request, workers,
                            phase.duration, elapsed)
            )  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results
