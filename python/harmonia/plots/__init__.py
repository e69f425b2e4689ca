"""PNG plots of simulation results, drawn with matplotlib's Agg canvas (no display needed)."""

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.typing import ColorType

from harmonia.policies import EVERY_POLICY


def policy_color(policy: str) -> ColorType:
    """The color a policy has in every plot, so plots can be compared at a glance."""
    index = EVERY_POLICY.index(policy) if policy in EVERY_POLICY else len(EVERY_POLICY)
    # tab10 has ten colors; the policies past the tenth take Dark2's.
    color: ColorType = (
        colormaps["tab10"](index) if index < 10 else colormaps["Dark2"]((index - 10) % 8)
    )
    return color


def slant_tick_labels(axes: Axes) -> None:
    """Slant the x tick labels so long policy names do not overlap."""
    axes.tick_params(axis="x", labelrotation=30)
    for label in axes.get_xticklabels():
        label.set_horizontalalignment("right")
