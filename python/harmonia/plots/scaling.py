"""Completion time broken into wait, compute and I/O per policy, across scenarios (paper Fig. 6)."""

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from harmonia.plots import slant_tick_labels
from harmonia.results import METRIC_DISPLAYS, load_results

PARTS = {"avg_wait": "tab:red", "avg_compute": "tab:green", "avg_io": "tab:blue"}


def plot_breakdown(dirs: dict[str, Path], out: Path) -> None:
    """Write stacked bars of avg wait + compute + I/O per policy, one panel per labelled run
    directory (for example {"2 instances": ..., "4 instances": ..., "8 instances": ...}), to `out`.
    """
    figure = Figure(figsize=(1 + 4 * len(dirs), 4.5), layout="constrained")
    panels = figure.subplots(1, len(dirs), sharey=True, squeeze=False)[0]
    for axes, (label, directory) in zip(panels, dirs.items(), strict=True):
        runs = load_results(directory)
        policies = list(runs)
        bottom = np.zeros(len(policies))
        for key, color in PARTS.items():
            display = METRIC_DISPLAYS[key]
            heights = np.array([display.value(runs[policy]) for policy in policies])
            axes.bar(policies, heights, bottom=bottom, color=color, label=display.label)
            bottom += heights
        axes.set_title(label)
        slant_tick_labels(axes)
    panels[0].set_ylabel("time (s)")
    panels[-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.suptitle("Average completion time: wait, compute and I/O")
    figure.savefig(out, dpi=110)
