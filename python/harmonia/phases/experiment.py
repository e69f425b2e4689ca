"""How accurate is each phase-detection mode? (`harmonia reproduce phases`, docs/phase-detection.md)

Ground truth comes from programs whose phases we know: a synthetic job that writes bursts with
known gaps (the truth is the job's own clock around each burst), the MPI benchmark (whose
processes declare their phases with harmonia_io_begin/end while the detector runs), the shared
Darshan logs whose structure is documented (LAMMPS' 11 dumps, VPIC's 5 files, mpi-io-test's
iterations), and the source fixtures of the tests.

A detected phase matches a true one when both its boundaries are within the tolerance of the true
boundaries (each true phase matches at most once); precision is matched / detected, recall is
matched / true.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harmonia.simulator import find_tool

TOLERANCE = 0.05  # seconds, for each boundary

# A job writing bursts of requests (the library stages them in RAM) separated by idle gaps; it
# prints the true phases: wall-clock times just before the first and after the last write.
_BURST_JOB = r"""
import json, os, sys, time
path, spec = sys.argv[1], json.loads(sys.argv[2])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
block = b"x" * spec["request"]
truth = []
for gap in spec["gaps"] + [0]:
    begin = time.time()
    for k in range(spec["requests"]):
        os.write(fd, block)
        if k + 1 < spec["requests"]:
            time.sleep(spec["pause"])
    truth.append((begin, time.time()))
    time.sleep(gap)
os.close(fd)
print(json.dumps(truth))
"""


@dataclass(frozen=True)
class Score:
    mode: str
    case: str
    true_phases: int
    detected: int
    matched: int
    note: str = ""

    @property
    def precision(self) -> float:
        return self.matched / self.detected if self.detected else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.true_phases if self.true_phases else 1.0


def match(truth: list[tuple[float, float]], found: list[tuple[float, float]], tol: float) -> int:
    """Detected phases whose two boundaries are within `tol` of a true phase's, one-to-one."""
    used: set[int] = set()
    matched = 0
    for begin, end in found:
        for index, (t_begin, t_end) in enumerate(truth):
            if index not in used and abs(begin - t_begin) <= tol and abs(end - t_end) <= tol:
                used.add(index)
                matched += 1
                break
    return matched


def _trace(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def runtime_bursts(
    library: Path, gaps: list[float], threshold: float, scratch: Path, pause: float = 0.01
) -> Score:
    """libharmonia's detector on a job of len(gaps) + 1 bursts of 20 x 256 KiB writes, `pause`
    seconds apart inside a burst, with HARMONIA_PHASE_GAP=threshold."""
    trace = scratch / f"trace-{threshold}.jsonl"
    trace.unlink(missing_ok=True)
    spec = {"gaps": gaps, "requests": 20, "request": 256 << 10, "pause": pause}
    env = {
        **os.environ,
        "LD_PRELOAD": str(library),
        "HARMONIA_PHASE_TRACE": str(trace),
        "HARMONIA_PHASE_GAP": str(threshold),
    }
    env.pop("HARMONIA_SCHEDD", None)
    done = subprocess.run(
        [sys.executable, "-B", "-S", "-c", _BURST_JOB, str(scratch / "bursts.dat"),
         json.dumps(spec)],
        env=env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    truth = [(begin, end) for begin, end in json.loads(done.stdout)]
    found = [(e["begin"], e["end"]) for e in _trace(trace) if e["event"] == "phase"]
    return Score(
        "runtime", f"bursts, HARMONIA_PHASE_GAP={threshold:g} s", len(truth), len(found),
        match(truth, found, TOLERANCE),
        f"gaps {', '.join(f'{g:g}' for g in gaps)} s; {pause * 1e3:g} ms between writes",
    )  # fmt: skip


def runtime_mpi_bench(library: Path, bench: Path, scratch: Path, threshold: float) -> Score:
    """The detector against the phases harmonia-bench's processes declare (open to close), 2
    applications x 2 processes, 8 x 1 MiB with 50 ms between requests, no sync."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return Score("runtime", "harmonia-bench (MPI)", 0, 0, 0, "skipped: no mpirun")
    trace = scratch / "bench-trace.jsonl"
    trace.unlink(missing_ok=True)
    files = scratch / "bench"
    files.mkdir(exist_ok=True)
    command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4",
               "-x", f"LD_PRELOAD={library}", "-x", f"HARMONIA_PHASE_TRACE={trace}",
               "-x", f"HARMONIA_PHASE_GAP={threshold}",
               str(bench), "--dir", str(files), "--apps", "2", "--requests", "8",
               "--size", str(1 << 20), "--delay", "0.05", "--sync", "none",
               "--offsets", "0,0.2"]  # fmt: skip
    subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    events = _trace(trace)
    true_phases = detected = matched = 0
    # Per process, so that boundaries of different processes never match each other.
    for pid in sorted({e["pid"] for e in events}):
        mine = [e for e in events if e["pid"] == pid]
        begins = [e["time"] for e in mine if e["event"] == "begin"]
        ends = [e["time"] for e in mine if e["event"] == "end"]
        truth = list(zip(begins, ends, strict=True))
        found = [(e["begin"], e["end"]) for e in mine if e["event"] == "phase"]
        true_phases += len(truth)
        detected += len(found)
        matched += match(truth, found, TOLERANCE)
    return Score(
        "runtime", f"harmonia-bench (MPI), HARMONIA_PHASE_GAP={threshold:g} s", true_phases,
        detected, matched, "truth: each process's declared phase, open to close",
    )  # fmt: skip


# The documented structure of the shared logs (../shared/traces/darshan/README.md, docs/darshan.md).
DARSHAN_TRUTH = {
    "lammps-periodic-dump_1p_dxt.darshan": ("write", 11, "11 periodic dumps"),
    "vpic-hdf5_192p_summit_dxt.darshan": ("write", 5, "5 HDF5 files written one after another"),
    "mpi-io-test_32p_dxt.darshan": ("write", 4, "mpi-io-test -i 4: 4 write iterations"),
}


def darshan_counts(logs: Path | None = None) -> list[Score]:
    """Write phases the importer finds against the documented structure. The logs carry no clock
    of their phases independent of the importer, so only counts are compared: when they agree,
    every phase counts as matched (docs/darshan.md checked their boundaries by hand); when they
    do not, none does (a phase that merges several true ones matches none of them)."""
    from harmonia.darshan_import import SHARED_LOGS, import_log

    logs = logs or SHARED_LOGS

    scores = []
    for name, (op, expected, what) in DARSHAN_TRUTH.items():
        path = logs / name
        if not path.is_file():
            scores.append(Score("darshan", name, expected, 0, 0, f"skipped: {path} missing"))
            continue
        app = import_log(path).workload.apps[0]
        detected = sum(1 for p in app.phases if p.op == op)
        matched = expected if detected == expected else 0
        scores.append(Score("darshan", name, expected, detected, matched, what))
    return scores


def source_fixtures(fixtures: Path, truth: set[tuple[str, int]]) -> Score:
    from harmonia.phases.source import analyze

    found = {(str(b.path), b.start_line) for b in analyze(fixtures).blocks}
    return Score(
        "source", "test fixtures (C, C++, Fortran)", len(truth), len(found), len(found & truth),
        "our own fixtures: a check of the rules more than a measurement",
    )  # fmt: skip


FIXTURE_TRUTH = {
    ("writer.c", 14), ("writer.c", 23), ("writer.c", 29), ("dump.cpp", 6), ("dump.cpp", 13),
    ("output.f90", 7), ("output.f90", 15),
}  # fmt: skip


def run_all(progress: Callable[[str], None], quick: bool = False) -> list[Score]:
    """Every case; `quick` keeps only the synthetic bursts with short gaps (for tests)."""
    library = find_tool("libharmonia.so", "HARMONIA_LIBRARY", "src/runtime/bbio/libharmonia.so")
    scores: list[Score] = []
    with tempfile.TemporaryDirectory(prefix="harmonia-accuracy-") as work:
        scratch = Path(work)
        # quick: margins of 40 ms and more around the fitting threshold, for loaded CI machines
        gaps = [0.1, 0.2, 0.4, 0.8] if quick else [0.2, 0.4, 0.8, 1.6, 0.2, 0.4, 0.8, 1.6]
        thresholds = [0.002, 0.05, 0.3] if quick else [0.005, 0.1, 0.3, 0.6, 1.0, 2.0]
        for threshold in thresholds:
            progress(f"runtime detector, bursts, gap threshold {threshold:g} s")
            scores.append(runtime_bursts(library.resolve(), gaps, threshold, scratch))
        if quick:
            return scores
        bench = find_tool("harmonia-bench", "HARMONIA_BENCH", "src/tools/harmonia-bench")
        for threshold in (0.02, 1.0):
            progress(f"runtime detector, harmonia-bench, gap threshold {threshold:g} s")
            scores.append(runtime_mpi_bench(library.resolve(), bench, scratch, threshold))
    progress("Darshan import, shared logs")
    scores += darshan_counts()
    fixtures = Path(__file__).resolve().parents[2] / "tests" / "data" / "source"
    if fixtures.is_dir():
        scores.append(source_fixtures(fixtures, FIXTURE_TRUTH))
    return scores


def markdown(scores: list[Score]) -> str:
    lines = [
        f"Tolerance: {TOLERANCE * 1e3:g} ms on each boundary (runtime); counts (Darshan, source).",
        "",
        "| mode | case | true | detected | matched | precision | recall | note |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for s in scores:
        lines.append(
            f"| {s.mode} | {s.case} | {s.true_phases} | {s.detected} | {s.matched} | "
            f"{s.precision:.2f} | {s.recall:.2f} | {s.note} |"
        )
    return "\n".join(lines) + "\n"


def to_json(scores: list[Score]) -> list[dict[str, Any]]:
    return [{**asdict(s), "precision": s.precision, "recall": s.recall} for s in scores]
