"""Gantt chart of one run: which application's I/O ran on which buffer when, and the drains."""

from collections import defaultdict
from pathlib import Path

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from harmonia.results import PhaseRecord, RunResult

# Vertical layout of a buffer's row (1 unit tall, centred on the buffer index): I/O lanes on top,
# a thin band for drains below, so a drain running under I/O stays visible.
_IO_TOP, _IO_HEIGHT = -0.42, 0.6
_DRAIN_TOP, _DRAIN_HEIGHT = 0.22, 0.2
_MAX_LEGEND_APPS = 16


def _lanes(phases: list[PhaseRecord], app_order: dict[str, int]) -> tuple[list[int], int]:
    """Assign overlapping phases on one buffer to separate lanes, so co-location is visible.

    Returns each phase's lane (in the order given) and the number of lanes. Phases granted
    together take lanes in application order, so the same app tends to keep the same lane.
    """
    lane_free_at: list[float] = []
    lanes = [0] * len(phases)
    for position in sorted(
        range(len(phases)), key=lambda i: (phases[i].granted, app_order[phases[i].app])
    ):
        phase = phases[position]
        lane = next((k for k, free in enumerate(lane_free_at) if free <= phase.granted), None)
        if lane is None:
            lane = len(lane_free_at)
            lane_free_at.append(phase.end)
        else:
            lane_free_at[lane] = phase.end
        lanes[position] = lane
    return lanes, len(lane_free_at)


def plot_timeline(run: RunResult, buffer_count: int, out: Path) -> None:
    """Write the timeline of `run` on buffers 0..buffer_count-1 to `out` (PNG)."""
    apps = [app.name for app in run.apps]
    app_order = {app: index for index, app in enumerate(apps)}
    palette = colormaps["tab20"]
    app_color = {app: palette(index % 20) for index, app in enumerate(apps)}

    figure = Figure(figsize=(12, 1.5 + 0.7 * buffer_count), layout="constrained")
    axes = figure.subplots()
    on_buffer: dict[int, list[PhaseRecord]] = defaultdict(list)
    for phase in run.phases:
        for buffer in phase.buffers:
            on_buffer[buffer].append(phase)
    for buffer, phases in on_buffer.items():
        lanes, lane_count = _lanes(phases, app_order)
        height = _IO_HEIGHT / lane_count
        for phase, lane in zip(phases, lanes, strict=True):
            axes.broken_barh(
                [(phase.granted, phase.end - phase.granted)],
                (buffer + _IO_TOP + lane * height, height),
                facecolors=app_color[phase.app],
                edgecolor="white",
                linewidth=0.3,
            )
    for drain in run.drains:
        axes.broken_barh(
            [(drain.start, drain.end - drain.start)],
            (drain.buffer + _DRAIN_TOP, _DRAIN_HEIGHT),
            facecolors="lightgrey",
            edgecolor="dimgrey",
            hatch="////",
            linewidth=0.3,
        )

    axes.set_yticks(range(buffer_count), [f"buffer {b}" for b in range(buffer_count)])
    axes.set_ylim(buffer_count - 0.5, -0.5)
    axes.set_xlabel("time (s)")
    axes.set_title(f"{run.scenario}: {run.policy}")
    handles = [Patch(facecolor="lightgrey", edgecolor="dimgrey", hatch="////", label="drain")]
    if len(apps) <= _MAX_LEGEND_APPS:
        handles = [Patch(color=app_color[app], label=app) for app in apps] + handles
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    figure.savefig(out, dpi=110)
