"""Locating and running the `harmonia-sim` binary, one process per policy."""

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import harmonia

# The directory that holds python/ (this package's parent); the C++ build lands in its build/.
REPO_ROOT = Path(harmonia.__file__).resolve().parents[2]
BUILD_TREE = REPO_ROOT / "build"


class SimulatorNotFound(Exception):
    """A Harmonia binary (the simulator, the recovery tool) could not be found."""


def find_tool(name: str, env_var: str, build_path: str) -> Path:
    """A Harmonia binary: $env_var, else the build tree ($HARMONIA_BUILD, or the repository's
    build/), else the PATH, else where the installed build put it (libharmonia.so,
    harmonia-agentd: `harmonia-describe --paths`)."""
    if configured := os.environ.get(env_var):
        path = Path(configured)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SimulatorNotFound(f"{env_var}={configured} is not an executable file")
        return path
    if (tree := os.environ.get("HARMONIA_BUILD")) and (chosen := Path(tree) / build_path).is_file():
        return chosen
    built = BUILD_TREE / build_path
    if built.is_file():
        return built
    if on_path := shutil.which(name):
        return Path(on_path)
    for directory in installed_directories():
        if (installed := directory / name).is_file():
            return installed
    raise SimulatorNotFound(
        f"{name} not found: set {env_var}, build it into {built}"
        " (cmake -B build && cmake --build build), install it (docs/deploy.md), or put it on"
        " the PATH"
    )


@cache
def installed_directories() -> tuple[Path, ...]:
    """Where an installed Harmonia keeps its library and helpers, as the harmonia-describe
    found beside it says (none when there is no such program, or it predates --paths)."""
    describe = os.environ.get("HARMONIA_DESCRIBE") or shutil.which("harmonia-describe")
    if not describe:
        return ()
    try:
        done = subprocess.run(
            [describe, "--paths"], capture_output=True, text=True, timeout=30, check=False
        )
        paths = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ()
    return tuple(Path(paths[key]) for key in ("libdir", "libexecdir", "bindir") if key in paths)


def find_simulator() -> Path:
    """The `harmonia-sim` binary."""
    return find_tool("harmonia-sim", "HARMONIA_SIM", "src/sim/harmonia-sim")


@dataclass(frozen=True)
class RunOutcome:
    """How one simulator process ended."""

    policy: str
    returncode: int
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


# Seconds between two progress reports of a simulation (harmonia-sim --progress).
PROGRESS_SECONDS = 5.0


def run_policy(
    simulator: Path,
    scenario_json: Path,
    policy: str,
    out_json: Path,
    accounting_prefix: Path | None = None,
    on_progress: Callable[[str, str], None] | None = None,
) -> RunOutcome:
    """Run the simulator for one policy and wait for it; with `accounting_prefix`, it also writes
    the jobs' accounting records to <prefix>.json and <prefix>.csv (docs/accounting.md). With
    `on_progress`, each of its progress lines (simulated time, jobs done, rate, time left) is
    passed on as it comes, with the policy's name."""
    command = [
        str(simulator),
        "--scenario",
        str(scenario_json),
        "--policy",
        policy,
        "--out",
        str(out_json),
    ]
    if accounting_prefix is not None:
        command += ["--accounting", str(accounting_prefix)]
    if on_progress is not None:
        command += ["--progress", str(PROGRESS_SECONDS)]
    start = time.monotonic()
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
    except OSError as error:  # e.g. not executable: report it like a failed run
        return RunOutcome(policy, 127, f"cannot run {simulator}: {error}", 0.0)
    errors = []
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("progress: ") and on_progress is not None:
            on_progress(policy, line.removeprefix("progress: ").strip())
        else:
            errors.append(line)
    returncode = process.wait()
    return RunOutcome(policy, returncode, "".join(errors), time.monotonic() - start)


def simulate_scenario(
    simulator: Path, scenario: dict[str, Any], policy: str, work: Path
) -> dict[str, Any]:
    """The results of one run of `policy` on the normalized `scenario`, as harmonia-sim writes
    them (docs/formats.md), for scripts that simulate many variants of a scenario: `work`
    holds the scenario and results files, overwritten by the next call. Raises RuntimeError with
    the simulator's error output when the run fails."""
    scenario_json, out_json = work / "scenario.json", work / "results.json"
    scenario_json.write_text(json.dumps(scenario))
    outcome = run_policy(simulator, scenario_json, policy, out_json)
    if not outcome.ok:
        raise RuntimeError(outcome.stderr.strip())
    results: dict[str, Any] = json.loads(out_json.read_text())
    return results


def run_policies(
    simulator: Path,
    scenario_json: Path,
    policies: list[str],
    out_dir: Path,
    jobs: int,
    on_finished: Callable[[RunOutcome], None],
    on_progress: Callable[[str, str], None] | None = None,
) -> list[RunOutcome]:
    """Run every policy with up to `jobs` processes at once, writing `out_dir/<policy>.json` and
    its accounting records, `out_dir/<policy>.accounting.{json,csv}`.

    `on_finished` is called as each run ends, `on_progress` with each progress line of a run.
    After a failure, runs not yet started are skipped: the results would be discarded anyway.
    """
    outcomes: list[RunOutcome] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures: list[Future[RunOutcome]] = [
            pool.submit(
                run_policy,
                simulator,
                scenario_json,
                policy,
                out_dir / f"{policy}.json",
                out_dir / f"{policy}.accounting",
                on_progress,
            )
            for policy in policies
        ]
        for future in as_completed(futures):
            if future.cancelled():
                continue
            outcome = future.result()
            outcomes.append(outcome)
            on_finished(outcome)
            if not outcome.ok:
                for pending in futures:
                    pending.cancel()
    return outcomes
