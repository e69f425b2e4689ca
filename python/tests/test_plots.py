"""Plots drawn from fake results (no simulator needed)."""

from pathlib import Path

from support import EXAMPLES, assert_png, make_result_dir

from harmonia.plots.scaling import plot_breakdown
from harmonia.plots.timeline import plot_timeline
from harmonia.results import load_results
from harmonia.scenario import load_scenario, normalize


def test_breakdown_across_scenarios(tmp_path: Path) -> None:
    dirs = {
        f"{n} instances": make_result_dir(
            tmp_path / str(n),
            normalize(load_scenario(EXAMPLES / "section-v" / f"balanced-{n}.toml")),
        )
        for n in (2, 4, 8)
    }
    out = tmp_path / "breakdown.png"
    plot_breakdown(dirs, out)
    assert_png(out)


def test_timeline_of_a_run_without_drains(tmp_path: Path) -> None:
    directory = make_result_dir(
        tmp_path / "run", normalize(load_scenario(EXAMPLES / "fig5-example.toml"))
    )
    run = load_results(directory)["fairness"].model_copy(update={"drains": []})
    out = tmp_path / "timeline.png"
    plot_timeline(run, buffer_count=2, out=out)
    assert_png(out)
