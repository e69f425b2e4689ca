"""One figure comparing the policies of a run on the paper's scheduling metrics (Fig. 7, Fig. 8)."""

from pathlib import Path

from matplotlib.figure import Figure

from harmonia.plots import policy_color, slant_tick_labels
from harmonia.results import METRIC_DISPLAYS, RunResult

PANELS = (
    "avg_completion",
    "avg_wait",
    "buffer_efficiency",
    "avg_phase_bandwidth",
    "fairness",
    "avg_stall",
)


def plot_metrics(results: dict[str, RunResult], out: Path) -> None:
    """Write a grid of bar charts, one per metric, one bar per policy, to `out` (PNG)."""
    policies = list(results)
    figure = Figure(figsize=(13, 7.5), layout="constrained")
    for axes, key in zip(figure.subplots(2, 3).flat, PANELS, strict=True):
        display = METRIC_DISPLAYS[key]
        axes.bar(
            policies,
            [display.value(results[policy]) for policy in policies],
            color=[policy_color(policy) for policy in policies],
        )
        axes.set_title(display.label)
        axes.set_ylabel(display.unit)
        slant_tick_labels(axes)
    scenario = next(iter(results.values())).scenario
    figure.suptitle(f"{scenario}: scheduling metrics by policy")
    figure.savefig(out, dpi=110)
