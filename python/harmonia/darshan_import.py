"""Workloads from Darshan logs: read a log with pydarshan and group its I/O into phases.

A log is first checked region by region with libdarshan-util (pydarshan reads a truncated log
without complaint: it stops at the first unreadable record), then read at one layer (POSIX, else
MPI-IO, else STDIO) in a forked process, which a crash of the C library cannot take down. With
DXT, every traced request is a segment; without it, counters and heatmap bins stand in for
segments. Segments are grouped into phases by idle gaps (`group_phases`), and each group is split
into a write and a read phase. docs/darshan.md explains the rule and what each shared log yields;
docs/formats.md section 4 specifies the file written.
"""

import contextlib
import datetime
import hashlib
import importlib.metadata
import json
import os
import signal
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harmonia.darshan_layers import LAYERS, OPS, Layer, Op
from harmonia.scenario import WorkloadFile
from harmonia.simulator import REPO_ROOT
from harmonia.units import format_size

# The real logs shipped beside the repository (../shared/traces/darshan/README.md).
SHARED_LOGS = REPO_ROOT.parent / "shared" / "traces" / "darshan"


# Phases are separated by idle gaps longer than max(MIN_GAP, GAP_FRACTION * run time): barrier
# and metadata pauses inside a burst are tens of milliseconds in the shared logs, the compute
# between bursts is a third of a second or more (docs/darshan.md).
MIN_GAP = 0.25
GAP_FRACTION = 0.001

# Darshan's request-size buckets (the *_SIZE_{READ,WRITE}_* counters), each with its largest size.
SIZE_BUCKETS: tuple[tuple[str, int], ...] = (
    ("0_100", 100),
    ("100_1K", 1 << 10),
    ("1K_10K", 10 << 10),
    ("10K_100K", 100 << 10),
    ("100K_1M", 1 << 20),
    ("1M_4M", 4 << 20),
    ("4M_10M", 10 << 20),
    ("10M_100M", 100 << 20),
    ("100M_1G", 1 << 30),
    ("1G_PLUS", np.iinfo(np.int64).max),
)
_BUCKET_LIMITS = np.array([limit for _, limit in SIZE_BUCKETS[:-1]], dtype=np.int64)

# File names listed per phase; `file_count` gives the full number.
MAX_FILES_LISTED = 16

# A heatmap whose bytes differ from the counters' by at most this fraction still times the phases:
# Darshan accumulates the two apart, and large logs have shown a few bytes in 10^11 between them.
HEATMAP_TOLERANCE = 1e-6


class DarshanImportError(Exception):
    """A log that cannot be imported. The message starts with the log's path."""


_BYTES_COUNTER: dict[Op, str] = {"write": "BYTES_WRITTEN", "read": "BYTES_READ"}


@dataclass
class Segments:
    """I/O requests, or stand-ins for them, one array element each; times since the job started.

    A DXT segment is one request. Without DXT a segment is a file record's activity or a heatmap
    bin, and `requests` and `histogram` carry that record's (or the bin's share of the) counts.
    """

    start: npt.NDArray[np.float64]
    end: npt.NDArray[np.float64]
    size: npt.NDArray[np.int64]
    write: npt.NDArray[np.bool_]
    rank: npt.NDArray[np.int64]  # -1: every rank (Darshan's shared-file records)
    file: npt.NDArray[np.uint64]  # Darshan record id, 0 when unknown
    requests: npt.NDArray[np.float64]
    histogram: npt.NDArray[np.float64] | None  # requests per SIZE_BUCKETS entry, if known

    def __len__(self) -> int:
        return len(self.start)

    def of(self, op: Op) -> npt.NDArray[np.bool_]:
        """Mask of the segments of one operation."""
        mask: npt.NDArray[np.bool_] = self.write == (op == "write")
        return mask

    def bytes_of(self, op: Op) -> int:
        return int(self.size[self.of(op)].sum())


def _segments(columns: dict[str, list[Any]], histogram: list[Any] | None) -> Segments:
    return Segments(
        start=np.asarray(columns["start"], dtype=np.float64),
        end=np.asarray(columns["end"], dtype=np.float64),
        size=np.asarray(columns["size"], dtype=np.int64),
        write=np.asarray(columns["write"], dtype=np.bool_),
        rank=np.asarray(columns["rank"], dtype=np.int64),
        file=np.asarray(columns["file"], dtype=np.uint64),
        requests=np.asarray(columns["requests"], dtype=np.float64),
        histogram=None
        if histogram is None
        else np.asarray(histogram, dtype=np.float64).reshape(-1, len(SIZE_BUCKETS)),
    )


def _columns() -> dict[str, list[Any]]:
    return {key: [] for key in ("start", "end", "size", "write", "rank", "file", "requests")}


@dataclass(frozen=True)
class PhaseGroup:
    """The segments of one phase: indices into a Segments, all of one operation."""

    op: Op
    indices: npt.NDArray[np.intp]


def group_phases(segments: Segments, gap: float) -> list[PhaseGroup]:
    """Group segments into phases, in order of their first request.

    Segments from every rank are merged into busy intervals; an idle interval longer than `gap`
    ends a group. Each group gives a write phase and a read phase (when it has such requests),
    ordered by their first request: reads and writes overlapping in time are serialized.
    """
    if len(segments) == 0:
        return []
    order = np.argsort(segments.start, kind="stable")
    starts = segments.start[order]
    busy_until = np.maximum.accumulate(segments.end[order])
    breaks = np.nonzero(starts[1:] - busy_until[:-1] > gap)[0] + 1
    phases: list[PhaseGroup] = []
    for group in np.split(order, breaks):
        by_op = [PhaseGroup(op, group[segments.write[group] == (op == "write")]) for op in OPS]
        by_op = [phase for phase in by_op if len(phase.indices)]
        by_op.sort(key=lambda phase: float(segments.start[phase.indices].min()))
        phases.extend(by_op)
    return phases


def size_histogram(sizes: npt.NDArray[np.int64]) -> dict[str, int]:
    """Request counts per Darshan size bucket, leaving out empty buckets."""
    counts = np.bincount(np.searchsorted(_BUCKET_LIMITS, sizes), minlength=len(SIZE_BUCKETS))
    return {name: int(n) for (name, _), n in zip(SIZE_BUCKETS, counts, strict=True) if n}


def default_gap(run_time: float) -> float:
    """The idle time that separates two phases of a job that ran `run_time` seconds."""
    return max(MIN_GAP, GAP_FRACTION * run_time)


@dataclass
class _Log:
    """What the importer gathered from one log, before it becomes a workload document."""

    path: Path
    name: str
    exe: str
    ranks: int
    run_time: float
    jobid: int
    start_time: str
    layer: Layer
    timing: str
    segments: Segments
    names: dict[int, str]
    totals: dict[Op, int]  # bytes per operation from the layer's counters
    # Bytes per file record for each operation, from the counters, when segments carry no file.
    files_by_op: dict[Op, dict[int, int]] | None = None
    lacks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _c_stderr_captured() -> Iterator[list[str]]:
    """Collect what is written on file descriptor 2, where libdarshan-util prints its errors."""
    captured: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.extend(sink.read().decode(errors="replace").splitlines())


def _unreadable_region(path: Path) -> str | None:
    """Read every region of the log with libdarshan-util; say which one fails, if any."""
    # pydarshan (and pandas with it) loads only when a log is read: `harmonia` starts faster.
    from darshan.backend import cffi_backend as backend  # type: ignore[import-untyped]

    log = backend.log_open(str(path))
    if not log["handle"]:
        return "not a Darshan log: its header cannot be read"
    try:
        names = backend.ffi.new("struct darshan_name_record_ref **")
        # darshan_log_get_namehash, not darshan_log_get_name_records: on a cut name table the
        # latter has aborted the process with a double free. The table is leaked on success: it
        # is small, and freeing it needs uthash macros.
        if backend.libdutil.darshan_log_get_namehash(log["handle"], names) < 0:
            return "truncated or corrupt: its file-name table cannot be read"
        try:
            modules = backend.log_get_modules(log)
        except (RuntimeError, UnicodeDecodeError):  # a module without a name
            return "corrupt: its module table cannot be read"
        for module, info in modules.items():
            record = backend.ffi.new("void **")
            while (status := backend.libdutil.darshan_log_get_record(
                log["handle"], info["idx"], record
            )) > 0:  # fmt: skip
                backend.libdutil.darshan_free(record[0])
                record[0] = backend.ffi.NULL
            if status < 0:
                return f"truncated or corrupt: its {module} records cannot be read"
    finally:
        backend.log_close(log)
    return None


def _check(path: Path) -> None:
    with _c_stderr_captured() as messages:
        problem = _unreadable_region(path)
    if problem is not None:
        detail = next((m.strip() for m in messages if m.strip()), "")
        detail = detail.removeprefix("Error: ").rstrip(".")
        suffix = f" (libdarshan-util: {detail})" if detail else ""
        raise DarshanImportError(f"{path}: {problem}{suffix}")


def _counters(report: Any, layer: Layer) -> tuple[Any, Any]:
    """The layer's counters and floating-point counters, one row per file record."""
    import pandas as pd  # type: ignore[import-untyped]

    report.mod_read_all_records(layer.module)
    if len(report.records[layer.module]) == 0:  # to_df() fails on a module without records
        names = report.counters[layer.module]
        return tuple(
            pd.DataFrame(columns=["rank", "id", *names[kind]], dtype="int64")
            for kind in ("counters", "fcounters")
        )
    frames = report.records[layer.module].to_df()
    return frames["counters"], frames["fcounters"]


def _counter_totals(report: Any, layer: Layer) -> dict[Op, int]:
    counters, _ = _counters(report, layer)
    return {op: int(counters[f"{layer.prefix}_{_BYTES_COUNTER[op]}"].sum()) for op in OPS}


def _dxt_segments(report: Any, layer: Layer) -> Segments:
    """One segment per traced request."""
    assert layer.dxt is not None
    report.mod_read_all_dxt_records(layer.dxt, dtype="dict")
    columns = _columns()
    for record in report.records[layer.dxt]:
        for op in OPS:
            for segment in record[f"{op}_segments"]:
                columns["start"].append(segment["start_time"])
                columns["end"].append(segment["end_time"])
                columns["size"].append(segment["length"])
                columns["write"].append(op == "write")
                columns["rank"].append(record["rank"])
                columns["file"].append(record["id"])
    columns["requests"] = [1] * len(columns["start"])
    buckets = np.searchsorted(_BUCKET_LIMITS, np.asarray(columns["size"], dtype=np.int64))
    return _segments(columns, list(np.eye(len(SIZE_BUCKETS), dtype=np.float64)[buckets]))


def _counter_segments(counters: Any, fcounters: Any, layer: Layer) -> Segments:
    """One segment per file record and operation, from its first to its last access."""
    columns = _columns()
    histogram: list[Any] | None = [] if all(layer.histogram.values()) else None
    for op in OPS:
        upper = op.upper()
        size = counters[f"{layer.prefix}_{_BYTES_COUNTER[op]}"].to_numpy()
        first = fcounters[f"{layer.prefix}_F_{upper}_START_TIMESTAMP"].to_numpy()
        last = fcounters[f"{layer.prefix}_F_{upper}_END_TIMESTAMP"].to_numpy()
        requests = counters[list(layer.requests[op])].to_numpy().sum(axis=1)
        prefix = layer.histogram[op]
        sizes = None
        if histogram is not None and prefix is not None:
            sizes = counters[[f"{prefix}{name}" for name, _ in SIZE_BUCKETS]].to_numpy()
        rows = np.nonzero(size > 0)[0]
        columns["start"].extend(first[rows])
        columns["end"].extend(last[rows])
        columns["size"].extend(size[rows])
        columns["write"].extend([op == "write"] * len(rows))
        columns["rank"].extend(counters["rank"].to_numpy()[rows])
        columns["file"].extend(counters["id"].to_numpy()[rows])
        columns["requests"].extend(requests[rows])
        if histogram is not None and sizes is not None:
            histogram.extend(sizes[rows])
    return _segments(columns, histogram)


def _heatmap_segments(heatmap: Any, by_record: Segments) -> Segments:
    """One segment per rank and non-empty heatmap bin.

    Bins are narrowed to the first and last access the counters saw for the operation; requests
    and request sizes, known only per file record, are shared out among the bins by bytes.
    """
    columns = _columns()
    histogram: list[Any] | None = None if by_record.histogram is None else []
    for op in OPS:
        mask = by_record.of(op)
        total = by_record.bytes_of(op)
        if not total:
            continue
        first, last = float(by_record.start[mask].min()), float(by_record.end[mask].max())
        requests_per_byte = by_record.requests[mask].sum() / total
        bins = heatmap.to_df(ops=[op])
        lefts, rights = bins.columns.left.to_numpy(), bins.columns.right.to_numpy()
        for rank, row in zip(bins.index, bins.to_numpy(), strict=True):
            for b in np.nonzero(row > 0)[0]:
                start, end = max(lefts[b], first), min(rights[b], last)
                if start > end:  # a bin the counters' window misses: keep the bin's own bounds
                    start, end = lefts[b], rights[b]
                columns["start"].append(start)
                columns["end"].append(end)
                columns["size"].append(row[b])
                columns["write"].append(op == "write")
                columns["rank"].append(rank)
                columns["file"].append(0)
                columns["requests"].append(requests_per_byte * row[b])
                if histogram is not None and by_record.histogram is not None:
                    histogram.append(by_record.histogram[mask].sum(axis=0) * row[b] / total)
    return _segments(columns, histogram)


def heatmap_agrees(binned: dict[Op, int], counters: dict[Op, int]) -> bool:
    """Whether heatmap bytes match the counters' within HEATMAP_TOLERANCE, per operation."""
    return all(abs(binned[op] - counters[op]) <= HEATMAP_TOLERANCE * counters[op] for op in OPS)


def rescale_to(segments: Segments, totals: dict[Op, int]) -> None:
    """Scale each operation's segment sizes so that they add up to `totals` exactly.

    Sizes are scaled and rounded, and the rounding remainder goes to the largest segment, so
    phases cut from these segments add up to the counters' bytes.
    """
    for op in OPS:
        mask = np.nonzero(segments.of(op))[0]
        have = int(segments.size[mask].sum())
        if not len(mask) or have == totals[op]:
            continue
        scaled = np.rint(segments.size[mask] * (totals[op] / have)).astype(np.int64)
        scaled[np.argmax(scaled)] += totals[op] - int(scaled.sum())
        segments.size[mask] = scaled


def _bytes_per_file(segments: Segments, mask: npt.NDArray[np.bool_]) -> dict[int, int]:
    per_file: dict[int, int] = {}
    for file_id, nbytes in zip(
        segments.file[mask].tolist(), segments.size[mask].tolist(), strict=True
    ):
        per_file[file_id] = per_file.get(file_id, 0) + nbytes
    return per_file


def _from_counters(report: Any, log: _Log, why: str) -> None:
    """Segments from the layer's counters, timed by its heatmap when the log has one."""
    layer = log.layer
    counters, fcounters = _counters(report, layer)
    log.segments = _counter_segments(counters, fcounters, layer)
    log.timing = "counters"
    detail = "timing from each file's first and last access (no heatmap)"
    if "HEATMAP" in report.modules:
        report.read_all_heatmap_records()
    if layer.heatmap in report.heatmaps:
        heatmap = report.heatmaps[layer.heatmap]
        binned = _heatmap_segments(heatmap, log.segments)
        binned_totals = {op: binned.bytes_of(op) for op in OPS}
        if heatmap_agrees(binned_totals, log.totals):
            if binned_totals != log.totals:
                log.notes.append(
                    f"heatmap bytes {binned_totals} differ from the counters' {log.totals}"
                    f" by at most {HEATMAP_TOLERANCE:g} of them: heatmap used for timing,"
                    " its bins rescaled to the counters' bytes"
                )
                rescale_to(binned, log.totals)
            log.files_by_op = {op: _bytes_per_file(log.segments, log.segments.of(op)) for op in OPS}
            log.segments = binned
            log.timing = "heatmap"
            width = float(heatmap.to_df(ops=["write"]).columns[0].length)
            detail = (
                f"timing from heatmap bins of {width:g} s, narrowed to the counters'"
                " first and last access; request counts shared out among bins by bytes"
            )
        else:
            log.notes.append(
                f"heatmap bytes {binned_totals} differ from the counters' {log.totals} by more"
                f" than {HEATMAP_TOLERANCE:g} of them: heatmap not used"
            )
    log.lacks.append(f"{why}: phases from rank-aggregated {layer.module} counters; {detail}")
    if (counters["rank"] == -1).any():
        log.lacks.append(
            "no per-rank counters for shared files: Darshan reduced them to one record"
            " (rank -1), so their per-rank timing is lost"
        )
    if log.segments.histogram is None:
        log.lacks.append(f"no request sizes: the {layer.module} layer has no size counters")
    log.notes.append(
        "zero-byte requests: not told apart without DXT (the counters put them in the 0_100"
        " bucket with requests of up to 100 bytes)"
    )


def _read(path: Path, layer_name: str | None, use_dxt: bool) -> _Log:
    import darshan  # type: ignore[import-untyped]

    with darshan.DarshanReport(str(path), read_all=False) as report:
        job = report.metadata["job"]
        exe = str(report.metadata.get("exe", "")).strip()
        modules = report.modules
        if layer_name is None:
            candidates = [name for name in LAYERS if name in modules]
            if not candidates:
                raise DarshanImportError(
                    f"{path}: no POSIX, MPI-IO or STDIO records: nothing to import"
                )
            layer_name = candidates[0]
        elif layer_name not in modules:
            raise DarshanImportError(f"{path}: the log has no {layer_name} records")
        layer = LAYERS[layer_name]
        start = datetime.datetime.fromtimestamp(job["start_time_sec"], datetime.UTC)
        log = _Log(
            path=path,
            name=Path(exe.split()[0]).name if exe else path.stem,
            exe=exe,
            ranks=int(job["nprocs"]),
            run_time=float(job["run_time"]),
            jobid=int(job["jobid"]),
            start_time=start.isoformat().replace("+00:00", "Z"),
            layer=layer,
            timing="DXT",
            segments=_segments(_columns(), None),
            names={},
            totals=_counter_totals(report, layer),
        )
        if not any(log.totals.values()):
            raise DarshanImportError(f"{path}: no bytes read or written at the {layer_name} layer")
        if layer_name != "POSIX" and "POSIX" not in modules:
            log.lacks.append(f"no POSIX records: phases from the {layer_name} layer")
        elif layer_name != "POSIX":
            log.notes.append(f"phases from the {layer_name} layer (--layer)")
        has_dxt = layer.dxt is not None and layer.dxt in modules
        if has_dxt and use_dxt:
            log.segments = _dxt_segments(report, layer)
        if has_dxt and use_dxt and len(log.segments):
            _reconcile_dxt(log)
            log.notes.append(zero_byte_note(log.segments))
        else:
            why = "no DXT" if not has_dxt else "DXT not used (--no-dxt)" if not use_dxt else ""
            _from_counters(report, log, why or "no DXT requests (the DXT module is empty)")
        log.names = dict(report.name_records)
        _describe(report, log, job)
    return log


def amplification(posix: int, mpiio: int) -> float | None:
    """POSIX bytes per MPI-IO byte of one operation; None when MPI-IO moved nothing."""
    return posix / mpiio if mpiio else None


def amplification_note(posix: dict[Op, int], mpiio: dict[Op, int]) -> str:
    """What each byte at the MPI-IO layer became at the POSIX layer, per operation."""
    parts = []
    for op in OPS:
        verb = "written" if op == "write" else "read"
        ratio = amplification(posix[op], mpiio[op])
        if ratio is None:
            detail = "MPI-IO none" if posix[op] else "none at either layer"
        else:
            detail = f"{ratio:.2f}x the MPI-IO layer's {format_size(mpiio[op])}"
        parts.append(f"{format_size(posix[op])} {verb} ({detail})")
    return "write amplification between layers: POSIX " + ", ".join(parts)


def zero_byte_note(segments: Segments) -> str:
    """How many traced requests moved no bytes (DXT records them like any other request)."""
    counts = []
    for op in OPS:
        mask = segments.of(op)
        zero = int((segments.size[mask] == 0).sum())
        counts.append(f"{zero} of {int(mask.sum())} {op}s")
    return (
        "zero-byte requests: " + ", ".join(counts) + " (counted in `requests` and in the 0_100"
        " bucket, adding no bytes)"
    )


def _reconcile_dxt(log: _Log) -> None:
    """Say so when DXT traced fewer bytes than the counters count."""
    for op in OPS:
        traced = log.segments.bytes_of(op)
        if traced < log.totals[op]:
            log.lacks.append(
                f"incomplete DXT: it traced {format_size(traced)} of the"
                f" {format_size(log.totals[op])} {'written' if op == 'write' else 'read'}"
                " (its buffer filled up or files were excluded); phase sizes cover only the"
                " traced requests"
            )


def _describe(report: Any, log: _Log, job: dict[str, Any]) -> None:
    """What the log lacks and what the reader should know, beyond the choice of layer."""
    if job.get("start_time_nsec", 0) == 0 and job.get("end_time_nsec", 0) == 0:
        log.lacks.append(
            f"whole-second job times: log format {job.get('log_ver', '?')} records the job's"
            " start and end in seconds, so the run time is +-1 s"
        )
    for module, info in report.modules.items():
        if info.get("partial_flag"):
            log.lacks.append(f"{module} records incomplete: Darshan ran out of memory for them")
    if log.layer.module != "STDIO" and "STDIO" in report.modules:
        stdio = _counter_totals(report, LAYERS["STDIO"])
        if any(stdio.values()):
            log.lacks.append(
                f"STDIO not imported: {format_size(stdio['write'])} written and"
                f" {format_size(stdio['read'])} read through STDIO are left out"
                " (--layer STDIO imports them alone)"
            )
    if log.layer.module == "POSIX" and "MPI-IO" in report.modules:
        mpiio = _counter_totals(report, LAYERS["MPI-IO"])
        log.notes.append(amplification_note(log.totals, mpiio))
        if log.totals["read"] > 0 and mpiio["read"] < 0.5 * log.totals["read"]:
            log.notes.append(
                f"POSIX reads {format_size(log.totals['read'])} but MPI-IO only"
                f" {format_size(mpiio['read'])}: the rest is most likely read by the MPI-IO"
                " library itself (data sieving or collective-buffering read-modify-write);"
                " it is replayed as read phases"
            )


def _phase_document(log: _Log, group: PhaseGroup, previous_end: float) -> dict[str, Any]:
    seg = log.segments
    idx = group.indices
    start, end = float(seg.start[idx].min()), float(seg.end[idx].max())
    size = int(seg.size[idx].sum())
    ranks = seg.rank[idx]
    requests = round(float(seg.requests[idx].sum()))
    histogram: dict[str, int] = {}
    if seg.histogram is not None:
        counts = seg.histogram[idx].sum(axis=0)
        histogram = {
            name: n for (name, _), c in zip(SIZE_BUCKETS, counts, strict=True) if (n := round(c))
        }
    if log.files_by_op is None:
        mask = np.zeros(len(seg), dtype=np.bool_)
        mask[idx] = True
        per_file = _bytes_per_file(seg, mask)
    else:  # heatmap bins carry no file: name every file the counters saw for this operation
        per_file = log.files_by_op[group.op]
    files = [
        log.names.get(file_id, f"<record {file_id:x}>")
        for file_id, _ in sorted(per_file.items(), key=lambda item: (-item[1], item[0]))
    ]
    return {
        "compute": round(max(0.0, start - previous_end), 6),
        "start": round(start, 6),
        "duration": round(end - start, 6),
        "op": group.op,
        "size": size,
        "ranks": log.ranks if (ranks < 0).any() else len(np.unique(ranks)),
        "requests": requests,
        "request_size": round(size / requests) if requests else 0,
        "request_histogram": histogram,
        "files": files[:MAX_FILES_LISTED],
        "file_count": len(files),
    }


def workload_document(log: _Log, gap: float) -> dict[str, Any]:
    """The workload file's content (docs/formats.md section 4) for one log."""
    phases = []
    previous_end = 0.0
    for group in group_phases(log.segments, gap):
        phase = _phase_document(log, group, previous_end)
        phases.append(phase)
        previous_end = max(previous_end, phase["start"] + phase["duration"])
    notes = [
        f"phases: segments from all ranks merged, split at idle gaps longer than {gap:g} s"
        f" (max({MIN_GAP:g} s, {GAP_FRACTION:g} x run time) unless --gap is given);"
        " reads and writes of one burst become two phases in order of their first request",
        *log.notes,
    ]
    versions = ", ".join(
        f"{package} {importlib.metadata.version(package)}" for package in ("harmonia", "darshan")
    )
    return {
        "workload": {
            "format": 1,
            "source": log.path.name,
            "source_sha256": hashlib.sha256(log.path.read_bytes()).hexdigest(),
            "imported_by": f"harmonia import-darshan ({versions})",
            "layer": log.layer.module,
            "timing": log.timing,
            "gap_threshold": gap,
            "lacks": log.lacks,
            "notes": notes,
        },
        "apps": [
            {
                "name": log.name,
                "exe": log.exe,
                "ranks": log.ranks,
                "run_time": log.run_time,
                "jobid": log.jobid,
                "start_time": log.start_time,
                "bytes_written": sum(p["size"] for p in phases if p["op"] == "write"),
                "bytes_read": sum(p["size"] for p in phases if p["op"] == "read"),
                "tail": round(max(0.0, log.run_time - previous_end), 6),
                "phases": phases,
            }
        ],
    }


@dataclass(frozen=True)
class Imported:
    """A log turned into a workload: the validated model and the document it was built from."""

    workload: WorkloadFile
    document: dict[str, Any]


def import_log(
    path: Path, *, gap: float | None = None, layer: str | None = None, use_dxt: bool = True
) -> Imported:
    """Read a Darshan log into a workload. Raises DarshanImportError naming the file.

    `gap` overrides the idle time that separates phases; `layer` ("POSIX", "MPI-IO", "STDIO")
    the layer read (default: the first of those the log has); `use_dxt=False` ignores DXT.
    """
    if layer is not None and layer not in LAYERS:
        raise ValueError(f"unknown layer {layer!r} (known: {', '.join(LAYERS)})")
    try:
        with path.open("rb") as stream:
            stream.read(1)
    except OSError as error:
        raise DarshanImportError(f"{path}: cannot read: {error.strerror}") from error
    document = _in_child(path, lambda: _document(path, gap, layer, use_dxt))
    return Imported(WorkloadFile.model_validate(document), document)


# What pydarshan raises on records it cannot make sense of (cffi, pandas and decoding errors).
_PYDARSHAN_FAILURES = (RuntimeError, KeyError, IndexError, ValueError, UnicodeDecodeError)


def _document(path: Path, gap: float | None, layer: str | None, use_dxt: bool) -> dict[str, Any]:
    _check(path)
    try:
        with _c_stderr_captured():
            log = _read(path, layer, use_dxt)
    except _PYDARSHAN_FAILURES as error:
        raise DarshanImportError(
            f"{path}: corrupt or unsupported: pydarshan cannot read it"
            f" ({type(error).__name__}: {error})"
        ) from error
    return workload_document(log, default_gap(log.run_time) if gap is None else gap)


def _in_child(path: Path, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `work` in a forked process: libdarshan-util can crash on a corrupt log.

    The child sends back its result as JSON, or the error it raised; a child killed by a signal
    becomes a DarshanImportError naming the log.
    """
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's code
        try:
            os.close(reader)
            try:
                reply = json.dumps({"document": work()})
            except DarshanImportError as error:
                reply = json.dumps({"error": str(error)})
            except Exception:
                reply = json.dumps({"crash": traceback.format_exc()})
            with os.fdopen(writer, "w", encoding="utf-8") as stream:
                stream.write(reply)
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, encoding="utf-8") as stream:
        text = stream.read()
    _, wait_status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(wait_status):
        signal_name = signal.Signals(os.WTERMSIG(wait_status)).name
        raise DarshanImportError(
            f"{path}: corrupt: libdarshan-util crashed reading it ({signal_name})"
        )
    if not text:
        raise RuntimeError(f"reading {path}: the reader process exited without an answer")
    answer = json.loads(text)
    if "error" in answer:
        raise DarshanImportError(answer["error"])
    if "crash" in answer:
        raise RuntimeError(f"reading {path} failed:\n{answer['crash']}")
    document: dict[str, Any] = answer["document"]
    return document


_TOML_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _toml_string(text: str) -> str:
    escaped = "".join(
        _TOML_ESCAPES.get(c, f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
        for c in text
    )
    return f'"{escaped}"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, dict):
        items = ", ".join(f"{key} = {_toml_value(item)}" for key, item in value.items())
        return f"{{ {items} }}" if items else "{}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if all(isinstance(item, int | float) for item in value):
            return f"[{', '.join(_toml_value(item) for item in value)}]"
        return "[\n" + "".join(f"    {_toml_value(item)},\n" for item in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _toml_table(table: dict[str, Any], comments: dict[str, str]) -> str:
    lines = []
    for key, value in table.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            continue  # arrays of tables follow the table's own keys
        comment = f"  # {comments[key]}" if key in comments else ""
        lines.append(f"{key} = {_toml_value(value)}{comment}\n")
    return "".join(lines)


def workload_toml(document: dict[str, Any]) -> str:
    """The workload document as TOML, with the sizes also written for people in comments."""
    parts = [
        "# Harmonia workload imported from a Darshan log by `harmonia import-darshan`.\n"
        "# Format: docs/formats.md section 4. Times in seconds (since the job started for\n"
        "# `start`), sizes in bytes.\n\n[workload]\n",
        _toml_table(document["workload"], {}),
    ]
    for app in document["apps"]:
        parts.append("\n[[apps]]\n")
        parts.append(
            _toml_table(
                app,
                {
                    "bytes_written": format_size(app["bytes_written"]),
                    "bytes_read": format_size(app["bytes_read"]),
                },
            )
        )
        for phase in app["phases"]:
            parts.append("\n[[apps.phases]]\n")
            parts.append(
                _toml_table(
                    phase,
                    {
                        "size": format_size(phase["size"]),
                        "request_size": f"mean, {format_size(phase['request_size'])}",
                    },
                )
            )
    return "".join(parts)


def write_workload(document: dict[str, Any], out: Path) -> None:
    """Write the workload file whole or not at all (a temporary file renamed over `out`)."""
    text = workload_toml(document)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent or Path("."))
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as open() would have made it, not mkstemp's 0600
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
