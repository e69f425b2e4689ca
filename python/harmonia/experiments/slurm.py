"""The buffer-draining case (section V-D, Fig. 9) submitted as sbatch jobs (`harmonia reproduce
slurm`): the scaled VPIC case of `harmonia reproduce buffers`, each instance one Slurm job whose
#BB_LUA directives reserve an instance's output and stage every file out to the PFS, on a
`harmonia cluster` in DataWarp mode and in Harmonia mode; every byte checked on the PFS; the
simulator's prediction for the same devices beside it."""

import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harmonia.buffers.cluster import ClusterError, verify  # noqa: E402
from harmonia.buffers.experiment import (  # noqa: E402
    Calibration,
    DrainingCase,
    MiB,
    calibrate,
    simulate,
)
from harmonia.experiments import write_report  # noqa: E402
from harmonia.simulator import find_tool  # noqa: E402
from harmonia.slurm import SlurmCluster, SlurmSettings  # noqa: E402

JOB_USER, JOB_GROUP = "nobody", "nogroup"  # Slurm's burst-buffer plugins refuse root's jobs
MODES = {"datawarp": "datawarp", "harmonia": "max-bandwidth"}  # mode -> harmonia-schedd policy
START_DELAY = 6.0  # seconds from the submissions to the jobs' common start (Slurm starts them)


@dataclass
class SlurmRun:
    mode: str
    repetition: int
    completions: list[float]  # per job: its last rank's end, from the common start (bench)
    persisted: list[float]  # per job: until teardown, its data staged out (from sbatch; the
    # bench's common start is START_DELAY later)
    started: list[float]  # per job: when Slurm started it, from submission
    written: list[int]


@dataclass
class SlurmOutcome:
    case: DrainingCase
    calibration: Calibration
    runs: list[SlurmRun] = field(default_factory=list)
    simulated: dict[str, dict[str, float]] = field(default_factory=dict)


def job_script(case: DrainingCase, mode: str, k: int, bench: Path, results: Path, out: Path,
               start_at: float) -> str:  # fmt: skip
    """Instance k: mpirun of harmonia-bench inside the job, writing under $HARMONIA_BB, with
    every file it writes staged out to `results`. DataWarp mode reserves the instance's output
    for the whole job; Harmonia mode declares it (io=) and leaves the grants to the policy."""
    spec = case.spec
    size = f"{case.instance_bytes // MiB}M"
    lines = [
        "#!/bin/bash",
        "#SBATCH -n 1",
        f"#SBATCH -o {out}/job{k}.out",
        f"#BB_LUA jobdw pool=harmonia capacity={size}" if mode == "datawarp"
        else f"#BB_LUA jobdw io={size}",
    ]  # fmt: skip
    for rank in range(spec.ranks):
        for step in range(spec.steps):
            name = (f"app{k}-rank{rank}.dat" if spec.steps == 1
                    else f"app{k}-rank{rank}-step{step}.dat")  # fmt: skip
            lines.append(f"#BB_LUA stage_out source=$HARMONIA_BB/{name} "
                         f"destination={results}/{name}")  # fmt: skip
    lines += [
        # mpirun starts the ranks inside this one-task job: they are the job's processes.
        f"export SLURM_NTASKS={spec.ranks}",
        f"export HARMONIA_BYTES_PER_PROCESS={spec.bytes_per_rank}",
        "session=$(mktemp -d)",
        f"mpirun --oversubscribe -np {spec.ranks} --mca orte_tmpdir_base $session "
        "--mca ras ^slurm --mca plm ^slurm --mca ess ^slurm "
        "-x LD_PRELOAD -x HARMONIA_SCHEDD -x HARMONIA_BUFFER_ROOT -x HARMONIA_STAGE_INCLUDE "
        "-x HARMONIA_BYTES_PER_PROCESS -x SLURM_NTASKS -x SLURM_JOB_ID -x HARMONIA_PRIORITY "
        "-x HARMONIA_HINT "
        f"{bench} --dir $HARMONIA_BB --apps 1 --first-app {k} --requests {spec.requests} "
        f"--size {spec.size} --steps {spec.steps} --compute {spec.compute} --keep 1 "
        f"--sync none --start-at {start_at:.6f}",
        "status=$?",
        "rm -rf $session",
        "exit $status",
    ]
    return "\n".join(lines) + "\n"


def run_mode(case: DrainingCase, mode: str, repetition: int, work: Path,
             progress: Callable[[str], None]) -> SlurmRun:  # fmt: skip
    """One run: a cluster in `mode`, the instances submitted at once, every file checked."""
    directory = Path(tempfile.mkdtemp(prefix=f"harmonia-slurm-{mode}-", dir=work))
    directory.chmod(0o755)
    settings = SlurmSettings(directory, nodes=case.jobs, buffers=case.buffers,
                             capacity=case.capacity, policy=MODES[mode])  # fmt: skip
    cluster = SlurmCluster(settings)
    bench = find_tool("harmonia-bench", "HARMONIA_BENCH", "src/tools/harmonia-bench").resolve()
    env = {**os.environ, **cluster.env()}
    try:
        cluster.up(progress=lambda _line: None)
        out = directory / "out"
        results = cluster.pfs / "results"
        for d in (out, results):
            d.mkdir()
            shutil.chown(d, JOB_USER, JOB_GROUP)
        start_at = time.time() + START_DELAY  # every rank's first step starts then
        submitted = time.monotonic()
        jobs = []
        for k in range(case.jobs):
            script = directory / f"job{k}.sh"
            script.write_text(job_script(case, mode, k, bench, results, out, start_at))
            done = subprocess.run(
                ["sbatch", "--parsable", f"--uid={JOB_USER}", f"--gid={JOB_GROUP}", str(script)],
                capture_output=True, text=True, env=env, timeout=60, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise ClusterError(f"sbatch job{k}: {done.stderr.strip()}")
            jobs.append(done.stdout.strip().split(";")[0])
        persisted: dict[str, float] = {}
        started: dict[str, float] = {}
        deadline = time.monotonic() + 900
        while len(persisted) < len(jobs):
            if time.monotonic() > deadline:
                raise ClusterError(f"{mode}: the jobs did not finish within 900 s")
            for job in jobs:
                state_file = directory / "jobs" / f"{job}.json"
                log = directory / "jobs" / f"{job}.log"
                now = time.monotonic() - submitted
                if job not in started and (out / f"job{jobs.index(job)}.out").exists():
                    started[job] = now
                if job not in persisted and log.exists() and not state_file.exists():
                    persisted[job] = now
            time.sleep(0.2)
        problems = verify(results, case.jobs, case.spec)
        if problems:
            raise ClusterError(f"{mode}: files on the PFS differ from what was written: "
                               f"{problems[:3]}")  # fmt: skip
        completions, written = [], []
        for k, job in enumerate(jobs):
            text = (out / f"job{k}.out").read_text()
            try:
                result = json.loads(text[text.index("{") :])
            except ValueError:
                raise ClusterError(f"{mode}: job {job} printed no result: {text[-500:]}") from None
            completions.append(float(result["apps"][0]["end"]))
            written.append(int(result["apps"][0]["bytes"]))
        run = SlurmRun(mode, repetition, completions, [persisted[j] for j in jobs],
                       [started.get(j, math.nan) for j in jobs], written)  # fmt: skip
        ends = ", ".join(f"{c:.1f}" for c in run.completions)
        on_pfs = ", ".join(f"{p:.1f}" for p in run.persisted)
        progress(f"{mode} run {repetition + 1}: bench completions {ends} s; "
                 f"data on the PFS after {on_pfs} s; every byte checked")  # fmt: skip
        return run
    finally:
        cluster.down(progress=lambda _line: None)
        shutil.rmtree(directory, ignore_errors=True)


def run_case(case: DrainingCase, out: Path, modes: tuple[str, ...],
             progress: Callable[[str], None]) -> SlurmOutcome:  # fmt: skip
    work = out / "runs"
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    # The cluster's nodes keep their devices beside the PFS, in `work`: measure both there.
    progress("measuring the buffer nodes' and the PFS's directory and the loopback link")
    calibration = calibrate(work / "bb-profile", work / "pfs-profile", case.profile_bytes)
    shutil.rmtree(work / "bb-profile", ignore_errors=True)
    shutil.rmtree(work / "pfs-profile", ignore_errors=True)
    outcome = SlurmOutcome(case, calibration)
    progress("simulating the scaled scenario")
    outcome.simulated = simulate(case, calibration, out / "sim")
    for repetition in range(case.repeat):
        for mode in modes:  # interleaved, so that a drifting machine biases neither
            outcome.runs.append(run_mode(case, mode, repetition, work, progress))
    return outcome


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def summary(outcome: SlurmOutcome) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for mode in dict.fromkeys(r.mode for r in outcome.runs):
        runs = [r for r in outcome.runs if r.mode == mode]
        per_run = [_mean(r.completions) for r in runs]
        persisted = [_mean(r.persisted) for r in runs]
        sim = outcome.simulated[MODES[mode]]
        rows[mode] = {
            "policy": MODES[mode],
            "completion": _mean(per_run), "completion_spread": _spread(per_run),
            "persisted": _mean(persisted), "persisted_spread": _spread(persisted),
            "sim_completion": sim["avg_completion"], "sim_wait": sim["avg_wait"],
            "runs": len(runs),
        }  # fmt: skip
    if "datawarp" in rows:
        for row in rows.values():
            row["vs_datawarp"] = row["completion"] / rows["datawarp"]["completion"]
            row["sim_vs_datawarp"] = row["sim_completion"] / rows["datawarp"]["sim_completion"]
    return rows


def markdown(outcome: SlurmOutcome) -> str:
    case, cal = outcome.case, outcome.calibration
    lines = [
        f"Scaled VPIC draining case as sbatch jobs: {case.jobs} jobs x {case.ranks} ranks x "
        f"{case.steps} steps, {case.requests * case.request // MiB} MiB per rank and step after "
        f"{case.compute:g} s of compute; each job asks for its {case.instance_bytes // MiB} MiB "
        f"(DataWarp mode: `capacity=`, reserved for the whole job; Harmonia mode: `io=`, "
        f"granted phase by phase) and stages its {case.ranks * case.steps} files out; "
        f"{case.buffers} buffer nodes of {case.capacity // MiB} MiB; "
        f"{case.repeat} run(s) per mode.",
        "",
        f"Measured: buffer device {cal.buffer_device.peak('write') / 1e6:.0f} MB/s write, "
        f"PFS directory {cal.pfs_device.peak('write') / 1e6:.0f} MB/s write, "
        f"loopback TCP {cal.link_bw / 1e9:.2f} GB/s.",
        "",
        "| mode (policy) | avg completion (s), spread over runs | simulated (s) "
        "| / DataWarp | simulated / DataWarp | data on the PFS, s after sbatch (start: +6 s) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, row in summary(outcome).items():
        lines.append(
            f"| {mode} ({row['policy']}) | {row['completion']:.2f} ({row['completion_spread']}) "
            f"| {row['sim_completion']:.2f} | {row.get('vs_datawarp', math.nan):.2f} "
            f"| {row.get('sim_vs_datawarp', math.nan):.2f} "
            f"| {row['persisted']:.1f} ({row['persisted_spread']}) |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: dict[str, Any], path: Path) -> None:
    """Average completion per mode under Slurm next to the simulator's, and when the data were
    on the PFS (from the common start)."""
    modes = list(rows)
    xs = range(len(modes))
    width = 0.27
    figure, ax = plt.subplots(figsize=(7, 4))
    ax.bar([x - width for x in xs], [rows[m]["completion"] for m in modes], width,
           label="Slurm jobs (harmonia-bench)")  # fmt: skip
    ax.bar(list(xs), [rows[m]["sim_completion"] for m in modes], width,
           label="simulated (harmonia-sim)")  # fmt: skip
    ax.bar([x + width for x in xs], [rows[m]["persisted"] - START_DELAY for m in modes], width,
           label="data staged out to the PFS")  # fmt: skip
    ax.set_xticks(list(xs), [f"{m} ({rows[m]['policy']})" for m in modes])
    ax.set_ylabel("seconds from the jobs' common start (average)")
    ax.set_title("VPIC draining case as sbatch jobs")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_outputs(outcome: SlurmOutcome, out: Path) -> list[Path]:
    data = {
        "case": outcome.case.__dict__, "summary": summary(outcome),
        "runs": [r.__dict__ for r in outcome.runs], "simulated": outcome.simulated,
    }  # fmt: skip
    return write_report(out, markdown(outcome), data, "slurm.png",
                        lambda p: plot(summary(outcome), p))  # fmt: skip
