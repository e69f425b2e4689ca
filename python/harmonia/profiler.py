"""Device profiler (Harmonia paper, section III-A): k concurrent file-per-process streams, direct
I/O, sequential requests; aggregate bandwidth per k, and the MSCA (Eq. 1) and interference factor
(Eq. 2) that follow. The result is a device model the simulator loads (docs/formats.md)."""

import errno
import mmap
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OpName = str  # "write" or "read"


@dataclass(frozen=True)
class ProfileSettings:
    directory: Path
    writers: list[int]  # the values of k, increasing
    request_size: int  # bytes per request
    size_per_stream: int  # bytes each stream writes (weak scaling, as in the paper)
    direct: bool = True

    def __post_init__(self) -> None:
        if self.request_size % mmap.PAGESIZE or self.size_per_stream % self.request_size:
            raise ValueError(
                f"the request size ({self.request_size} B) must be a multiple of the page size"
                f" ({mmap.PAGESIZE} B) and divide the size per stream ({self.size_per_stream} B)"
            )


@dataclass(frozen=True)
class Point:
    op: OpName
    streams: int
    seconds: float
    bytes: int

    @property
    def bandwidth(self) -> float:
        """Aggregate bytes per second of all streams together."""
        return self.bytes / self.seconds


@dataclass
class Profile:
    settings: ProfileSettings
    points: list[Point]
    direct_io: bool  # False when the file system refused O_DIRECT and buffered I/O was used

    def curve(self, op: OpName) -> list[tuple[int, float]]:
        """(k, aggregate bandwidth of k streams / best aggregate bandwidth) for `op`."""
        points = [p for p in self.points if p.op == op]
        peak = max(p.bandwidth for p in points)
        return [(p.streams, p.bandwidth / peak) for p in points]

    def peak(self, op: OpName) -> float:
        return max(p.bandwidth for p in self.points if p.op == op)

    def concurrency(self) -> int:
        """Device concurrency as measured: the fewest streams reaching 95 % of the write peak."""
        return min(k for k, fraction in self.curve("write") if fraction >= 0.95)

    def msca(self, op: OpName) -> list[tuple[int, float]]:
        """Eq. 1 per k: (k / device concurrency) * (peak - aggregate(k)) / peak."""
        c = self.concurrency()
        return [(k, k / c * (1 - fraction)) for k, fraction in self.curve(op)]

    def interference(self, op: OpName) -> list[tuple[int, float]]:
        """Eq. 2 per k: the slowdown of each of k equal streams against one stream alone."""
        points = {p.streams: p.bandwidth for p in self.points if p.op == op}
        alone = points[min(points)]
        return [(k, k * alone / bw) for k, bw in sorted(points.items())]


class ProfileError(Exception):
    """The directory cannot be profiled (missing, not writable, out of space)."""


def _open_flags(op: OpName, direct: bool) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC if op == "write" else os.O_RDONLY
    return flags | (os.O_DIRECT if direct else 0)


def _supports_direct(directory: Path) -> bool:
    probe = directory / ".harmonia-profile-probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
    except OSError as error:
        if error.errno == errno.EINVAL:
            return False
        raise ProfileError(f"{directory}: cannot create files: {error.strerror}") from error
    try:
        buffer = mmap.mmap(-1, mmap.PAGESIZE)  # page aligned, as O_DIRECT wants
        os.write(fd, buffer)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def _run_streams(settings: ProfileSettings, op: OpName, streams: int, direct: bool) -> Point:
    """k threads, each with its own file, all released at once; os.pread/os.pwrite release the
    GIL, so the streams really are concurrent."""
    files = [settings.directory / f"harmonia-profile-{i}.dat" for i in range(streams)]
    barrier = threading.Barrier(streams + 1)
    errors: list[OSError] = []

    def stream(path: Path) -> None:
        buffer = mmap.mmap(-1, settings.request_size)  # page aligned, as O_DIRECT wants
        # Incompressible data (some SSDs compress), written once so every page is touched.
        block = os.urandom(min(settings.request_size, 1 << 16))
        for at in range(0, settings.request_size, len(block)):
            buffer[at : at + len(block)] = block
        fd = -1
        try:
            fd = os.open(path, _open_flags(op, direct), 0o600)
            barrier.wait()
            for offset in range(0, settings.size_per_stream, settings.request_size):
                if op == "write":
                    done = os.pwrite(fd, buffer, offset)
                else:
                    done = os.preadv(fd, [buffer], offset)
                if done != settings.request_size:
                    raise OSError(errno.EIO, f"short {op} ({done} bytes)")
            if op == "write":
                os.fsync(fd)  # buffered fallback: the data must reach the device
        except OSError as error:
            errors.append(error)
            if not barrier.broken:
                barrier.abort()
        finally:
            if fd >= 0:
                os.close(fd)

    threads = [threading.Thread(target=stream, args=(path,)) for path in files]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise ProfileError(f"{settings.directory}: {op} failed: {errors[0].strerror or errors[0]}")
    return Point(op, streams, elapsed, streams * settings.size_per_stream)


def profile(
    settings: ProfileSettings, ops: list[OpName], on_point: Callable[[Point], None]
) -> Profile:
    """Measure every k for each op (writes first: reads read the files the writes left)."""
    if not settings.directory.is_dir():
        raise ProfileError(f"{settings.directory}: not a directory")
    direct = settings.direct and _supports_direct(settings.directory)
    points = []
    try:
        for k in settings.writers:
            if "write" in ops or "read" in ops:
                write = _run_streams(settings, "write", k, direct)
                if "write" in ops:
                    points.append(write)
                    on_point(write)
            if "read" in ops:
                read = _run_streams(settings, "read", k, direct)
                points.append(read)
                on_point(read)
    finally:
        for i in range(max(settings.writers)):
            (settings.directory / f"harmonia-profile-{i}.dat").unlink(missing_ok=True)
    return Profile(settings, points, direct)


def device_toml(profile: Profile, name: str) -> str:
    """The measured device as a [devices.NAME] table for scenario files."""
    ops = {p.op for p in profile.points}
    write_bw = profile.peak("write")
    read_bw = profile.peak("read") if "read" in ops else write_bw
    curve = ", ".join(f"[{k}, {max(fraction, 1e-6):.4f}]" for k, fraction in profile.curve("write"))
    s = profile.settings
    mode = "direct" if profile.direct_io else "buffered"
    return (
        f"# Measured by `harmonia profile` in {s.directory}: {s.request_size} B requests,\n"
        f"# {s.size_per_stream} B per stream, {mode} I/O.\n"
        f"# The curve is the aggregate write bandwidth of k streams over the best aggregate.\n"
        f"[devices.{name}]\n"
        f"write_bw = {write_bw:.0f}\n"
        f"read_bw = {read_bw:.0f}\n"
        f"concurrency = {profile.concurrency()}\n"
        f"curve = [{curve}]\n"
    )


def loopback_bandwidth(data: bytes, total: int | None = None, chunk: int = 4 << 20) -> float:
    """Bytes/s of one plain TCP stream over loopback sending `total` bytes (default: all of
    `data`, which is sent again from its start when it is shorter) in sends of `chunk`."""
    total = len(data) if total is None else total
    server = socket.create_server(("127.0.0.1", 0))

    def sink() -> None:
        connection, _ = server.accept()
        buffer = bytearray(chunk)
        with connection:
            while connection.recv_into(buffer):
                pass

    reader = threading.Thread(target=sink)
    reader.start()
    view = memoryview(data)
    with socket.create_connection(server.getsockname()) as client:
        start = time.perf_counter()
        for sent in range(0, total, chunk):
            at = sent % len(data)
            client.sendall(view[at : at + min(chunk, total - sent)])
    reader.join()
    seconds = time.perf_counter() - start
    server.close()
    return total / seconds
