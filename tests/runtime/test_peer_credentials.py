"""Daemons with --auth peer on a host where munged runs: their clients make a MUNGE credential
whenever munged can (they cannot know the daemon's mode) and send it; a peer-mode daemon, which
knows them from the kernel, takes one naming that same user as confirming it instead of refusing
the connection. A packaged site has munged running (the package recommends munge), so
harmonia-bbctl, harmonia-schedctl and libharmonia's clients must be served there."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bbio_support import BUILD
from munge_support import munged
from schedd_support import SCHEDCTL, SCHEDD

BBD = BUILD / "src" / "bbd" / "harmonia-bbd"
BBCTL = BUILD / "src" / "bbd" / "harmonia-bbctl"


def test_clients_with_a_credential_are_served_by_peer_mode_daemons(
    tmp_path: Path,
) -> None:
    if shutil.which("munged") is None:
        pytest.skip("munged not installed (Debian: munge)")
    (tmp_path / "dev").mkdir()
    (tmp_path / "pfs").mkdir()
    data = tmp_path / "data"
    data.write_bytes(os.urandom(1 << 20))
    with munged("harmonia-peer-") as (munge_socket,):
        env = {**os.environ, "HARMONIA_MUNGE_SOCKET": munge_socket}
        scheduler = subprocess.Popen(
            [str(SCHEDD), "--socket", str(tmp_path / "s.sock"), "--tcp", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        node = subprocess.Popen(
            [str(BBD), "--device", str(tmp_path / "dev"), "--pfs", str(tmp_path / "pfs")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            assert scheduler.stdout is not None and node.stdout is not None
            schedd_port = scheduler.stdout.readline().strip().split("=")[1]
            node_port = node.stdout.readline().strip().split("=")[1]
            where = f"127.0.0.1:{node_port}"
            for command in (
                [str(BBCTL), "--node", where, "put", "out.dat", str(data)],
                [str(BBCTL), "--node", where, "drain"],
                [str(SCHEDCTL), "--address", f"tcp:127.0.0.1:{schedd_port}", "status"],
            ):
                done = subprocess.run(command, capture_output=True, text=True, check=False,
                                      env=env, timeout=30)  # fmt: skip
                assert done.returncode == 0, (command, done.stderr)
        finally:
            for process in (node, scheduler):
                process.terminate()
                process.wait(timeout=10)
    assert (tmp_path / "pfs" / "out.dat").read_bytes() == data.read_bytes()
