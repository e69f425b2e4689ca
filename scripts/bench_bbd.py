#!/usr/bin/env python3
"""Speed of one harmonia-bbd against baselines measured in the same run (docs/benchmarks.md).

Every round: the client's ingest of SIZE MiB of random bytes over loopback (harmonia-bbctl put,
4 MiB writes, 4 in flight), with the node's CPU time for it, against a plain loopback TCP copy of
the same bytes and against writing them into the node's device directory; then the node's drain
to the PFS directory (harmonia-bbctl drain: the node's writes and its fsync) against fio's
sequential write of as many bytes there (4 MiB writes, end_fsync, no preallocation) and against
the kernel's copy of as many bytes from a file in the device directory (sendfile, fsync), in
alternating order after a discarded warm-up run; then as many bytes into one file by one
connection and by two at once, each its half (many ranks writing one shared file through one
node). Then the latency of 64 KiB writes to one file, alone and while the node drains another.
Medians over the rounds, and the median of each round's ratio: this VM's disk varies by 2-4x from one second to the next, so only ratios taken side by
side mean something.

The node's device is in RAM (/dev/shm) when there is room, standing in for a node-local NVMe
apart from the PFS, as on a cluster; the PFS directory is in $TMPDIR (default /tmp).

With --baseline, a second harmonia-bbd (another build: the one before a change) takes the same
rounds in alternating order, and the table gives this build's figures over the baseline's,
round by round.

    python3 scripts/bench_bbd.py [--mib 512] [--rounds 5] [--baseline OTHER/harmonia-bbd]
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from harmonia.buffers.cluster import device_directory
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


def device_copy(data: bytes, device: Path, pfs: Path) -> float:
    """GB/s of copying the bytes from a file in the device directory (written first, not timed)
    into a new file in the PFS directory with sendfile, then fsync: what a drain must do at
    least, its source in memory that is not in the CPU's caches (fio's 4 MiB buffer is)."""
    source, target = device / "copy-source", pfs / "copy.dat"
    source.write_bytes(data)
    start = time.perf_counter()
    with open(source, "rb") as src, open(target, "wb") as dst:
        done = 0
        while done < len(data):
            done += os.sendfile(dst.fileno(), src.fileno(), done, len(data) - done)
        os.fsync(dst.fileno())
    seconds = time.perf_counter() - start
    source.unlink()
    target.unlink()
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


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def write_frame(seq: int, name: str, offset: int, size: int) -> bytes:
    """The frame of a write of `size` bytes at `offset` of `name` (bb.proto: Request{seq 1,
    write 2 {file 1, offset 2, payload 5}}); its bytes follow it."""
    write = (_field(1, name.encode()) + _varint(2 << 3) + _varint(offset)
             + _varint(5 << 3) + _varint(size))  # fmt: skip
    body = _varint(1 << 3) + _varint(seq) + _field(2, write)
    return struct.pack(">I", len(body)) + body


def read_reply(sock: socket.socket) -> bytes:
    header = sock.recv(4, socket.MSG_WAITALL)
    return sock.recv(struct.unpack(">I", header)[0], socket.MSG_WAITALL)


def one_file_ingest(ctl: str, address: str, data: bytes, connections: int = 2) -> float:
    """GB/s of `connections` connections writing one file at once (many ranks writing one
    shared file through one node), each its own share of `data` in 4 MiB writes, 4 in flight.
    The node holds nothing before; all of `data` after, or the bench stops."""
    host, port = address.rsplit(":", 1)
    share = len(data) // connections
    # A writer that cannot connect never reaches it: the others give up after a minute.
    start = threading.Barrier(connections + 1, timeout=60)

    def writer(k: int) -> None:
        with socket.create_connection((host, int(port))) as sock:
            view = memoryview(data)
            in_flight = 0
            start.wait()
            for seq, at in enumerate(range(k * share, (k + 1) * share, CHUNK), 1):
                size = min(CHUNK, (k + 1) * share - at)
                sock.sendall(write_frame(seq, "shared.bin", at, size))
                sock.sendall(view[at : at + size])
                in_flight += 1
                while in_flight >= 4 or (in_flight and at + size >= (k + 1) * share):
                    read_reply(sock)
                    in_flight -= 1

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(connections)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    status = subprocess.run([ctl, "--node", address, "status"], capture_output=True, text=True,
                            check=True)  # fmt: skip
    held = int(json.loads(status.stdout)["used"])
    if held != connections * share:
        raise SystemExit(
            f"bench_bbd.py: the node holds {held} bytes of {connections * share}"
        )
    return connections * share / seconds / 1e9


def write_latencies(address: str, name: str, count: int, size: int) -> list[float]:
    """Seconds each of `count` writes of `size` bytes to `name` takes on the node, one at a
    time (bb.proto: Request{seq 1, write 2 {file 1, offset 2, payload 5}}, its bytes after the
    frame)."""
    host, port = address.rsplit(":", 1)
    payload = os.urandom(size)
    out = []
    with socket.create_connection((host, int(port))) as sock:
        for k in range(count):
            start = time.perf_counter()
            sock.sendall(write_frame(k + 1, name, k * size, size) + payload)
            read_reply(sock)
            out.append(time.perf_counter() - start)
    return out


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def latency_during_drain(
    ctl: str, address: str, data_file: Path, pfs: Path
) -> dict[str, float]:
    """p50 and p99 of 64 KiB writes to one file on an idle node and while the node drains
    another file of SIZE bytes (a drain holds only its own file)."""
    idle = write_latencies(address, "idle.bin", 400, 64 << 10)
    subprocess.run([ctl, "--node", address, "put", "held.bin", str(data_file), "--chunk",
                    str(CHUNK)], capture_output=True, check=True)  # fmt: skip
    drain = subprocess.Popen([ctl, "--node", address, "drain", "held.bin"])
    time.sleep(0.05)  # the drain under way
    busy = write_latencies(address, "busy.bin", 400, 64 << 10)
    still_draining = drain.poll() is None
    drain.wait()
    subprocess.run([ctl, "--node", address, "drain"], check=True)
    for name in ("held.bin", "idle.bin", "busy.bin"):
        (pfs / name).unlink(missing_ok=True)
    return {"idle_p50": percentile(idle, 0.5) * 1e6, "idle_p99": percentile(idle, 0.99) * 1e6,
            "busy_p50": percentile(busy, 0.5) * 1e6, "busy_p99": percentile(busy, 0.99) * 1e6,
            "drain_outlasted_writes": float(still_draining)}  # fmt: skip


def start_node(
    binary: Path, device: Path, pfs: Path, size: int
) -> tuple[subprocess.Popen[str], str]:
    node = subprocess.Popen(
        [str(binary), "--device", str(device), "--pfs", str(pfs), "--capacity", str(2 * size),
         "--threshold", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert node.stdout is not None
    return node, "127.0.0.1:" + node.stdout.readline().strip().split("=", 1)[1]


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int) -> None:
    """Waits (at most 2 s) until the node uses no CPU for 50 ms: its drain frees the drained
    segments after it replies, and that must not run into the next step's timing."""
    deadline = time.monotonic() + 2
    used = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = cpu_seconds(pid)
        if now == used:
            return
        used = now


def measure_round(
    ctl: str,
    node: subprocess.Popen[str],
    address: str,
    data: bytes,
    data_file: Path,
    device: Path,
    pfs: Path,
    round_: int,
) -> dict[str, float]:
    """One round on the node at `address`: its ingest beside a loopback copy and a write into the
    device directory, then its drain beside fio (in alternating order)."""
    size = len(data)
    cpu = cpu_seconds(node.pid)
    put = subprocess.run(
        [ctl, "--node", address, "put", "data.bin", str(data_file), "--chunk", str(CHUNK)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    ingest = size / float(json.loads(put.stdout)["seconds"]) / 1e9
    cpu = (cpu_seconds(node.pid) - cpu) / (size / (1 << 30))
    loopback = loopback_bandwidth(data, chunk=CHUNK) / 1e9
    on_device = device_write(data, device / "baseline")
    drain = fio = copy = 0.0
    # On this VM the first write burst after a pause runs slow, whoever makes it: one discarded
    # fio run first, then the three measured ones in alternating order.
    fio_write(pfs, size >> 20)
    steps = ("fio", "copy", "drain")
    for step in steps if round_ % 2 == 0 else reversed(steps):
        if step == "fio":
            fio = fio_write(pfs, size >> 20)
        elif step == "copy":
            copy = device_copy(data, device, pfs)
        else:
            start = time.perf_counter()
            subprocess.run([ctl, "--node", address, "drain"], check=True)
            drain = size / (time.perf_counter() - start) / 1e9
            (pfs / "data.bin").unlink()
            settle(node.pid)
    # The same bytes into one file by one connection and by two at once, in alternating order.
    shared = {}
    for connections in (1, 2) if round_ % 2 == 0 else (2, 1):
        shared[connections] = one_file_ingest(ctl, address, data, connections)
        subprocess.run([ctl, "--node", address, "drain"], check=True)
        (pfs / "shared.bin").unlink()
        settle(node.pid)
    return {"ingest": ingest, "ingest_cpu": cpu, "loopback": loopback, "device": on_device,
            "ingest_ratio": ingest / min(loopback, on_device), "drain": drain, "fio": fio,
            "drain_ratio": drain / fio, "copy": copy, "drain_copy_ratio": drain / copy,
            "one_file_1": shared[1], "one_file_2": shared[2],
            "one_file_ratio": shared[2] / shared[1]}  # fmt: skip


LABELS = {
    "ingest": "ingest into one node over loopback (GB/s)",
    "ingest_cpu": "the node's CPU time per GiB ingested (s)",
    "loopback": "plain loopback TCP copy (GB/s)",
    "device": "writing the device directory, no sync (GB/s)",
    "ingest_ratio": "ingest / the slower of the two, per round",
    "drain": "drain to the PFS directory, with fsync (GB/s)",
    "fio": "fio sequential write there, end_fsync (GB/s)",
    "drain_ratio": "drain / fio, per round",
    "copy": "copy from the device directory there, sendfile and fsync (GB/s)",
    "drain_copy_ratio": "drain / that copy, per round",
    "one_file_1": "one file written by one connection (GB/s)",
    "one_file_2": "one file written by two connections at once, each its half (GB/s)",
    "one_file_ratio": "two connections / one, per round",
    "idle_p50": "write latency p50, node idle (us)",
    "idle_p99": "write latency p99, node idle (us)",
    "busy_p50": "write latency p50, during a drain (us)",
    "busy_p99": "write latency p99, during a drain (us)",
    "p99_ratio": "p99 during a drain / p99 idle, per round",
}


def spread(values: list[float]) -> str:
    digits = 0 if max(values) >= 20 else 2
    return (f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}"
            f"-{max(values):,.{digits}f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=512, help="MiB per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path,
                        help="another harmonia-bbd, measured in the same rounds (before/after)")  # fmt: skip
    args = parser.parse_args()
    if shutil.which("fio") is None:
        raise SystemExit("bench_bbd.py: fio not found (Debian: fio)")
    if args.baseline is not None and not os.access(args.baseline, os.X_OK):
        raise SystemExit(f"bench_bbd.py: --baseline {args.baseline}: not an executable")
    size = args.mib << 20
    work = Path(tempfile.mkdtemp(prefix="harmonia-bench-bbd-"))
    binaries = {"this build": BUILD / "src/bbd/harmonia-bbd"}
    if args.baseline is not None:
        binaries = {"baseline": args.baseline, **binaries}
    devices, nodes = {}, {}
    rows: dict[str, dict[str, list[float]]] = {
        name: {k: [] for k in LABELS} for name in binaries
    }
    try:
        for name, binary in binaries.items():
            device, in_ram = device_directory(3 * size, fallback=work)
            devices[name] = device
            pfs = work / f"pfs-{len(devices)}"
            pfs.mkdir()
            nodes[name] = (*start_node(binary, device, pfs, size), pfs)
        data_file = work / "data"
        data_file.write_bytes(os.urandom(size))
        data = data_file.read_bytes()
        ctl = str(BUILD / "src/bbd/harmonia-bbctl")
        # A discarded round first: on this VM, memory the guest touches for the first time is
        # 5-10x slower to write, and the node's first ingest would pay for all of it. The nodes
        # take turns, in alternating order.
        for round_ in range(-1, args.rounds):
            order = list(binaries) if round_ % 2 == 0 else list(reversed(binaries))
            for name in order:
                node, address, pfs = nodes[name]
                measured = measure_round(
                    ctl, node, address, data, data_file, devices[name], pfs, round_
                )
                if round_ < 0:
                    continue
                for key, value in measured.items():
                    rows[name][key].append(value)
                print(f"round {round_ + 1}/{args.rounds}, {name}: ingest {measured['ingest']:.2f} "
                      f"GB/s (loopback {measured['loopback']:.2f}, device "
                      f"{measured['device']:.2f}); drain {measured['drain']:.2f} GB/s (fio "
                      f"{measured['fio']:.2f}, copy {measured['copy']:.2f})", flush=True)  # fmt: skip
        for round_ in range(args.rounds):
            order = list(binaries) if round_ % 2 == 0 else list(reversed(binaries))
            for name in order:
                _, address, pfs = nodes[name]
                latency = latency_during_drain(ctl, address, data_file, pfs)
                latency["p99_ratio"] = latency["busy_p99"] / latency["idle_p99"]
                for key in (
                    "idle_p50",
                    "idle_p99",
                    "busy_p50",
                    "busy_p99",
                    "p99_ratio",
                ):
                    rows[name][key].append(latency[key])
                rows[name].setdefault("outlasted", []).append(
                    latency["drain_outlasted_writes"]
                )
    finally:
        for node, _, _ in nodes.values():
            node.terminate()
            node.wait()
        shutil.rmtree(work, ignore_errors=True)
        for device in devices.values():
            shutil.rmtree(device, ignore_errors=True)
    where = "RAM (/dev/shm)" if in_ram else "a directory beside the PFS"
    print(f"\nmedian (min-max) of {args.rounds} rounds of {args.mib} MiB; the devices in {where}; "
          f"64 KiB writes, 400 a round, to one file alone and while the node drains another:")  # fmt: skip
    names = list(binaries)
    ratio = "baseline" in binaries
    print(
        "| what | "
        + " | ".join(names)
        + (" | this build / baseline, per round |" if ratio else " |")
    )
    print("| --- " * (len(names) + 1 + ratio) + "|")
    for key, label in LABELS.items():
        cells = [spread(rows[name][key]) for name in names]
        if ratio:
            per_round = [
                a / b for a, b in zip(rows["this build"][key], rows["baseline"][key])
            ]
            cells.append(spread(per_round))
        print(f"| {label} | " + " | ".join(cells) + " |")
    for name in names:
        outlasted = sum(rows[name]["outlasted"])
        print(f"({name}: the drain was still running when the writes ended in {outlasted:.0f} of "
              f"{args.rounds} rounds)")  # fmt: skip


if __name__ == "__main__":
    main()
