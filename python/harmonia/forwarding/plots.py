"""Plots of forwarding-layer runs: bandwidth per scheduler, and requests at the data servers."""

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure


def plot_bandwidth(rows: list[dict[str, Any]], title: str, out: Path) -> None:
    figure = Figure(figsize=(8, 4.2), layout="constrained")
    axes = figure.subplots()
    apps = list(rows[0]["apps"])
    width = 0.8 / len(apps)
    for k, app in enumerate(apps):
        axes.bar(
            [i + k * width for i in range(len(rows))],
            [r["apps"][app]["bandwidth"] / 1e6 for r in rows],
            width,
            label=app,
        )
    axes.set_xticks([i + width * (len(apps) - 1) / 2 for i in range(len(rows))],
                    [r["scheduler"] for r in rows])  # fmt: skip
    axes.set_xlabel('scheduler at the forwarding nodes ("none": clients access the servers)')
    axes.set_ylabel("bandwidth (MB/s)")
    axes.legend()
    figure.suptitle(title)
    figure.savefig(out, dpi=110)


def plot_concurrency(
    results: dict[str, dict[str, Any]], schedulers: list[str], title: str, out: Path
) -> None:
    """Requests in service at server 0 over time, one panel per scheduler."""
    figure = Figure(figsize=(8, 1.6 * len(schedulers) + 0.8), layout="constrained")
    panels = figure.subplots(len(schedulers), 1, sharex=True, squeeze=False)[:, 0]
    for axes, scheduler in zip(panels, schedulers, strict=True):
        points = results[scheduler]["servers"][0]["timeline"]
        axes.step([p[0] for p in points], [p[1] for p in points], where="post")
        axes.set_ylabel(scheduler)
    panels[-1].set_xlabel("time (s); y: requests in service at data server 0")
    figure.suptitle(title)
    figure.savefig(out, dpi=110)
