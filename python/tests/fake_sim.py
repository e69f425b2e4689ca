"""A stand-in for `harmonia-sim` that follows its command-line and file contract
(docs/formats.md sections 2 and 3) and writes plausible, made-up results.

Run as `fake_sim.py --scenario FILE --policy NAME --out FILE [--accounting PREFIX] [--progress S]`
(one progress line when asked); a policy
named in the
FAKE_SIM_FAIL environment variable fails with a message on stderr. Tests also call
`fake_result` directly to build result directories by hand.
"""

import argparse
import json
import os
import sys
from typing import Any


def fake_result(scenario: dict[str, Any], policy: str) -> dict[str, Any]:
    """A result for `policy` where apps run one after another, phase k on buffer k mod count."""
    buffer_count = scenario["buffers"]["count"]
    # Vary the numbers by policy so bars differ.
    slowdown = 1.0 + len(policy) / 10
    clock = 0.0
    apps, phases, drains = [], [], []
    for app in scenario["apps"]:
        start = clock
        for index, phase in enumerate(app["phases"]):
            granted = clock + phase["compute"]
            end = granted + slowdown * phase["size"] / 1e9
            buffer = index % buffer_count
            phases.append(
                {
                    "app": app["name"],
                    "index": index,
                    "requested": granted,
                    "granted": granted,
                    "end": end,
                    "buffers": [buffer],
                    "size": phase["size"],
                    "wait": 0.0,
                    "io": end - granted,
                    "io_alone": (end - granted) / slowdown,
                }
            )
            drains.append(
                {"buffer": buffer, "start": end, "end": end + 5.0, "bytes": phase["size"]}
            )
            clock = end
        apps.append(
            {
                "name": app["name"],
                "arrival": app["arrival"],
                "start": start,
                "end": clock,
                "completion": clock - app["arrival"],
            }
        )
    completions = [app["completion"] for app in apps]
    metrics = {
        "buffer_efficiency": 0.5 / slowdown,
        "buffer_utilization": 0.6,
        "remaining_capacity": 0.4,
        "avg_phase_bandwidth": 1e9 / slowdown,
        "fairness": max(completions) - min(completions),
        "avg_stall": 10.0 * slowdown,
        "avg_completion": sum(completions) / len(completions),
        "min_completion": min(completions),
        "max_completion": max(completions),
        "avg_wait": 5.0 * slowdown,
        "avg_io": 20.0 * slowdown,
        "avg_compute": 30.0,
        "makespan": clock,
        "avg_app_bandwidth": 1e9 / slowdown,
        "avg_interference_factor": slowdown,
    }
    return {
        "scenario": scenario["name"],
        "policy": policy,
        "seed": scenario["seed"],
        "version": "0.1.0",
        "metrics": metrics,
        "apps": apps,
        "phases": phases,
        "drains": drains,
        "sim": {"events": len(phases)},
    }


def fake_accounting(result: dict[str, Any], scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """Accounting records (docs/accounting.md) of `result`: every job normal, 1 unit a node-hour."""
    records = []
    for index, (app, spec) in enumerate(zip(result["apps"], scenario["apps"], strict=True)):
        elapsed = app["end"] - app["start"]
        node_hours = spec["nodes"] * elapsed / 3600
        records.append(
            {
                "JobID": str(index + 1), "JobName": app["name"], "User": app["name"],
                "Account": app["name"], "QOS": spec.get("io_qos", "normal"),
                "Submit": app["arrival"], "Start": app["start"], "End": app["end"],
                "Elapsed": "00:00:00", "ElapsedRaw": elapsed, "State": "COMPLETED",
                "NNodes": spec["nodes"], "NCPUS": spec["ranks"],
                "WriteBytes": sum(p["size"] for p in spec["phases"]), "ReadBytes": 0,
                "IOTime": 0.0, "StallTime": 0.0, "IOSlowdown": 1.0, "PromisedSlowdown": 1.0,
                "BilledNodeHours": node_hours, "Refunded": 0.0, "UsageFactor": 1.0,
                "Charge": node_hours, "BoundBroken": False,
            }
        )  # fmt: skip
    return records


def main() -> int:
    parser = argparse.ArgumentParser()
    for option in ("--scenario", "--policy", "--out"):
        parser.add_argument(option, required=True)
    parser.add_argument("--accounting")
    parser.add_argument("--progress", type=float)
    args = parser.parse_args()
    if args.policy == os.environ.get("FAKE_SIM_FAIL"):
        print(f"fake-sim: policy {args.policy} crashed on purpose", file=sys.stderr)
        return 3
    with open(args.scenario, encoding="utf-8") as scenario_file:
        scenario = json.load(scenario_file)
    result = fake_result(scenario, args.policy)
    if args.progress:
        jobs = len(scenario["apps"])
        print(
            f"progress: simulated 0 s (0.0 d), jobs {jobs}/{jobs}, 1.0 jobs/s, wall 0.0 s,"
            " left 0 s",
            file=sys.stderr,
        )
    with open(args.out, "w", encoding="utf-8") as out_file:
        json.dump(result, out_file)
    if args.accounting:
        records = fake_accounting(result, scenario)
        with open(f"{args.accounting}.json", "w", encoding="utf-8") as json_file:
            json.dump(records, json_file)
        with open(f"{args.accounting}.csv", "w", encoding="utf-8") as csv_file:
            csv_file.write(",".join(records[0]) + "\n")
            for record in records:
                csv_file.write(",".join(str(value) for value in record.values()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
