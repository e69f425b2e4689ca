#!/usr/bin/env python3
"""Speed of one harmonia-bbd against baselines measured in the same run (docs/benchmarks.md).

Every round: the client's ingest of SIZE MiB of random bytes over loopback (harmonia-bbctl put,
4 MiB writes, one in flight) against a plain loopback TCP copy of the same bytes and against
writing them into the node's device directory; then the node's drain to the PFS directory
(harmonia-bbctl drain: the node's writes and its fsync) against fio's sequential write of as
many bytes there (4 MiB writes, end_fsync, no preallocation), in alternating order after a
discarded warm-up run. Medians over
the rounds, and the median of each round's ratio: this VM's disk varies by 2-4x from one second
to the next, so only ratios taken side by side mean something.

The node's device is in RAM (/dev/shm) when there is room, standing in for a node-local NVMe
apart from the PFS, as on a cluster; the PFS directory is in $TMPDIR (default /tmp).

    python3 scripts/bench_bbd.py [--mib 512] [--rounds 5]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harmonia.buffers import device_directory
from harmonia.profiler import loopback_bandwidth

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("HARMONIA_BUILD", ROOT / "build"))
CHUNK = 4 << 20


def device_write(data: bytes, path: Path) -> float:
    """GB/s of writing the bytes into the device directory, 4 MiB writes, no sync (what the node
    does before it acknowledges)."""
    view = memoryview(data)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for at in range(0, len(data), CHUNK):
        os.write(fd, view[at : at + CHUNK])
    os.close(fd)
    seconds = time.perf_counter() - start
    path.unlink()
    return len(data) / seconds / 1e9


def fio_write(directory: Path, mib: int) -> float:
    """GB/s of fio's sequential write of MIB MiB into a new file, 4 MiB writes, end_fsync."""
    done = subprocess.run(
        ["fio", "--name=raw", f"--directory={directory}", "--filename=fio.dat", "--rw=write",
         "--bs=4M", f"--size={mib}M", "--ioengine=psync", "--end_fsync=1", "--fallocate=none",
         "--output-format=json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (directory / "fio.dat").unlink()
    return float(json.loads(done.stdout)["jobs"][0]["write"]["bw_bytes"]) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=512, help="MiB per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("fio") is None:
        raise SystemExit("bench_bbd.py: fio not found (Debian: fio)")
    size = args.mib << 20
    work = Path(tempfile.mkdtemp(prefix="harmonia-bench-bbd-"))
    device, in_ram = device_directory(3 * size, fallback=work)
    pfs = work / "pfs"
    pfs.mkdir()
    data_file = work / "data"
    data_file.write_bytes(os.urandom(size))
    data = data_file.read_bytes()
    node = subprocess.Popen(
        [str(BUILD / "src/bbd/harmonia-bbd"), "--device", str(device), "--pfs", str(pfs),
         "--capacity", str(2 * size), "--threshold", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    rows: dict[str, list[float]] = {k: [] for k in
                                    ("ingest", "loopback", "device", "ingest_ratio", "drain", "fio",
                                     "drain_ratio")}  # fmt: skip
    try:
        assert node.stdout is not None
        address = "127.0.0.1:" + node.stdout.readline().strip().split("=", 1)[1]
        ctl = str(BUILD / "src/bbd/harmonia-bbctl")
        # A discarded round first: on this VM, memory the guest touches for the first time is
        # 5-10x slower to write, and the node's first ingest would pay for all of it.
        for round_ in range(-1, args.rounds):
            put = subprocess.run(
                [ctl, "--node", address, "put", "data.bin", str(data_file), "--chunk", str(CHUNK)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            ingest = size / float(json.loads(put.stdout)["seconds"]) / 1e9
            loopback = loopback_bandwidth(data, chunk=CHUNK) / 1e9
            on_device = device_write(data, device / "baseline")
            drain = fio = 0.0
            # On this VM the first write burst after a pause runs slow, whoever makes it: one
            # discarded fio run first, then the two measured ones in alternating order.
            fio_write(pfs, args.mib)
            for step in ("fio", "drain") if round_ % 2 == 0 else ("drain", "fio"):
                if step == "fio":
                    fio = fio_write(pfs, args.mib)
                else:
                    start = time.perf_counter()
                    subprocess.run([ctl, "--node", address, "drain"], check=True)
                    drain = size / (time.perf_counter() - start) / 1e9
                    (pfs / "data.bin").unlink()
            if round_ < 0:
                continue
            for key, value in (("ingest", ingest), ("loopback", loopback), ("device", on_device),
                               ("ingest_ratio", ingest / min(loopback, on_device)),
                               ("drain", drain), ("fio", fio),
                               ("drain_ratio", drain / fio)):  # fmt: skip
                rows[key].append(value)
            print(f"round {round_ + 1}/{args.rounds}: ingest {ingest:.2f} GB/s (loopback "
                  f"{loopback:.2f}, device {on_device:.2f}); drain {drain:.2f} GB/s (fio "
                  f"{fio:.2f})", flush=True)  # fmt: skip
    finally:
        node.terminate()
        node.wait()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(device, ignore_errors=True)
    where = "RAM (/dev/shm)" if in_ram else "a directory beside the PFS"
    print(
        f"\nmedians of {args.rounds} rounds of {args.mib} MiB; the node's device in {where}:"
    )
    print("| what | median | min | max |\n| --- | --- | --- | --- |")
    labels = {
        "ingest": "ingest into one node over loopback (GB/s)",
        "loopback": "plain loopback TCP copy (GB/s)",
        "device": "writing the device directory, no sync (GB/s)",
        "ingest_ratio": "ingest / the slower of the two, per round",
        "drain": "drain to the PFS directory, with fsync (GB/s)",
        "fio": "fio sequential write there, end_fsync (GB/s)",
        "drain_ratio": "drain / fio, per round",
    }
    for key, label in labels.items():
        values = rows[key]
        print(f"| {label} | {statistics.median(values):.2f} | {min(values):.2f} "
              f"| {max(values):.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
