"""The Harmonia paper's buffer-draining case (section V-D, Fig. 9) scaled down to one machine
(`harmonia reproduce buffers`): two VPIC-like MPI jobs whose output together exceeds the buffer
nodes' capacity, run for real through harmonia-schedd and harmonia-bbd with DataWarp and each
Harmonia policy, and simulated with harmonia-sim on the same scaled scenario, its devices measured
here beforehand. docs/reproduction.md compares the two with the paper."""

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
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
from harmonia.names import policy_names  # noqa: E402
from harmonia.profiler import (  # noqa: E402
    Profile,
    ProfileSettings,
    device_toml,
    loopback_bandwidth,
    profile,
)
from harmonia.results import load_run  # noqa: E402
from harmonia.scenario import load_scenario, normalize  # noqa: E402
from harmonia.simulator import find_simulator, run_policies  # noqa: E402

MiB = 1 << 20


@dataclass(frozen=True)
class DrainingCase:
    """The scaled scenario. Paper: 2 instances x 1536 ranks x 16 steps x 32 MB per rank and step
    on 4 buffers of 200 GB, which hold 1.02 instances."""

    jobs: int = 2
    ranks: int = 4
    steps: int = 8
    request: int = 4 * MiB
    requests: int = 2  # per rank and step
    compute: float = 1.0  # seconds before each step's I/O
    buffers: int = 4
    fit: float = 1.1  # instances the buffers hold together
    flush_threshold: float = 0.0  # the scenario format's default, as in examples/vpic-draining
    policies: tuple[str, ...] = field(default_factory=lambda: policy_names("baseline", "harmonia"))
    repeat: int = 1
    profile_bytes: int = 64 * MiB  # per stream, when measuring the devices

    @property
    def spec(self) -> JobSpec:
        return JobSpec(self.ranks, self.steps, self.requests, self.request, self.compute)

    @property
    def instance_bytes(self) -> int:
        return self.ranks * self.spec.bytes_per_rank

    @property
    def capacity(self) -> int:
        """Per node: `fit` instances over all nodes, in whole MiB."""
        return math.ceil(self.fit * self.instance_bytes / self.buffers / MiB) * MiB


@dataclass
class Calibration:
    """What the simulator's platform is built from, measured on this machine."""

    buffer_device: Profile
    pfs_device: Profile
    link_bw: float  # bytes/s over loopback TCP

    def interference_slope(self) -> float:
        """I_f(n) = 1 + slope (n - 1), through the profile's largest n (the daemon's model)."""
        curve = self.buffer_device.curve("write")
        n, fraction = curve[-1]
        return 0.0 if n == 1 else max(0.0, (n / fraction - 1) / (n - 1))


@dataclass
class RealRun:
    policy: str
    repetition: int
    completions: list[float]  # per job, seconds from the common start to its last rank's end
    written: list[int]  # per job, bytes
    waits: list[float]  # per job, as the scheduler recorded them (admission and grants)
    drained: float  # bytes the nodes drained, by their own count

    @property
    def buffered_share(self) -> float:
        """The part of what the jobs wrote that went through the buffer nodes."""
        written = sum(self.written)
        return self.drained / written if written else 0.0


@dataclass
class Outcome:
    case: DrainingCase
    calibration: Calibration
    real: list[RealRun] = field(default_factory=list)
    simulated: dict[str, dict[str, float]] = field(default_factory=dict)


def calibrate(buffer_dir: Path, pfs_dir: Path, per_stream: int) -> Calibration:
    """Profiles of the two directories (1, 2 and 4 streams of `per_stream` bytes) and the
    loopback link."""

    def measure(directory: Path) -> Profile:
        directory.mkdir(parents=True, exist_ok=True)
        settings = ProfileSettings(directory, [1, 2, 4], 4 * MiB, per_stream)
        return profile(settings, ["write", "read"], lambda _point: None)

    link = loopback_bandwidth(b"x" * (4 * MiB), total=512 * MiB)
    return Calibration(measure(buffer_dir), measure(pfs_dir), link)


def scenario_toml(case: DrainingCase, calibration: Calibration) -> str:
    """The scaled case for harmonia-sim: devices as measured, one compute node per job."""
    return (
        "# The Harmonia paper's VPIC draining case (Fig. 9) scaled to one machine by\n"
        "# `harmonia reproduce buffers`; devices and link measured on this machine.\n"
        '[scenario]\nname = "vpic-draining-scaled"\nseed = 9\n\n'
        + device_toml(calibration.buffer_device, "buffer-device")
        + "\n"
        + device_toml(calibration.pfs_device, "pfs-device")
        + '\n[platform]\nnetwork = "switch"\n'
        f"link_bw = {calibration.link_bw:.0f}\ncompute_nodes = {case.jobs}\n\n"
        f'[buffers]\ncount = {case.buffers}\ndevice = "buffer-device"\n'
        f"capacity = {case.capacity}\nflush_threshold = {case.flush_threshold}\n\n"
        '[pfs]\nservers = 1\ndevice = "pfs-device"\n\n'
        "[scheduler]\nmax_colocated = 3\n\n"
        f'[[apps]]\nname = "vpic"\ninstances = {case.jobs}\nranks = {case.ranks}\nnodes = 1\n'
        'workload = "periodic"\n\n'
        f"[apps.periodic]\nsteps = {case.steps}\n"
        f"bytes_per_rank = {case.requests * case.request}\ncompute = {case.compute}\n"
    )


def simulate(
    case: DrainingCase, calibration: Calibration, out: Path
) -> dict[str, dict[str, float]]:
    """harmonia-sim on the scaled scenario: per policy, average completion and wait."""
    out.mkdir(parents=True, exist_ok=True)
    toml = out / "scenario.toml"
    toml.write_text(scenario_toml(case, calibration))
    scenario_json = out / "scenario.json"
    scenario_json.write_text(json.dumps(normalize(load_scenario(toml))))
    outcomes = run_policies(
        find_simulator(), scenario_json, list(case.policies), out, 2, lambda _o: None
    )
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise ClusterError(f"harmonia-sim {failed[0].policy}: {failed[0].stderr.strip()[-500:]}")
    results = {}
    for policy in case.policies:
        run = load_run(out / f"{policy}.json")
        results[policy] = {
            "avg_completion": run.metrics.avg_completion,
            "avg_wait": run.metrics.avg_wait,
        }
    return results


def run_real(
    case: DrainingCase,
    calibration: Calibration,
    policy: str,
    repetition: int,
    work: Path,
    devices: Path,
) -> RealRun:
    """One real run: the nodes' devices under `devices`, the PFS under `work`. The scheduler's
    device model is the measured one."""
    directory = work / f"{policy}-{repetition}"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.rmtree(devices, ignore_errors=True)
    settings = ClusterSettings(
        directory, buffers=case.buffers, capacity=case.capacity, policy=policy,
        flush_threshold=case.flush_threshold, device_root=devices,
        phase_bytes=case.requests * case.request, max_phase_share=1.0,
        write_bw=calibration.buffer_device.peak("write"),
        interference_slope=calibration.interference_slope(),
    )  # fmt: skip
    try:
        with BufferCluster(settings) as cluster:
            results = run_jobs(cluster, case.jobs, case.spec)
            cluster.wait_drained(timeout=300)
            problems = verify(cluster.pfs, case.jobs, case.spec)
            if problems:
                raise ClusterError(f"{policy}: files differ from what was written: {problems[:3]}")
            drained = float(sum(int(b.get("drained_bytes", 0)) for b in cluster.buffer_states()))
            record = cluster.stop()
    finally:
        shutil.rmtree(devices, ignore_errors=True)
    completions = [float(r["apps"][0]["end"]) for r in results]
    written = [int(r["apps"][0]["bytes"]) for r in results]
    waits = [float(a["wait"]) for a in record.get("apps", [])]
    shutil.rmtree(directory / "pfs", ignore_errors=True)  # the bytes were checked
    return RealRun(policy, repetition, completions, written, waits, drained)


def run_case(
    case: DrainingCase, out: Path, devices: Path, progress: Callable[[str], None]
) -> Outcome:
    """Calibrate, simulate, then run every policy `repeat` times (policies interleaved, so that
    a drifting machine biases none)."""
    progress("measuring the buffer device, the PFS directory and the loopback link")
    calibration = calibrate(devices / "profile", out / "pfs-profile", case.profile_bytes)
    shutil.rmtree(devices / "profile", ignore_errors=True)
    shutil.rmtree(out / "pfs-profile", ignore_errors=True)
    outcome = Outcome(case, calibration)
    progress("simulating the scaled scenario with every policy")
    outcome.simulated = simulate(case, calibration, out / "sim")
    total = case.repeat * len(case.policies)
    for repetition in range(case.repeat):
        for policy in case.policies:
            run = run_real(case, calibration, policy, repetition, out / "real", devices / "nodes")
            outcome.real.append(run)
            progress(
                f"[{len(outcome.real)}/{total}] {policy}: completions "
                + ", ".join(f"{c:.1f}" for c in run.completions)
                + " s, waits "
                + ", ".join(f"{w:.1f}" for w in run.waits)
                + f" s, {100 * run.buffered_share:.0f} % through the nodes"
            )
    return outcome


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def summary(outcome: Outcome) -> dict[str, Any]:
    """Per policy: real and simulated average completion and wait, and each against DataWarp."""
    rows: dict[str, Any] = {}
    for policy in outcome.case.policies:
        runs = [r for r in outcome.real if r.policy == policy]
        rows[policy] = {
            "real_completion": _mean([_mean(r.completions) for r in runs]),
            "real_wait": _mean([_mean(r.waits) for r in runs]),
            "buffered_share": _mean([r.buffered_share for r in runs]),
            "sim_completion": outcome.simulated[policy]["avg_completion"],
            "sim_wait": outcome.simulated[policy]["avg_wait"],
        }
    if "datawarp" in rows:
        base = rows["datawarp"]
        for row in rows.values():
            row["real_vs_datawarp"] = row["real_completion"] / base["real_completion"]
            row["sim_vs_datawarp"] = row["sim_completion"] / base["sim_completion"]
    return rows


def markdown(outcome: Outcome) -> str:
    case, cal = outcome.case, outcome.calibration
    rows = summary(outcome)
    lines = [
        f"Scaled VPIC draining case: {case.jobs} jobs x {case.ranks} ranks x {case.steps} steps, "
        f"{case.requests * case.request // MiB} MiB per rank and step after {case.compute:g} s "
        f"of compute; {case.buffers} buffer nodes of {case.capacity // MiB} MiB "
        f"(they hold {case.fit:g} instances); flush threshold {case.flush_threshold:g}; "
        f"{case.repeat} run(s) per policy.",
        "",
        f"Measured: buffer device {cal.buffer_device.peak('write') / 1e6:.0f} MB/s write, "
        f"PFS directory {cal.pfs_device.peak('write') / 1e6:.0f} MB/s write, "
        f"loopback TCP {cal.link_bw / 1e9:.2f} GB/s.",
        "",
        "| policy | real avg completion (s) | simulated (s) | real avg wait (s) | simulated (s) "
        "| real / DataWarp | simulated / DataWarp | written through the nodes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for policy, row in rows.items():
        lines.append(
            f"| {policy} | {row['real_completion']:.2f} | {row['sim_completion']:.2f} "
            f"| {row['real_wait']:.2f} | {row['sim_wait']:.2f} "
            f"| {row.get('real_vs_datawarp', float('nan')):.2f} "
            f"| {row.get('sim_vs_datawarp', float('nan')):.2f} "
            f"| {100 * row['buffered_share']:.0f} % |"
        )
    return "\n".join(lines) + "\n"


def plot(outcome: Outcome, path: Path) -> None:
    """Average completion and wait per policy, real next to simulated."""
    rows = summary(outcome)
    policies = list(rows)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.38
    for ax, key, title in (
        (axes[0], "completion", "average completion"),
        (axes[1], "wait", "average wait"),
    ):
        xs = range(len(policies))
        ax.bar([x - width / 2 for x in xs], [rows[p][f"real_{key}"] for p in policies], width,
               label="real (harmonia-bbd, MPI jobs)")  # fmt: skip
        ax.bar([x + width / 2 for x in xs], [rows[p][f"sim_{key}"] for p in policies], width,
               label="simulated (harmonia-sim)")  # fmt: skip
        ax.set_xticks(list(xs), policies, rotation=25, ha="right")
        ax.set_ylabel("seconds")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend()
    figure.suptitle("VPIC draining case, scaled to one machine: real runs and simulation")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_outputs(outcome: Outcome, out: Path) -> list[Path]:
    data = {
        "case": outcome.case.__dict__,
        "calibration": {
            "buffer_write_bw": outcome.calibration.buffer_device.peak("write"),
            "pfs_write_bw": outcome.calibration.pfs_device.peak("write"),
            "link_bw": outcome.calibration.link_bw,
        },
        "summary": summary(outcome),
        "real": [r.__dict__ for r in outcome.real],
        "simulated": outcome.simulated,
    }
    return write_report(out, markdown(outcome), data, "buffers.png", lambda p: plot(outcome, p))
