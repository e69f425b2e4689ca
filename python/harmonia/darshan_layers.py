"""Darshan's I/O layers as the importer reads them: where each keeps its counters, DXT segments
and heatmap. Plain data, so that the command line can list the layers without loading numpy."""

from dataclasses import dataclass
from typing import Literal

Op = Literal["write", "read"]
OPS: tuple[Op, Op] = ("write", "read")


def lack_label(lack: str) -> str:
    """The short form of a `lacks` entry: the words before its first colon."""
    return lack.split(":", 1)[0]


@dataclass(frozen=True)
class Layer:
    """One Darshan I/O layer: where its counters, DXT segments and heatmap live."""

    module: str  # pydarshan module name
    prefix: str  # counter name prefix
    dxt: str | None
    heatmap: str  # key in DarshanReport.heatmaps
    requests: dict[Op, tuple[str, ...]]  # counters whose sum is the number of requests
    histogram: dict[Op, str | None]  # prefix of the request-size counters


LAYERS: dict[str, Layer] = {
    "POSIX": Layer(
        "POSIX",
        "POSIX",
        "DXT_POSIX",
        "POSIX",
        {"write": ("POSIX_WRITES",), "read": ("POSIX_READS",)},
        {"write": "POSIX_SIZE_WRITE_", "read": "POSIX_SIZE_READ_"},
    ),
    "MPI-IO": Layer(
        "MPI-IO",
        "MPIIO",
        "DXT_MPIIO",
        "MPIIO",
        {
            op: tuple(f"MPIIO_{kind}_{op.upper()}S" for kind in ("INDEP", "COLL", "SPLIT", "NB"))
            for op in OPS
        },
        {"write": "MPIIO_SIZE_WRITE_AGG_", "read": "MPIIO_SIZE_READ_AGG_"},
    ),
    "STDIO": Layer(
        "STDIO",
        "STDIO",
        None,
        "STDIO",
        {"write": ("STDIO_WRITES",), "read": ("STDIO_READS",)},
        {"write": None, "read": None},
    ),
}
