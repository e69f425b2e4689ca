"""Scheduler messages and decision latency per I/O phase of a 1,024-rank job, with every rank
speaking to harmonia-schedd and through node agents (docs/node-agent.md, docs/benchmarks.md).

Real: a harmonia-schedd on this host and harmonia-agentload emulating the ranks (1,024 MPI
processes do not fit 2 cores), directly or through 16 harmonia-agentd (one per 64 ranks), over
--runs runs with different arrival seeds. Simulated: harmonia-sim with the control plane
modelled, one agent per rank against one per 64 ranks, on the 1,024-rank job of
examples/agents/large-job.toml and on section V's balanced-8 (8 jobs of 128 ranks), over seeds.

    .venv/bin/python scripts/bench_agents.py --runs 5 --out results/agents

Writes OUT/agents.json, OUT/agents.md (the tables) and OUT/agents.png.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("HARMONIA_BUILD", ROOT / "build"))
SCHEDD = BUILD / "src" / "schedd" / "harmonia-schedd"
AGENTD = BUILD / "src" / "agent" / "harmonia-agentd"
LOAD = BUILD / "src" / "agent" / "harmonia-agentload"
SIM = BUILD / "src" / "sim" / "harmonia-sim"


def wait_for_socket(path: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(path))
            return
        except OSError:
            if process.poll() is not None:
                sys.exit(f"{process.args!r} exited before listening on {path}")
            time.sleep(0.02)
    sys.exit(f"nothing listens on {path}")


def stop(process: subprocess.Popen[bytes]) -> bytes:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=20)
    return out or b""


def real_run(
    ranks: int, group: int, phases: int, seed: int, agents: bool, strategy: str
) -> dict[str, Any]:
    """One run of the load generator against a fresh daemon (and fresh agents)."""
    with tempfile.TemporaryDirectory() as tmp:
        schedd_socket = Path(tmp) / "s.sock"
        schedd = subprocess.Popen(
            [str(SCHEDD), "--socket", str(schedd_socket), "--strategy", strategy],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started: list[subprocess.Popen[bytes]] = []
        try:
            wait_for_socket(schedd_socket, schedd)
            sockets = []
            if agents:
                for k in range((ranks + group - 1) // group):
                    path = Path(tmp) / f"agent{k}.sock"
                    agent = subprocess.Popen(
                        [
                            str(AGENTD),
                            "--socket",
                            str(path),
                            "--schedd",
                            str(schedd_socket),
                            "--job",
                            "agentload",
                            "--group-size",
                            str(group),
                        ],
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                    )
                    started.append(agent)
                    wait_for_socket(path, agent)
                    sockets.append(str(path))
            command = [
                str(LOAD),
                "--schedd",
                str(schedd_socket),
                "--ranks",
                str(ranks),
                "--phases",
                str(phases),
                "--seed",
                str(seed),
                "--job",
                "agentload",
            ]
            if sockets:
                command += ["--agents", ",".join(sockets)]
            done = subprocess.run(
                command, check=False, capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                sys.exit(f"harmonia-agentload failed: {done.stderr.strip()}")
            result: dict[str, Any] = json.loads(done.stdout)
            local = [
                json.loads(stop(agent).decode().strip().splitlines()[-1])
                for agent in started
            ]
            result["agents_from_ranks"] = sum(c["from_ranks"] for c in local)
            return result
        finally:
            for agent in started:
                if agent.poll() is None:
                    agent.kill()
                    agent.wait()
            stop(schedd)


def sim_run(
    scenario: Path, rpn: int, agent_ranks: int, seed: int, policy: str
) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "python"))
    from harmonia.scenario import load_scenario, normalize

    normalized = normalize(load_scenario(scenario))
    normalized["seed"] = seed
    with tempfile.TemporaryDirectory() as tmp:
        scenario_json, out = Path(tmp) / "s.json", Path(tmp) / "r.json"
        scenario_json.write_text(json.dumps(normalized))
        subprocess.run(
            [
                str(SIM),
                "--scenario",
                str(scenario_json),
                "--policy",
                policy,
                "--out",
                str(out),
                "--ranks-per-node",
                str(rpn),
                "--agent-ranks",
                str(agent_ranks),
            ],
            check=True,
            timeout=1800,
        )
        results: dict[str, Any] = json.loads(out.read_text())
    control = results["control"]
    return {
        "messages_per_phase": control["messages_per_phase"],
        "overhead_p50": control["overhead_p50"],
        "overhead_p99": control["overhead_p99"],
        "heartbeats_at_most": control["heartbeats_at_most"],
        "makespan": results["metrics"]["makespan"],
    }


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def cell(s: dict[str, float], scale: float = 1.0, digits: int = 0) -> str:
    return (
        f"{s['median'] * scale:,.{digits}f} "
        f"({s['min'] * scale:,.{digits}f} to {s['max'] * scale:,.{digits}f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--group-size", type=int, default=64)
    parser.add_argument("--phases", type=int, default=10)
    parser.add_argument("--strategy", default="2a")
    parser.add_argument("--sim-seeds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "agents")
    args = parser.parse_args()
    for program in (SCHEDD, AGENTD, LOAD, SIM):
        if not program.exists():
            sys.exit(f"{program}: not built (cmake --build build)")
    if args.runs < 1 or args.sim_seeds < 1:
        sys.exit("--runs and --sim-seeds must be at least 1")

    real: dict[str, list[dict[str, Any]]] = {"direct": [], "agents": []}
    total = 2 * args.runs
    for run in range(args.runs):
        for mode in ("direct", "agents"):
            started = time.monotonic()
            result = real_run(
                args.ranks,
                args.group_size,
                args.phases,
                run + 1,
                mode == "agents",
                args.strategy,
            )
            real[mode].append(result)
            print(
                f"[{len(real['direct']) + len(real['agents'])}/{total}] real {mode} seed "
                f"{run + 1}: {result['scheduler_messages_per_phase']:.0f} messages per phase, "
                f"begin p99 {result['begin_latency_s']['p99'] * 1e3:.2f} ms "
                f"({time.monotonic() - started:.0f} s)",
                flush=True,
            )

    simulated: dict[str, dict[str, list[dict[str, Any]]]] = {}
    scenarios = {
        "1,024-rank job": (ROOT / "examples" / "agents" / "large-job.toml", 32),
        "section V balanced-8": (
            ROOT / "examples" / "section-v" / "balanced-8.toml",
            32,
        ),
    }
    for label, (scenario, rpn) in scenarios.items():
        simulated[label] = {"direct": [], "agents": []}
        for seed in range(1, args.sim_seeds + 1):
            for mode, k in (("direct", 1), ("agents", args.group_size)):
                simulated[label][mode].append(
                    sim_run(scenario, rpn, k, seed, "min-stall")
                )
            print(
                f"sim {label} seed {seed}: "
                f"{simulated[label]['direct'][-1]['messages_per_phase']:.0f} -> "
                f"{simulated[label]['agents'][-1]['messages_per_phase']:.0f} messages per phase",
                flush=True,
            )

    summary: dict[str, Any] = {"real": {}, "sim": {}}
    for mode, runs in real.items():
        summary["real"][mode] = {
            "messages_per_phase": spread(
                [r["scheduler_messages_per_phase"] for r in runs]
            ),
            "begin_p50_s": spread([r["begin_latency_s"]["p50"] for r in runs]),
            "begin_p99_s": spread([r["begin_latency_s"]["p99"] for r in runs]),
            "begin_max_s": spread([r["begin_latency_s"]["max"] for r in runs]),
            "end_p99_s": spread([r["end_latency_s"]["p99"] for r in runs]),
            "fan_out_p50_s": spread([r["fan_out_s"]["p50"] for r in runs]),
        }
    for label, modes in simulated.items():
        summary["sim"][label] = {
            mode: {
                "messages_per_phase": spread([r["messages_per_phase"] for r in runs]),
                "overhead_p50_s": spread([r["overhead_p50"] for r in runs]),
                "overhead_p99_s": spread([r["overhead_p99"] for r in runs]),
                "makespan_s": spread([r["makespan"] for r in runs]),
            }
            for mode, runs in modes.items()
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "agents.json").write_text(
        json.dumps(
            {
                "args": {k: str(v) for k, v in vars(args).items()},
                "summary": summary,
                "real": real,
                "sim": simulated,
            },
            indent=2,
        )
    )
    lines = [
        (
            f"Real: {args.ranks} emulated ranks, {args.phases} phases, strategy {args.strategy}, "
            f"{args.runs} runs; median (min to max) over runs."
        ),
        "",
        (
            "| | scheduler messages per phase | PhaseBegin reply p50 (ms) | p99 (ms) | max (ms) "
            "| PhaseEnd reply p99 (ms) | directive fan-out p50 (ms) |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode, s in summary["real"].items():
        label = (
            "every rank direct"
            if mode == "direct"
            else f"one agent per {args.group_size} ranks"
        )
        lines.append(
            f"| {label} | {cell(s['messages_per_phase'])} | {cell(s['begin_p50_s'], 1e3, 2)} | "
            f"{cell(s['begin_p99_s'], 1e3, 2)} | {cell(s['begin_max_s'], 1e3, 2)} | "
            f"{cell(s['end_p99_s'], 1e3, 2)} | {cell(s['fan_out_p50_s'], 1e3, 2)} |"
        )
    lines += [
        "",
        f"Simulated (min-stall, 32 ranks per node, {args.sim_seeds} seeds): median (min to max).",
        "",
        (
            "| scenario | | scheduler messages per phase | control overhead per phase p50 (ms) "
            "| p99 (ms) | makespan (s) |"
        ),
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, modes in summary["sim"].items():
        for mode, s in modes.items():
            who = (
                "every rank direct"
                if mode == "direct"
                else f"one agent per {args.group_size}"
            )
            lines.append(
                f"| {label} | {who} | {cell(s['messages_per_phase'])} | "
                f"{cell(s['overhead_p50_s'], 1e3, 2)} | {cell(s['overhead_p99_s'], 1e3, 2)} | "
                f"{cell(s['makespan_s'], 1, 1)} |"
            )
    table = "\n".join(lines) + "\n"
    (args.out / "agents.md").write_text(table)
    print(table)
    plot(summary, args.out / "agents.png", args.group_size)


def plot(summary: dict[str, Any], path: Path, group: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    labels = ["every rank", f"agent per {group}"]
    for axis, key, scale, title in (
        (left, "messages_per_phase", 1, "scheduler messages per phase"),
        (right, "begin_p99_s", 1e3, "PhaseBegin reply p99 (ms)"),
    ):
        values = [summary["real"][m][key] for m in ("direct", "agents")]
        medians = [v["median"] * scale for v in values]
        errors = [
            [(v["median"] - v["min"]) * scale for v in values],
            [(v["max"] - v["median"]) * scale for v in values],
        ]
        axis.bar(labels, medians, yerr=errors, capsize=6, color=["#888888", "#2a7ab0"])
        axis.set_title(title)
        if key == "messages_per_phase":
            axis.set_yscale("log")  # 64 times fewer: a linear axis hides the second bar
    fig.suptitle(
        "1,024 emulated ranks against harmonia-schedd (median, min-max over runs)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
