"""The simulator's control plane (docs/node-agent.md, "In the simulator"): messages per phase
with every rank speaking, or one agent per 64 ranks, and the time those messages add."""

import json
import subprocess
from pathlib import Path

import pytest
from sim_support import RunSim, app, scenario, sim_command

GB = 1e9


# Two applications of 4 nodes, two phases each.
TWO_APPS = scenario(
    [app("a", [(1.0, 4 * GB), (1.0, 4 * GB)]), app("b", [(1.5, 4 * GB)] * 2)]
)


def test_messages_per_phase_follow_the_connections(
    run_sim: RunSim,
) -> None:
    direct = run_sim(
        TWO_APPS, "min-stall", "--ranks-per-node", "128", "--agent-ranks", "1"
    )
    agents = run_sim(
        TWO_APPS, "min-stall", "--ranks-per-node", "128", "--agent-ranks", "64"
    )
    for result, connections in ((direct, 4 * 128), (agents, 4 * 2)):
        phases = result["control"]["phases"]
        assert len(phases) == 4
        for phase in phases:
            assert phase["connections"] == connections
            # PhaseBegin, its reply, the pushed grant, PhaseEnd, its reply.
            assert phase["messages"] == 5 * connections
    assert (
        direct["control"]["messages_per_phase"]
        == 64 * agents["control"]["messages_per_phase"]
    )
    assert (
        direct["control"]["heartbeats_at_most"]
        > 60 * agents["control"]["heartbeats_at_most"]
    )


def test_every_rank_speaking_costs_the_scheduler_time(
    run_sim: RunSim,
) -> None:
    options = [
        "--ranks-per-node",
        "128",
        "--message-seconds",
        "1e-4",
        "--arrival-jitter",
        "0",
    ]
    direct = run_sim(TWO_APPS, "min-stall", *options, "--agent-ranks", "1")
    agents = run_sim(TWO_APPS, "min-stall", *options, "--agent-ranks", "64")
    # 512 connections, one message at a time, 0.1 ms each: the grant alone reaches the last
    # connection about 51 ms after the policy decided; 8 connections: under 1 ms.
    for phase in direct["control"]["phases"]:
        assert phase["overhead"] >= 512 * 1e-4
    for phase in agents["control"]["phases"]:
        assert phase["overhead"] < 0.01
    assert direct["metrics"]["makespan"] > agents["metrics"]["makespan"]


def test_without_ranks_per_node_nothing_is_modelled(
    run_sim: RunSim,
) -> None:
    plain = run_sim(TWO_APPS, "min-stall")
    assert "control" not in plain
    free = run_sim(
        TWO_APPS,
        "min-stall",
        "--ranks-per-node",
        "1",
        "--message-seconds",
        "0",
        "--arrival-jitter",
        "0",
    )
    # Messages that cost nothing but the network's latency leave the schedule as it was.
    assert free["metrics"]["makespan"] == pytest.approx(
        plain["metrics"]["makespan"], rel=1e-3
    )


def test_bad_options_are_refused(simulator: Path, tmp_path: Path) -> None:
    src = tmp_path / "s.json"
    src.write_text(json.dumps(scenario([app("a", [(1.0, GB)])])))
    done = subprocess.run(
        sim_command(
            simulator,
            src,
            "min-stall",
            tmp_path / "o.json",
            "--ranks-per-node",
            "4",
            "--agent-ranks",
            "0",
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "--agent-ranks" in done.stderr
    assert not (tmp_path / "o.json").exists()
