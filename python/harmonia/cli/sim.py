"""`harmonia sim FILE.toml`: simulate a scenario under several policies and compare them."""

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail, progress_bar
from harmonia.cli.report import show_report
from harmonia.policies import parse_policies
from harmonia.simulator import RunOutcome, SimulatorNotFound, find_simulator, run_policies


def run_scenario(
    scenario: Path,
    policy_spec: str,
    out: Path | None,
    jobs: int,
    seed: int | None = None,
    max_running_apps: int | None = None,
    quiet: bool = False,
) -> None:
    """Validate, simulate every policy, then write summary.json, the table and the plots.

    `seed` and `max_running_apps` replace the scenario's own (`scenario.seed`,
    `scheduler.max_running_apps`); `quiet` leaves out the table and the per-run plots (runs
    over many seeds).

    Nothing is written unless the scenario and policies are valid and the simulator is found, and
    nothing is left behind when a run fails: the files appear in `out` once all are written.
    """
    from harmonia.results import staged_directory
    from harmonia.scenario import ScenarioError, load_scenario, normalize

    try:
        normalized = normalize(load_scenario(scenario))
    except ScenarioError as error:
        fail(error.lines, EXIT_INVALID)
    if seed is not None:
        normalized["seed"] = seed
    if max_running_apps is not None:
        normalized["scheduler"]["max_running_apps"] = max_running_apps
    try:
        policies = parse_policies(policy_spec)
    except ValueError as error:
        fail([f"--policy: {error}"], EXIT_INVALID)
    try:
        simulator = find_simulator()
    except SimulatorNotFound as error:
        fail([str(error)], EXIT_FAILED)

    out_dir = out if out is not None else Path("results") / normalized["name"]
    if out_dir.exists() and not out_dir.is_dir():
        fail([f"--out {out_dir}: not a directory"], EXIT_INVALID)
    try:
        # Everything is written in a staging directory first: a failed run leaves no output.
        with staged_directory(out_dir) as staging:
            _simulate(normalized, policies, simulator, staging, out_dir, jobs, quiet)
    except OSError as error:
        fail([f"--out {out_dir}: cannot write: {error.strerror or error}"], EXIT_FAILED)


def _simulate(
    normalized: dict[str, Any],
    policies: list[str],
    simulator: Path,
    staging: Path,
    out_dir: Path,
    jobs: int,
    quiet: bool,
) -> None:
    """Run every policy on `normalized` into `staging`, then summarize and plot there."""
    from harmonia.results import ResultsError, load_results, summary, write_json

    scenario_json = staging / "scenario.json"
    write_json(scenario_json, normalized)

    progress = progress_bar(Console(stderr=True), spinner=True)
    with progress:
        task = progress.add_task(f"simulating {normalized['name']}", total=len(policies))

        def finished(outcome: RunOutcome) -> None:
            status = "[green]done[/]" if outcome.ok else f"[red]failed ({outcome.returncode})[/]"
            progress.console.print(f"{outcome.policy}: {status} in {outcome.seconds:.1f} s")
            progress.advance(task)

        outcomes = run_policies(simulator, scenario_json, policies, staging, jobs, finished)

    failures = [outcome for outcome in outcomes if not outcome.ok]
    if failures:
        fail(
            (
                f"harmonia-sim failed for policy {failure.policy} (exit {failure.returncode}):\n"
                f"{failure.stderr.rstrip()}"
                for failure in failures
            ),
            EXIT_FAILED,
        )
    try:
        results = load_results(staging, policies)
        write_json(staging / "summary.json", summary(results))
        if not quiet:
            show_report(staging, results, shown_as=out_dir)
    except ResultsError as error:
        fail([str(error)], EXIT_FAILED)


def sim(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file.")],
    policy: Annotated[
        str,
        typer.Option(
            help='"all" (the paper\'s), "peers", "every" or comma-separated policy names, e.g. '
            '"datawarp,fairness".'
        ),
    ] = "all",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output directory (default: results/<scenario name>).", show_default=False
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Simulator processes run at once.")] = 2,
    seed: Annotated[
        int | None,
        typer.Option(min=0, help="Replaces the scenario's seed.", show_default=False),
    ] = None,
    max_running_apps: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Applications a policy runs at once (0: no limit); replaces the scenario's "
            "scheduler.max_running_apps (default: each policy's, docs/scheduling-model.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Simulate a scenario under each policy, then compare the policies in a table and plots."""
    run_scenario(scenario, policy, out, jobs, seed, max_running_apps)
