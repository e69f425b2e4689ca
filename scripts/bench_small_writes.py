#!/usr/bin/env python3
"""Writes through libharmonia: `dd bs=4k`, a HACC-IO-like file-per-process writer and, where
MPI is installed, IOR-like MPI writers of 4 ranks (file per process, and one shared file through
MPI-IO), without the library, with SSD (log) staging and through four buffer nodes, timed side
by side (docs/benchmarks.md, "Small writes through the buffer nodes").

Every round runs each mode once, in a rotating order; a mode's time covers the whole command,
close included (the bytes are on a node or in the file when it ends), not the nodes' later drain.
The report gives each mode's median seconds and the median of each round's ratio to SSD
staging, the issue's baseline. The buffer nodes' devices are in RAM (/dev/shm) when there is room,
standing in for node-local NVMe; the PFS directory and the SSD stage directory are on $TMPDIR.

    python3 scripts/bench_small_writes.py [--mib 64] [--rounds 5]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harmonia.buffers.cluster import BufferCluster, ClusterSettings, device_directory

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("HARMONIA_BUILD", ROOT / "build"))
LIBRARY = (BUILD / "src/runtime/bbio/libharmonia.so").resolve()
HACC = """
import os, sys
# HACC-IO's POSIX file per process: nine variables of 4-byte or 8-byte elements, each written
# in slices of 256 elements, one after the other.
path, count = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for width in (4, 4, 4, 4, 4, 4, 4, 8, 2):
    block = bytes(range(256)) * (width * 256 // 256)
    for _ in range(count // 256):
        os.write(fd, block)
os.close(fd)
"""


MPI_WRITER = BUILD / "tests/runtime/mpi_writer"
MPIIO_WRITER = BUILD / "tests/runtime/mpiio_writer"
RANKS = 4


def timed(command: list[str], env: dict[str, str]) -> float:
    if (
        command[0] == "mpirun"
    ):  # the ranks get the library's settings as mpirun's options
        exported = [
            part for key, value in env.items() for part in ("-x", f"{key}={value}")
        ]
        command = [command[0], "--allow-run-as-root", "--oversubscribe", "-np", str(RANKS),
                   *exported, *command[1:]]  # fmt: skip
        env = {}
    start = time.perf_counter()
    subprocess.run(command, env={**os.environ, **env}, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="MiB dd writes per run")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="harmonia-small-"))
    devices, in_ram = device_directory(4 * (args.mib << 20) + (256 << 20), work)
    stage = work / "stage"
    stage.mkdir()
    plain_dir = work / "plain"
    plain_dir.mkdir()
    settings = ClusterSettings(work / "cluster", buffers=4, capacity=1 << 30,
                               flush_threshold=0.0, device_root=devices)  # fmt: skip
    elements = args.mib << 20 >> 5  # HACC-IO: 34 bytes an element, about MIB MiB in all
    workloads = {
        "dd bs=4k": lambda d: ["dd", "if=/dev/zero", f"of={d}/dd.out", "bs=4k",
                               f"count={args.mib * 256}", "status=none"],
        "HACC-IO file per process": lambda d: [sys.executable, "-c", HACC, f"{d}/hacc.out",
                                               str(elements)],
    }  # fmt: skip
    if shutil.which("mpirun") and MPI_WRITER.is_file() and MPIIO_WRITER.is_file():
        per_rank = (args.mib << 20) // RANKS
        # IOR -F -t 256k: each rank its own file, 256 KiB transfers; IOR -a MPIIO -c (shared,
        # collective, 1 MiB blocks interleaved by rank), then synced and read back whole.
        workloads["IOR-like, file per process"] = lambda d: [
            "mpirun",
            str(MPI_WRITER),
            str(d),
            "seek",
            str(per_rank >> 18),
            str(1 << 18),
        ]
        workloads["IOR-like, shared file, MPI-IO, read back"] = lambda d: [
            "mpirun",
            str(MPIIO_WRITER),
            f"{d}/shared.out",
            str(per_rank >> 20),
            str(1 << 20),
        ]
    else:
        print(
            "IOR-like workloads left out: mpirun or build/tests/runtime/mpi*_writer missing"
        )
    try:
        with BufferCluster(settings) as cluster:
            modes = {
                "plain": (plain_dir, {}),
                "SSD staging": (plain_dir, {"LD_PRELOAD": str(LIBRARY),
                                            "HARMONIA_STAGE_DIR": str(stage)}),
                "buffer nodes": (cluster.pfs, {**cluster.env(), "HARMONIA_JOB": "small"}),
            }  # fmt: skip
            print(f"{args.mib} MiB per run, {args.rounds} rounds, node devices "
                  f"{'in RAM' if in_ram else 'on disk'}")  # fmt: skip
            for name, workload in workloads.items():
                times: dict[str, list[float]] = {m: [] for m in modes}
                ratios: list[float] = []
                for r in range(args.rounds + 1):  # round 0 warms up and is dropped
                    order = list(modes)[r % 3 :] + list(modes)[: r % 3]
                    this = {m: timed(workload(modes[m][0]), modes[m][1]) for m in order}
                    cluster.wait_drained()
                    if r == 0:
                        continue
                    for m, seconds in this.items():
                        times[m].append(seconds)
                    ratios.append(this["buffer nodes"] / this["SSD staging"])
                    print(f"  {name} round {r}: " + ", ".join(
                        f"{m} {s:.3f} s" for m, s in this.items()), flush=True)  # fmt: skip
                print(f"{name}: " + ", ".join(
                    f"{m} {statistics.median(t):.3f} s" for m, t in times.items()) +
                    f"; buffer nodes / SSD staging: median {statistics.median(ratios):.2f} "
                    f"(rounds {min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(devices, ignore_errors=True)


if __name__ == "__main__":
    main()
