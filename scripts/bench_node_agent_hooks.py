"""What the node-agent hooks under Slurm cost a task (docs/node-agent.md, "Under Slurm"): the
TaskProlog that starts a step's agent, one that joins a running agent, the TaskEpilog that stops
it, and the TaskProlog of a job that asks for none. Runs harmonia-node-agent.sh as slurmstepd
would (root for the Prolog and Epilog, USER for the task hooks), without Slurm; each time
includes starting `runuser`, as slurmstepd's own fork and setuid would not.

    sudo .venv/bin/python scripts/bench_node_agent_hooks.py --steps 10

Prints a Markdown table: the median and the range, in milliseconds, over --steps steps.
"""

import argparse
import os
import pwd
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harmonia.slurm import node_agent_script

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("HARMONIA_BUILD", ROOT / "build"))
AGENTD = BUILD / "src" / "agent" / "harmonia-agentd"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=10, help="job steps to time (default 10)"
    )
    parser.add_argument(
        "--user", default="nobody", help="the job's user (default nobody)"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("run as root: the Prolog and Epilog are root's")
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: expected at least 1")
    if not AGENTD.is_file():
        parser.error(f"{AGENTD}: not built (cmake --build build)")
    uid = pwd.getpwnam(args.user).pw_uid
    root = Path(tempfile.mkdtemp(prefix="harmonia-agent-hooks-bench-"))
    root.chmod(0o755)
    script = root / "harmonia-node-agent.sh"
    script.write_text(node_agent_script(str(AGENTD), root / "agents"))
    script.chmod(0o755)
    job = {"SLURM_JOB_ID": "1", "SLURMD_NODENAME": "n0", "PATH": os.environ["PATH"]}

    def hook(context: str, as_user: bool = True, **env: str) -> float:
        variables = {**job, "SLURM_SCRIPT_CONTEXT": context, "SLURM_JOB_UID": str(uid),
                     "HARMONIA_NODE_AGENT": "1", "HARMONIA_SCHEDD": "/nonexistent.sock", **env}  # fmt: skip
        command = ["env", *[f"{k}={v}" for k, v in variables.items()], str(script)]
        if as_user:
            command = ["runuser", "-u", args.user, "--", *command]
        started = time.monotonic()
        done = subprocess.run(
            command, check=True, capture_output=True, text=True, timeout=60
        )
        took = (time.monotonic() - started) * 1000
        # A hook that fell back would be timed doing nothing: only exports count.
        asked = context == "prolog_task" and env.get("HARMONIA_NODE_AGENT") != "0"
        if asked and not done.stdout.startswith("export HARMONIA_AGENT="):
            raise SystemExit(
                f"the TaskProlog did not give an agent: {done.stdout.strip()}"
            )
        return took

    times: dict[str, list[float]] = {
        "starts": [],
        "joins": [],
        "stops": [],
        "not asked": [],
    }
    try:
        hook("prolog_slurmd", as_user=False)
        for step in range(args.steps):
            ids = {"SLURM_STEP_ID": str(step)}
            times["starts"].append(hook("prolog_task", SLURM_PROCID="0", **ids))
            times["joins"].append(hook("prolog_task", SLURM_PROCID="1", **ids))
            hook("epilog_task", SLURM_PROCID="1", **ids)
            times["stops"].append(hook("epilog_task", SLURM_PROCID="0", **ids))
            times["not asked"].append(
                hook("prolog_task", HARMONIA_NODE_AGENT="0", **ids)
            )
    finally:
        hook("epilog_slurmd", as_user=False)
        shutil.rmtree(root, ignore_errors=True)
    what = {
        "starts": "TaskProlog starting the step's agent",
        "joins": "TaskProlog of a second task (the agent runs)",
        "stops": "TaskEpilog of the last task, stopping the agent",
        "not asked": "TaskProlog of a job asking for no agent",
    }
    print(f"| hook ({args.steps} steps) | median ms | range ms |\n| --- | --- | --- |")
    for key, label in what.items():
        xs = times[key]
        print(
            f"| {label} | {statistics.median(xs):.0f} | {min(xs):.0f}-{max(xs):.0f} |"
        )


if __name__ == "__main__":
    main()
