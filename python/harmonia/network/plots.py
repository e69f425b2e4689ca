"""Plots of network-interference runs in the style of Brown et al., ICPP 2018 (Fig. 2-11): a box
per run (quartile bar, median line, mean dot, whisker to the maximum), black for the baseline and
colored for the interference run; slowdown bars; and the per-link load map of the fabric."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.typing import ColorType

TRAFFIC_LABEL = {"mpi": "MPI messages", "io": "I/O requests"}
TRAFFIC_COLOR = {"mpi": "tab:red", "io": "tab:blue"}
BASELINE_COLOR = "black"


def latency_unit(values: Sequence[float]) -> tuple[str, float]:
    """A readable unit for latencies in seconds: (name, factor to multiply by)."""
    top = max([v for v in values if v > 0], default=1.0)
    for name, factor in (("s", 1.0), ("ms", 1e3), ("us", 1e6)):
        if top * factor >= 1:
            return name, factor
    return "ns", 1e9


def draw_box(
    axes: Axes,
    x: float,
    latency: dict[str, float],
    factor: float,
    color: ColorType,
    width: float = 0.6,
    whisker: str | None = "max",
) -> None:
    """One box of the paper's Fig. 2 from a latency summary (no whiskers if `whisker` is None,
    as in its Fig. 3 and 5)."""
    q1, median, q3 = (latency[k] * factor for k in ("q1", "median", "q3"))
    if whisker is not None:
        axes.vlines(x, q3, latency[whisker] * factor, color=color, linewidth=1)
        axes.vlines(x, latency["min"] * factor, q1, color=color, linewidth=1)
    axes.bar(x, max(q3 - q1, 0.0), width, bottom=q1, color=color, alpha=0.55, edgecolor=color)
    axes.hlines(median, x - width / 2, x + width / 2, color=color, linewidth=2)
    axes.plot([x], [latency["mean"] * factor], "o", color=color, markeredgecolor="white")


def plot_latency_boxes(summary: dict[str, Any], title: str, out: Path) -> None:
    """Baseline (black) and interference (colored) boxes for each measured traffic type."""
    traffics = [t for t in ("mpi", "io") if t in summary]
    figure = Figure(figsize=(4.5 * len(traffics), 4.5), layout="constrained")
    panels = np.atleast_1d(figure.subplots(1, len(traffics)))
    for axes, traffic in zip(panels, traffics, strict=True):
        entry = summary[traffic]
        runs = [r for r in ("baseline", "interference") if r in entry]
        unit, factor = latency_unit([entry[r]["latency"]["max"] for r in runs])
        for x, run in enumerate(runs):
            color = BASELINE_COLOR if run == "baseline" else TRAFFIC_COLOR[traffic]
            draw_box(axes, x, entry[run]["latency"], factor, color)
        axes.set_xticks(range(len(runs)), runs)
        axes.set_xlim(-0.7, len(runs) - 0.3)
        axes.set_ylabel(f"latency per transfer ({unit})")
        axes.set_yscale("log")
        slowdown = entry.get("slowdown", {}).get("mean")
        extra = f", mean slowdown {slowdown:.2f}x" if slowdown else ""
        axes.set_title(f"{TRAFFIC_LABEL[traffic]}{extra}", fontsize=10)
        axes.grid(axis="y", alpha=0.3)
    figure.suptitle(f"{title}: box q1-q3, line median, dot mean, whiskers min-max")
    figure.savefig(out, dpi=110)


def plot_slowdown_bars(summary: dict[str, Any], title: str, out: Path) -> None:
    """Slowdown of mean, median, 75th percentile and max latency under interference."""
    keys = ["mean", "median", "q3", "max", "completion"]
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.subplots()
    traffics = [t for t in ("mpi", "io") if "slowdown" in summary.get(t, {})]
    width = 0.8 / max(len(traffics), 1)
    for k, traffic in enumerate(traffics):
        slowdown = summary[traffic]["slowdown"]
        values = [slowdown.get(key, np.nan) for key in keys]
        axes.bar(
            np.arange(len(keys)) + k * width,
            values,
            width,
            label=TRAFFIC_LABEL[traffic],
            color=TRAFFIC_COLOR[traffic],
        )
    axes.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    axes.set_xticks(np.arange(len(keys)) + width * (len(traffics) - 1) / 2, keys)
    axes.set_ylabel("interference / baseline")
    axes.legend()
    figure.suptitle(f"{title}: slowdown under interference")
    figure.savefig(out, dpi=110)


def _level_matrix(level: dict[str, Any], direction: str, leaf_size: int) -> np.ndarray:
    total = np.asarray(level[direction]["mpi"], dtype=float) + np.asarray(
        level[direction]["io"], dtype=float
    )
    if level["level"] == 0:  # one cable per node: show nodes as leaves x ports
        total = total.reshape(-1, leaf_size)
    matrix: np.ndarray = total
    return matrix


def _io_share(level: dict[str, Any], direction: str, leaf_size: int) -> np.ndarray:
    io = np.asarray(level[direction]["io"], dtype=float)
    total = io + np.asarray(level[direction]["mpi"], dtype=float)
    share = np.divide(io, total, out=np.full_like(io, np.nan), where=total > 0)
    if level["level"] == 0:
        share = share.reshape(-1, leaf_size)
    matrix: np.ndarray = share
    return matrix


def plot_link_loads(result: dict[str, Any], title: str, out: Path) -> None:
    """Per-link load map: bytes on every up and down link of every level (log colors), and the
    share of those bytes that is I/O traffic."""
    levels = result["link_load"]["levels"]
    leaf_size = int(result["fabric"]["down"][0])
    figure = Figure(figsize=(4.2 * len(levels), 4 * 3.2), layout="constrained")
    grid = figure.subplots(4, len(levels), squeeze=False)
    peak = max(
        float(_level_matrix(level, d, leaf_size).max()) for level in levels for d in ("up", "down")
    )
    norm = LogNorm(vmin=max(peak * 1e-4, 1.0), vmax=max(peak, 2.0))
    rows = [("up", False), ("down", False), ("up", True), ("down", True)]
    for column, level in enumerate(levels):
        for row, (direction, share) in enumerate(rows):
            axes = grid[row][column]
            if share:
                image = axes.imshow(
                    _io_share(level, direction, leaf_size),
                    aspect="auto",
                    cmap="coolwarm",
                    vmin=0,
                    vmax=1,
                    interpolation="nearest",
                )
                if column == len(levels) - 1:
                    figure.colorbar(image, ax=axes, label="I/O share of bytes")
            else:
                matrix = _level_matrix(level, direction, leaf_size)
                image = axes.imshow(
                    np.where(matrix > 0, matrix, np.nan),
                    aspect="auto",
                    cmap="viridis",
                    norm=norm,
                    interpolation="nearest",
                )
                if column == len(levels) - 1:
                    figure.colorbar(image, ax=axes, label="bytes")
            lower = "leaf x port" if level["level"] == 0 else level["lower"]
            arrow = "->" if direction == "up" else "<-"
            what = "I/O share" if share else "load"
            axes.set_title(f"{lower} {arrow} {level['upper']} ({what})", fontsize=9)
            axes.set_xlabel("port" if level["level"] == 0 else "up-port")
            axes.set_ylabel("leaf" if level["level"] == 0 else level["lower"])
    figure.suptitle(f"{title}: bytes per directed link")
    figure.savefig(out, dpi=90)
