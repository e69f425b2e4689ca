"""harmonia-bbd stages in a read phase's files (docs/buffer-nodes.md, "Stage-in (read phases)"):
a real node under a scheduler stand-in that orders StageIns copies its stripes, reports them,
serves reads with identity (harmonia-bbctl get --identity-of), drops the copies the order no
longer names, and holds none after a restart, while its written data is kept."""

import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_bbd import BBCTL, BBD, ctl, start, status

STRIPE = 65536
pytestmark = pytest.mark.skipif(not BBD.is_file(), reason="harmonia-bbd is not built")


class SchedulerStandIn:
    """Registers the node (reports every 0.05 s) and answers each report with the order set."""

    def __init__(self, path: Path, pb: types.ModuleType) -> None:
        self.pb = pb
        self.order = pb.DrainOrder()
        self.reports: list[Any] = []
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.listener.settimeout(0.2)
        self.stopped = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def set_order(self, epoch: int, *stage_ins: Any) -> None:
        order = self.pb.DrainOrder(epoch=epoch)
        order.stage_in.extend(stage_ins)
        with self.lock:
            self.order = order

    def wait_for(self, wanted: Callable[[Any], bool], timeout: float = 20) -> Any:
        """The first report from now on that `wanted` accepts."""
        with self.lock:
            seen = len(self.reports)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for report in self.reports[seen:]:
                    if wanted(report):
                        return report
                seen = len(self.reports)
            time.sleep(0.02)
        raise AssertionError(f"no such report within {timeout} s")

    def serve(self) -> None:
        while not self.stopped:
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            with connection:
                self.answer(connection)

    def answer(self, connection: socket.socket) -> None:
        def receive(n: int) -> bytes:
            data = b""
            while len(data) < n:
                chunk = connection.recv(n - len(data))
                if not chunk:
                    raise ConnectionError
                data += chunk
            return data

        try:
            while not self.stopped:
                (length,) = struct.unpack(">I", receive(4))
                envelope = self.pb.Envelope.FromString(receive(length))
                reply = self.pb.Envelope(seq=envelope.seq)
                with self.lock:
                    if envelope.HasField("register_buffer"):
                        reply.buffer_registered.report_seconds = 0.05
                        reply.buffer_registered.order.CopyFrom(self.order)
                    else:
                        self.reports.append(envelope.buffer_report)
                        reply.drain_order.CopyFrom(self.order)
                body = reply.SerializeToString()
                connection.sendall(struct.pack(">I", len(body)) + body)
        except (ConnectionError, OSError):
            return

    def close(self) -> None:
        self.stopped = True
        self.thread.join()
        self.listener.close()


def test_a_node_stages_in_serves_and_drops_copies(
    tmp_path: Path, pb: types.ModuleType
) -> None:
    (tmp_path / "pfs" / "in").mkdir(parents=True)
    data = random.Random(5).randbytes(5 * STRIPE + 777)
    source = tmp_path / "pfs" / "in" / "data.bin"
    source.write_bytes(data)
    time.sleep(1.1)  # a copy is made only of a file settled for a second
    # Node 1 of 2: stripes 1, 3 and 5 (the last, 777 bytes), not 0, 2 or 4.
    mine = 2 * STRIPE + 777
    stage_in = pb.StageIn(
        job="A", phase=0, uid=os.getuid(), gid=os.getgid(),
        files=["in/data.bin", "in/missing.bin"], stripe_bytes=STRIPE, stripe_index=1,
        stripe_count=2,
    )  # fmt: skip
    schedd = SchedulerStandIn(tmp_path / "schedd.sock", pb)
    schedd.set_order(1, stage_in)
    node, address = start(tmp_path, "--schedd", f"unix:{tmp_path / 'schedd.sock'}")
    try:
        report = schedd.wait_for(lambda r: len(r.staged_in) == 1)
        assert (report.staged_in[0].job, report.staged_in[0].bytes) == ("A", mine)
        assert list(report.staged_in[0].failed) == ["in/missing.bin"]
        assert (report.used, list(report.held)) == (mine, [])

        def get(
            offset: int, length: int, *identity: str
        ) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(
                [str(BBCTL), "--node", address, "get", "in/data.bin", str(offset), str(length),
                 *identity],
                capture_output=True, timeout=60, check=False,
            )  # fmt: skip

        seen = ("--identity-of", str(source))
        for stripe in (1, 3):
            got = get(stripe * STRIPE, STRIPE, *seen)
            assert got.returncode == 0, got.stderr
            assert got.stdout == data[stripe * STRIPE : (stripe + 1) * STRIPE]
        last = get(5 * STRIPE, 777, *seen)
        assert (last.returncode, last.stdout) == (0, data[5 * STRIPE :])
        assert get(5 * STRIPE, 778, *seen).returncode == 1, "past the end of the file"
        assert get(0, 100, *seen).returncode == 1, "stripe 0 is the other node's"
        assert get(STRIPE, 100).returncode == 1, "without identity: written data only"
        # Written data beside the copy: held, and kept across a restart.
        (tmp_path / "out.bin").write_bytes(b"w" * 1000)
        assert ctl(address, "put", "out.bin", str(tmp_path / "out.bin")).returncode == 0
        assert status(address)["used"] == str(mine + 1000)
        # Touched: the reader sees another file now.
        os.utime(source)
        assert get(STRIPE, 100, *seen).returncode == 1
        # Dropped from the order: the space is free again, the written data stays.
        schedd.set_order(2)
        schedd.wait_for(
            lambda r: r.order_epoch == 2 and not r.staged_in and r.used == 1000
        )
        assert list((tmp_path / "dev" / "stage-in").iterdir()) == []
        # Ordered again (the file settled again), then the node is killed with its copy on the
        # device: it starts with none, and with its log.
        time.sleep(1.1)
        schedd.set_order(3, stage_in)
        schedd.wait_for(lambda r: len(r.staged_in) == 1 and r.used == mine + 1000)
        assert len(list((tmp_path / "dev" / "stage-in").iterdir())) == 1
        node.send_signal(signal.SIGKILL)
        node.wait()
        # The file it could not copy was logged with the job, its user and the node.
        assert node.stderr is not None
        failed = [
            line for line in node.stderr.read().splitlines() if "in/missing.bin" in line
        ]
        assert failed, "the failed stage-in was not logged"
        assert failed[0].startswith("harmonia-bbd: stage-in of read phase 0: ")
        assert failed[0].endswith(f"(job A, uid {os.getuid()}, node {address})"), failed
        schedd.set_order(4)
        node, address = start(tmp_path, "--schedd", f"unix:{tmp_path / 'schedd.sock'}")
        assert list((tmp_path / "dev" / "stage-in").iterdir()) == []
        # (A log recovered after a crash drains at once: the epoch is acknowledged after it.)
        report = schedd.wait_for(lambda r: r.order_epoch == 4)
        assert (list(report.staged_in), report.used) == ([], 0)
        assert (tmp_path / "pfs" / "out.bin").read_bytes() == b"w" * 1000
    finally:
        node.kill()
        node.wait()
        schedd.close()
