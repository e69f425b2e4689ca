"""Read phases for real (`harmonia reproduce reads`): a checkpoint job writes its files to the PFS
through libharmonia and the buffer nodes (drained to the PFS), then an analysis job computes for a
while and reads them, with HARMONIA_PREFETCH (the nodes stage the files in during the computation
and serve the reads) and without (the job reads the PFS). Both under harmonia-schedd with each
policy, on a PFS whose files sit in the page cache ("cached") and on one whose files were evicted
from it beforehand ("evicted": the reads then cost what this machine's disk costs). Every byte the
analysis job reads is checked against the PFS's files. docs/reproduction.md compares the runs with
the simulated example (examples/read-phases)."""

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harmonia.buffers.cluster import (  # noqa: E402
    BufferCluster,
    ClusterError,
    ClusterSettings,
    JobSpec,
    run_jobs,
    verify,
)
from harmonia.experiments import write_report  # noqa: E402

MiB = 1 << 20
CACHES = ("evicted", "cached")
JOB_SCRIPT = Path(__file__).with_name("analysis_job.py")


@dataclass(frozen=True)
class ReadCase:
    """The checkpoint job's `ranks` each write one file of `requests` x `request` bytes; the
    analysis job computes `compute` seconds and then reads them all."""

    ranks: int = 2
    requests: int = 16
    request: int = 4 * MiB
    compute: float = 1.5
    buffers: int = 2
    policies: tuple[str, ...] = ("max-bandwidth", "datawarp")
    caches: tuple[str, ...] = CACHES
    repeat: int = 5

    @property
    def spec(self) -> JobSpec:
        return JobSpec(self.ranks, 1, self.requests, self.request, 0.0)

    @property
    def input_bytes(self) -> int:
        return self.ranks * self.requests * self.request

    @property
    def capacity(self) -> int:
        """Per node: room for the checkpoint and a staged-in copy of it at once."""
        return 2 * -(-self.input_bytes // self.buffers // MiB) * MiB


@dataclass
class ReadRun:
    policy: str
    repetition: int
    prefetch: bool
    cache: str  # "evicted" or "cached": the PFS files' state when the analysis job started
    read_seconds: float  # the job's read phase as it saw it: first open to last byte
    completion: float  # from the job's launch to its exit
    grant_wait: float | None  # the read phase's wait for its grant (record); None: no phase
    stage_in: tuple[float, float] | None  # start, end, in seconds relative to the read request
    staged_bytes: int  # bytes the stage-in copied (record)
    served_bytes: int  # bytes the nodes served from copies during this run
    read_bytes: int
    bytes_matched: bool  # every file's SHA-256 equals the PFS file's

    @property
    def job_key(self) -> str:
        return job_key(self.policy, self.repetition, self.prefetch, self.cache)


def job_key(policy: str, repetition: int, prefetch: bool, cache: str) -> str:
    return f"analysis-{policy}-{repetition}-{'prefetch' if prefetch else 'pfs'}-{cache}"


@dataclass
class Outcome:
    case: ReadCase
    pfs_read_bw: dict[str, float] = field(default_factory=dict)  # cache state -> bytes/s
    runs: list[ReadRun] = field(default_factory=list)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 * MiB):
            digest.update(chunk)
    return digest.hexdigest()


def evict(paths: list[Path]) -> None:
    """Drops the files' pages from the page cache (posix_fadvise POSIX_FADV_DONTNEED, per file,
    no root needed); written back first, since the kernel keeps dirty pages."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(paths: list[Path]) -> None:
    """Reads the files once, so that they sit in the page cache."""
    for path in paths:
        with path.open("rb") as f:
            while f.read(4 * MiB):
                pass


def pfs_read_bandwidth(paths: list[Path], cache: str) -> float:
    """Bytes/s of one sequential read of the files from the PFS directory, in that state."""
    (evict if cache == "evicted" else warm)(paths)
    started = time.monotonic()
    total = 0
    for path in paths:
        with path.open("rb") as f:
            while chunk := f.read(4 * MiB):
                total += len(chunk)
    return total / (time.monotonic() - started)


def analyse(
    cluster: BufferCluster, key: str, inputs: list[Path], compute: float, prefetch: bool
) -> tuple[dict[str, Any], float]:
    """One analysis job; returns its JSON and its completion (launch to exit, seconds)."""
    env = {**os.environ, **cluster.env(), "HARMONIA_JOB": key}
    if prefetch:
        env["HARMONIA_PREFETCH"] = ",".join(str(p) for p in inputs)
    launched = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(JOB_SCRIPT), str(compute), *map(str, inputs)],
        env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    completion = time.monotonic() - launched
    if done.returncode != 0:
        raise ClusterError(f"{key} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result, completion


def variants(case: ReadCase, rotation: int) -> list[tuple[bool, str]]:
    """The analysis runs of one cluster, (prefetch, cache), rotated so that no variant always
    comes first after the checkpoint."""
    every = [(prefetch, cache) for cache in case.caches for prefetch in (True, False)]
    shift = rotation % len(every)
    return every[shift:] + every[:shift]


def run_cluster(
    case: ReadCase,
    policy: str,
    repetition: int,
    rotation: int,
    work: Path,
    devices: Path,
    outcome: Outcome,
    progress: Callable[[str], None],
    total: int,
) -> None:
    """One cluster: the checkpoint job, then the analysis job once per variant."""
    directory = work / f"{policy}-{repetition}"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.rmtree(devices, ignore_errors=True)
    settings = ClusterSettings(
        directory, buffers=case.buffers, capacity=case.capacity, policy=policy,
        flush_threshold=0.0, device_root=devices,
        phase_bytes=case.requests * case.request, max_phase_share=1.0,
    )  # fmt: skip
    pending: list[dict[str, Any]] = []
    try:
        with BufferCluster(settings) as cluster:
            run_jobs(cluster, 1, case.spec, start_slack=0.5)
            cluster.wait_drained(timeout=120)
            problems = verify(cluster.pfs, 1, case.spec)
            if problems:
                raise ClusterError(f"{policy}: the checkpoint differs from what was written: "
                                   f"{problems[:3]}")  # fmt: skip
            inputs = sorted(cluster.pfs.glob("app0-rank*.dat"))
            expected = {str(p): sha256_of(p) for p in inputs}
            if not outcome.pfs_read_bw:
                for cache in CACHES:
                    outcome.pfs_read_bw[cache] = pfs_read_bandwidth(inputs, cache)
            # The nodes copy only files unchanged for 1 s (docs/buffer-nodes.md).
            time.sleep(1.1)
            for prefetch, cache in variants(case, rotation):
                (evict if cache == "evicted" else warm)(inputs)
                key = job_key(policy, repetition, prefetch, cache)
                before = cluster.node_total("staged_read_bytes")
                result, completion = analyse(cluster, key, inputs, case.compute, prefetch)
                served = cluster.node_total("staged_read_bytes") - before
                got = result["files"]
                matched = all(got[name]["sha256"] == digest for name, digest in expected.items())
                pending.append({
                    "policy": policy, "repetition": repetition, "prefetch": prefetch,
                    "cache": cache, "read_seconds": result["read_end"] - result["read_start"],
                    "completion": completion, "served_bytes": served,
                    "read_bytes": sum(int(f["size"]) for f in got.values()),
                    "bytes_matched": matched,
                })  # fmt: skip
                if not matched:
                    bad = [n for n, d in expected.items() if got[n]["sha256"] != d]
                    raise ClusterError(f"{key}: the job read bytes that differ from the PFS "
                                       f"files: {', '.join(bad)}")  # fmt: skip
            record = cluster.stop()
    finally:
        shutil.rmtree(devices, ignore_errors=True)
    for fields in pending:
        run = ReadRun(**fields, grant_wait=None, stage_in=None, staged_bytes=0)
        phases = [p for p in record.get("phases", [])
                  if p["job"] == run.job_key and p["op"] == "read"]  # fmt: skip
        stage_ins = [p for p in record.get("prefetches", []) if p["app"] == run.job_key]
        if phases:
            run.grant_wait = sum(float(p["granted"]) - float(p["requested"]) for p in phases)
            if stage_ins:
                requested = float(phases[0]["requested"])
                run.stage_in = (
                    min(float(s["start"]) for s in stage_ins) - requested,
                    max(float(s["end"]) for s in stage_ins) - requested,
                )
        run.staged_bytes = sum(int(s["bytes"]) for s in stage_ins)
        outcome.runs.append(run)
        progress(f"[{len(outcome.runs)}/{total}] {describe(run)}")
    shutil.rmtree(directory, ignore_errors=True)  # the bytes were checked


def describe(run: ReadRun) -> str:
    what = "prefetch" if run.prefetch else "no prefetch"
    line = f"{run.policy}, {what}, PFS {run.cache}: read {run.read_seconds:.3f} s"
    if run.grant_wait is not None:
        line += f" (grant wait {run.grant_wait:.3f} s)"
    if run.stage_in is not None:
        line += f", stage-in {run.stage_in[0]:+.2f}..{run.stage_in[1]:+.2f} s of the read"
    return (
        line
        + f", job {run.completion:.2f} s, {run.served_bytes / MiB:.0f} of "
        + f"{run.read_bytes / MiB:.0f} MiB from copies, "
        + ("bytes match" if run.bytes_matched else "BYTES DIFFER")
    )


def run_case(case: ReadCase, out: Path, devices: Path, progress: Callable[[str], None]) -> Outcome:
    """Every policy `repeat` times, policies interleaved (a drifting machine biases none); in
    each run, the analysis job with and without prefetch on each PFS cache state."""
    if case.repeat < 1 or not case.policies or not case.caches:
        raise ValueError("a case needs at least one repetition, policy and cache state")
    unknown = [c for c in case.caches if c not in CACHES]
    if unknown:
        raise ValueError(f"cache states {unknown}: expected {', '.join(CACHES)}")
    outcome = Outcome(case)
    total = case.repeat * len(case.policies) * 2 * len(case.caches)
    progress(
        f"{total} analysis runs: {len(case.policies)} policies x prefetch on/off x PFS "
        f"{'/'.join(case.caches)} x {case.repeat} repetitions, "
        f"{case.input_bytes / MiB:.0f} MiB read after {case.compute:g} s of compute"
    )
    rotation = 0
    for repetition in range(case.repeat):
        for policy in case.policies:
            run_cluster(case, policy, repetition, rotation, out / "real", devices, outcome,
                        progress, total)  # fmt: skip
            rotation += 1
    shutil.rmtree(out / "real", ignore_errors=True)  # emptied run by run
    return outcome


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}  # fmt: skip


def summary(outcome: Outcome) -> list[dict[str, Any]]:
    """Per policy, cache state and prefetch: median and range of each measure, and the median
    read phase and completion against the same policy and cache state without prefetch."""
    rows = []
    for policy in outcome.case.policies:
        for cache in outcome.case.caches:
            base: dict[str, Any] = {}
            for prefetch in (False, True):
                runs = [
                    r
                    for r in outcome.runs
                    if (r.policy, r.cache, r.prefetch) == (policy, cache, prefetch)
                ]
                row: dict[str, Any] = {
                    "policy": policy, "cache": cache, "prefetch": prefetch, "runs": len(runs),
                    "read_seconds": _stats([r.read_seconds for r in runs]),
                    "grant_wait": _stats([r.grant_wait for r in runs if r.grant_wait is not None]),
                    "stage_in_start": _stats([r.stage_in[0] for r in runs if r.stage_in]),
                    "stage_in_end": _stats([r.stage_in[1] for r in runs if r.stage_in]),
                    "completion": _stats([r.completion for r in runs]),
                    "served_share": _stats([r.served_bytes / r.read_bytes for r in runs
                                            if r.read_bytes]),
                    "all_bytes_matched": all(r.bytes_matched for r in runs),
                }  # fmt: skip
                if not prefetch:
                    base = row
                elif base.get("runs"):
                    for key in ("read_seconds", "completion"):
                        row[f"{key}_vs_no_prefetch"] = row[key]["median"] / base[key]["median"]
                rows.append(row)
    return rows


def _cell(stats: dict[str, float], digits: int = 3) -> str:
    if not stats:
        return "-"
    return (f"{stats['median']:.{digits}f} ({stats['min']:.{digits}f}-"
            f"{stats['max']:.{digits}f})")  # fmt: skip


def markdown(outcome: Outcome) -> str:
    case = outcome.case
    bw = outcome.pfs_read_bw
    lines = [
        f"Checkpoint: {case.ranks} files of {case.requests * case.request // MiB} MiB written "
        f"through {case.buffers} buffer nodes and drained to the PFS; analysis: "
        f"{case.compute:g} s of compute, then reads all {case.input_bytes // MiB} MiB in 4 MiB "
        f"read() calls; {case.repeat} repetition(s), policies interleaved.",
        "",
        "PFS directory read by this machine, one stream: "
        + ", ".join(f"{bw[c] / 1e9:.2f} GB/s {c}" for c in CACHES if c in bw)
        + ". Buffer nodes: devices in RAM (/dev/shm), reads over loopback TCP.",
        "",
        "Median (min-max) over the repetitions; times in seconds; stage-in start and end are "
        "relative to the read phase's request (negative: before it); served from copies: the "
        "share of the bytes read that the nodes served (harmonia-bbctl status), the rest came "
        "from the PFS.",
        "",
        "| policy | PFS | prefetch | read phase (s) | grant wait (s) | stage-in start | "
        "stage-in end | job completion (s) | served from copies | read / no prefetch | "
        "bytes checked |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary(outcome):
        share = row["served_share"]
        ratio = row.get("read_seconds_vs_no_prefetch")
        lines.append(
            f"| {row['policy']} | {row['cache']} | {'yes' if row['prefetch'] else 'no'} "
            f"| {_cell(row['read_seconds'])} | {_cell(row['grant_wait'])} "
            f"| {_cell(row['stage_in_start'], 2)} | {_cell(row['stage_in_end'], 2)} "
            f"| {_cell(row['completion'], 2)} "
            f"| {100 * share['median']:.0f} % (min {100 * share['min']:.0f} %) "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} "
            f"| {'all match' if row['all_bytes_matched'] else 'MISMATCH'} ({row['runs']} runs) |"
        )
    return "\n".join(lines) + "\n"


def plot(outcome: Outcome, path: Path) -> None:
    """Per policy and PFS cache state, the read phase's median and range, with and without
    prefetch; and the same as a ratio to no prefetch."""
    rows = summary(outcome)
    groups = [(p, c) for p in outcome.case.policies for c in outcome.case.caches]
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.38
    xs = list(range(len(groups)))
    for offset, prefetch, label in ((-width / 2, False, "read from the PFS"),
                                    (width / 2, True, "HARMONIA_PREFETCH")):  # fmt: skip
        stats = [next(r for r in rows if (r["policy"], r["cache"], r["prefetch"])
                      == (p, c, prefetch))["read_seconds"] for p, c in groups]  # fmt: skip
        medians = [s["median"] for s in stats]
        errors = [[s["median"] - s["min"] for s in stats], [s["max"] - s["median"] for s in stats]]
        axes[0].bar([x + offset for x in xs], medians, width, yerr=errors, capsize=3, label=label)
    names = [f"{p}\nPFS {c}" for p, c in groups]
    axes[0].set_xticks(xs, names, fontsize=8)
    axes[0].set_ylabel("seconds (median, min-max)")
    axes[0].set_title("the analysis job's read phase")
    # Room above the tallest bar for the legend.
    axes[0].set_ylim(0, 1.35 * max(r["read_seconds"]["max"] for r in rows))
    axes[0].legend(fontsize=8, loc="upper left")
    ratios = [next(r for r in rows if (r["policy"], r["cache"], r["prefetch"]) == (p, c, True))
              .get("read_seconds_vs_no_prefetch", float("nan")) for p, c in groups]  # fmt: skip
    axes[1].bar(xs, ratios, 0.5, color="tab:orange")
    axes[1].axhline(1.0, color="black", linewidth=0.8)
    axes[1].set_xticks(xs, names, fontsize=8)
    axes[1].set_ylabel("median with prefetch / median without")
    axes[1].set_title("read phase with prefetch, against no prefetch")
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    figure.suptitle("Read phases on real daemons, one machine (harmonia reproduce reads)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_outputs(outcome: Outcome, out: Path) -> list[Path]:
    data = {
        "case": asdict(outcome.case),
        "pfs_read_bw": outcome.pfs_read_bw,
        "summary": summary(outcome),
        "runs": [asdict(r) for r in outcome.runs],
    }
    return write_report(out, markdown(outcome), data, "reads.png", lambda p: plot(outcome, p))
