"""Device profile curves: aggregate bandwidth, MSCA and I_f against concurrent streams."""

from pathlib import Path

from matplotlib.figure import Figure

from harmonia.profiler import Profile


def plot_profile(profile: Profile, title: str, out: Path) -> None:
    """Three panels (bandwidth, Eq. 1, Eq. 2), one line per operation, written to `out`."""
    figure = Figure(figsize=(13, 4), layout="constrained")
    bandwidth, msca, interference = figure.subplots(1, 3)
    for op in sorted({p.op for p in profile.points}, reverse=True):
        points = [p for p in profile.points if p.op == op]
        streams = [p.streams for p in points]
        bandwidth.plot(streams, [p.bandwidth / 1e6 for p in points], marker="o", label=op)
        msca.plot(*zip(*profile.msca(op), strict=True), marker="o", label=op)
        interference.plot(*zip(*profile.interference(op), strict=True), marker="o", label=op)
    for axes, label in [
        (bandwidth, "aggregate bandwidth (MB/s)"),
        (msca, "MSCA (Eq. 1)"),
        (interference, "I_f (Eq. 2)"),
    ]:
        axes.set_xscale("log", base=2)
        axes.set_xlabel("concurrent streams k")
        axes.set_ylabel(label)
        axes.legend()
    figure.suptitle(title)
    figure.savefig(out, dpi=110)
