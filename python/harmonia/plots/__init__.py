"""PNG plots of simulation results, drawn with matplotlib's Agg canvas (no display needed)."""

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.typing import ColorType

from harmonia.policies import POLICIES


def policy_color(policy: str) -> ColorType:
    """The color a policy has in every plot, so plots can be compared at a glance."""
    index = POLICIES.index(policy) if policy in POLICIES else len(POLICIES)
    color: ColorType = colormaps["tab10"](index % 10)
    return color


def slant_tick_labels(axes: Axes) -> None:
    """Slant the x tick labels so long policy names do not overlap."""
    axes.tick_params(axis="x", labelrotation=30)
    for label in axes.get_xticklabels():
        label.set_horizontalalignment("right")
