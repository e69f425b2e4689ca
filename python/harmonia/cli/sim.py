"""`harmonia sim FILE.toml`: simulate a scenario under several policies and compare them."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from harmonia.cli import EXIT_FAILED, EXIT_INVALID, fail, progress_bar

if TYPE_CHECKING:
    from harmonia.scenario import Scenario
from harmonia.cli.report import show_report
from harmonia.policies import parse_policies
from harmonia.simulator import RunOutcome, SimulatorNotFound, find_simulator, run_policies


def run_scenario(
    scenario: Path | None,
    policy_spec: str,
    out: Path | None,
    jobs: int,
    seed: int | None = None,
    max_running_apps: int | None = None,
    quiet: bool = False,
    trace: dict[str, Any] | None = None,
) -> None:
    """Validate, simulate every policy, then write summary.json, the table and the plots.

    `seed` and `max_running_apps` replace the scenario's own (`scenario.seed`,
    `scheduler.max_running_apps`); `quiet` leaves out the table and the per-run plots (runs
    over many seeds). `trace` (the keys of a [trace] table) replaces the scenario's jobs by a
    trace's; with no scenario, the machine is sized from the trace.

    Nothing is written unless the scenario and policies are valid and the simulator is found, and
    nothing is left behind when a run fails: the files appear in `out` once all are written.
    """
    from harmonia.results import staged_directory
    from harmonia.scenario import ScenarioError, load_scenario, normalize

    try:
        loaded = (
            load_scenario(scenario, seed)
            if trace is None and scenario is not None
            else _with_trace(scenario, trace or {}, seed)
        )
        normalized = normalize(loaded)
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


def _with_trace(scenario: Path | None, trace: dict[str, Any], seed: int | None) -> "Scenario":
    """The scenario file (or none) with the given [trace] keys, validated."""
    import tomllib

    from harmonia.scenario import ScenarioError, expand_trace, scenario_from_document

    document: dict[str, Any] = {}
    source = Path(trace.get("file", "trace"))
    if scenario is not None:
        try:
            document = tomllib.loads(scenario.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ScenarioError([f"{scenario}: cannot read: {error}"]) from error
        document.pop("apps", None)
        source = scenario
    else:
        stem = Path(trace["file"]).name.split(".swf")[0]
        document["scenario"] = {"name": stem}
    document["trace"] = {**document.get("trace", {}), **trace}
    if scenario is None:
        # Options name files from where the command runs, not from a scenario's folder.
        document["trace"]["file"] = str(Path(trace["file"]).resolve())
    return scenario_from_document(expand_trace(document, source, seed), source)


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

        def running(policy: str, line: str) -> None:
            progress.console.print(f"{policy}: {line}", markup=False, highlight=False)

        outcomes = run_policies(
            simulator, scenario_json, policies, staging, jobs, finished, running
        )

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


# The options that go with --trace, here and in `harmonia reproduce bakeoff` (trace_options).
TraceJobs = Annotated[
    int | None,
    typer.Option(min=1, help="--trace: the first N jobs of the window.", show_default=False),
]
TraceWindow = Annotated[
    str | None,
    typer.Option(
        help='--trace: the time window "START:END" from the first job, e.g. "0 d:30 d" '
        "(either side may be empty).",
        show_default=False,
    ),
]
TraceRequests = Annotated[
    str | None,
    typer.Option(
        help='--trace: the burst-buffer request model, "phases" (default) or '
        '"kopanski-rzadca" (their requests, on their machine).',
        show_default=False,
    ),
]


def sim(
    scenario: Annotated[
        Path | None,
        typer.Argument(help="Scenario TOML file (optional with --trace).", show_default=False),
    ] = None,
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
    trace_file: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Replay this SWF trace (plain or .gz) on a machine the jobs share, sized from "
            "it unless the scenario gives one (docs/workloads.md).",
            show_default=False,
        ),
    ] = None,
    trace_jobs: TraceJobs = None,
    trace_window: TraceWindow = None,
    requests: TraceRequests = None,
) -> None:
    """Simulate a scenario under each policy, then compare the policies in a table and plots."""
    trace = trace_options(trace_file, trace_jobs, trace_window, requests)
    if scenario is None and trace is None:
        fail(["SCENARIO: give a scenario file, --trace, or both"], EXIT_INVALID)
    run_scenario(scenario, policy, out, jobs, seed, max_running_apps, trace=trace)


def trace_options(
    trace_file: Path | None, jobs: int | None, window: str | None, requests: str | None
) -> dict[str, Any] | None:
    """The [trace] keys the trace options give; None without --trace. A bad window or an option
    without --trace fails naming it."""
    if trace_file is None:
        options = (("--trace-jobs", jobs), ("--trace-window", window), ("--requests", requests))
        given = [name for name, value in options if value is not None]
        if given:
            fail([f"{', '.join(given)}: only with --trace"], EXIT_INVALID)
        return None
    trace: dict[str, Any] = {"file": str(trace_file)}
    if jobs is not None:
        trace["jobs"] = jobs
    if requests is not None:
        trace["requests"] = requests
    if window is not None:
        start, colon, end = window.partition(":")
        if not colon:
            fail([f'--trace-window {window}: expected "START:END"'], EXIT_INVALID)
        if start.strip():
            trace["start"] = start.strip()
        if end.strip():
            trace["end"] = end.strip()
    return trace
