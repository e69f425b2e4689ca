"""Identity on every request (issue 15, docs/security.md "Identity"): two real users made for the
test (A and B), a munged of the project's own (scripts/munged.sh), harmonia-bbd and
harmonia-schedd with --auth munge. Every request B can make against A's job or A's files is
refused and A's data stays intact and unreadable to B; forged, replayed, expired and misdirected
credentials and unauthenticated clients are refused; root acts for anyone."""

import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bbio_support import BUILD, LIBRARY
from munge_support import munged
from schedd_support import SCHEDD, munge_daemon, status, wait_until
from users_support import made_users, why_no_users
from wire_support import (
    BB_FORBIDDEN,
    BB_OK,
    BB_UNAUTHENTICATED,
    bb_authenticate,
    bb_drain,
    bb_read,
    bb_write,
    call,
    connect,
    decode,
    field,
    seq,
)

BBD = BUILD / "src" / "bbd" / "harmonia-bbd"
BBCTL = BUILD / "src" / "bbd" / "harmonia-bbctl"
WRITER = Path(__file__).with_name("slow_writer.py")


def _why_not() -> str:
    if not BBD.is_file() or not SCHEDD.is_file():
        return "the daemons are not built"
    return why_no_users("runuser", "munged", "munge", "mungekey")


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "-")


# control.proto: Error{code=1 (FORBIDDEN 6, UNAUTHENTICATED 9), message=2} in Envelope field 13.
CONTROL_ERROR, CONTROL_AUTHENTICATED = 13, 24
CONTROL_UNAUTHENTICATED = 9
CONTROL_REQUESTS = {  # every request of the control protocol, by its Envelope field
    "RegisterProcess": 2, "PhaseBegin": 4, "PhaseEnd": 5, "FlushRequest": 6, "FlushDone": 7,
    "Heartbeat": 8, "Unregister": 9, "StatusRequest": 11, "RegisterBuffer": 14,
    "BufferReport": 16, "SettleFile": 18, "SettleDone": 21,
}  # fmt: skip


# --- the users, munged and the daemons -------------------------------------------------------


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, pwd.struct_passwd]]:
    """Two users of their own (A owns the job and files, B attacks), removed afterwards."""
    with made_users("a", "b") as made:
        yield made


@pytest.fixture(scope="module")
def munge_socket() -> Iterator[str]:
    with munged("harmonia-munge-") as (socket_path,):
        yield socket_path


def credential(munge_socket: str, payload: str, user: str | None = None) -> bytes:
    command = ["munge", "-S", munge_socket, "-s", payload]
    if user:
        command = ["runuser", "-u", user, "--", *command]
    return subprocess.run(command, capture_output=True, check=True).stdout.strip()


@pytest.fixture
def node(
    tmp_path: Path, users: dict[str, pwd.struct_passwd], munge_socket: str
) -> Iterator[tuple[str, Path]]:
    """harmonia-bbd --auth munge as root, its PFS root with a directory of A's (0700)."""
    tmp_path.chmod(0o755)
    pfs, device = tmp_path / "pfs", tmp_path / "dev"
    pfs.mkdir(mode=0o755)
    device.mkdir(mode=0o700)
    (pfs / "a").mkdir(mode=0o700)
    os.chown(pfs / "a", users["a"].pw_uid, users["a"].pw_gid)
    (pfs / "shared").mkdir()
    (pfs / "shared").chmod(0o1777)
    daemon = subprocess.Popen(
        [str(BBD), "--device", str(device), "--pfs", str(pfs), "--auth", "munge",
         "--munge-socket", munge_socket, "--auth-window", "2", "--threshold", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert daemon.stdout is not None
    line = daemon.stdout.readline()
    assert line.startswith("port="), daemon.stderr.read() if daemon.stderr else ""
    try:
        yield f"127.0.0.1:{line.strip().removeprefix('port=')}", pfs
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def as_user(address: str, cred: bytes) -> socket.socket:
    sock = connect(address)
    reply = call(sock, bb_authenticate(cred))
    assert reply.get(2, 0) == BB_OK, reply
    return sock


def bbctl(
    address: str, munge_socket: str, user: str | None, *args: str
) -> subprocess.CompletedProcess[str]:
    command = [str(BBCTL), "--node", address, *args]
    if user:
        command = ["runuser", "-u", user, "--", *command]
    env = {**os.environ, "HARMONIA_MUNGE_SOCKET": munge_socket}
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=60, check=False
    )


# --- the buffer node -------------------------------------------------------------------------


def test_user_b_can_do_nothing_to_user_as_files(
    node: tuple[str, Path], users: dict[str, pwd.struct_passwd], munge_socket: str
) -> None:
    address, pfs = node
    a, b = users["a"].pw_name, users["b"].pw_name
    secret = os.urandom(70_000)
    writer = as_user(address, credential(munge_socket, "harmonia-bbd", a))
    for file in ("a/secret.dat", "shared/a.dat"):
        assert call(writer, bb_write(file, secret)).get(2, 0) == BB_OK
    # The first write made the PFS files as A.
    assert (pfs / "a/secret.dat").stat().st_uid == users["a"].pw_uid
    assert (pfs / "shared/a.dat").stat().st_uid == users["a"].pw_uid

    attacker = as_user(address, credential(munge_socket, "harmonia-bbd", b))
    for file in ("a/secret.dat", "shared/a.dat"):
        for request in (
            bb_write(file, b"B was here"),
            bb_read(file, 100),
            bb_drain(file),
        ):
            reply = call(attacker, request)
            assert reply.get(2, 0) == BB_FORBIDDEN, (file, reply)
            assert 4 not in reply, "no byte of A's data goes to B"
            assert f"uid {users['a'].pw_uid}".encode() in reply[3]  # type: ignore[operator]
    # A new file in A's directory: the PFS refuses it to B, so the node does too.
    reply = call(attacker, bb_write("a/new.dat", b"x"))
    assert reply.get(2, 0) == BB_FORBIDDEN and b"as uid" in reply[3], reply  # type: ignore[operator]
    assert not (pfs / "a/new.dat").exists()
    # "Drain everything" by B drains only B's files: A's stay held, untouched.
    assert call(attacker, seq(5) + field(4, b"")).get(2, 0) == BB_OK
    assert (pfs / "a/secret.dat").stat().st_size == 0
    # The same through the real tool run as B.
    for args in (("get", "a/secret.dat", "0", "100"), ("drain", "a/secret.dat")):
        done = bbctl(address, munge_socket, b, *args)
        assert done.returncode != 0 and "FORBIDDEN" in done.stderr, done
        assert done.stdout == ""
    # A reads and drains its own; the bytes are intact, the files A's.
    assert call(writer, bb_read("a/secret.dat", len(secret))).get(4) == secret
    assert call(writer, bb_drain("")).get(2, 0) == BB_OK
    assert (pfs / "a/secret.dat").read_bytes() == secret
    assert (pfs / "shared/a.dat").read_bytes() == secret
    assert (pfs / "a/secret.dat").stat().st_uid == users["a"].pw_uid


def test_root_acts_for_any_user(
    node: tuple[str, Path], users: dict[str, pwd.struct_passwd], munge_socket: str
) -> None:
    address, pfs = node
    writer = as_user(
        address, credential(munge_socket, "harmonia-bbd", users["a"].pw_name)
    )
    assert call(writer, bb_write("a/x.dat", b"0123456789")).get(2, 0) == BB_OK
    admin = as_user(address, credential(munge_socket, "harmonia-bbd"))
    assert call(admin, bb_read("a/x.dat", 10)).get(4) == b"0123456789"
    assert call(admin, bb_drain("a/x.dat")).get(2, 0) == BB_OK
    # Drained as A: the file stays A's.
    assert (pfs / "a/x.dat").read_bytes() == b"0123456789"
    assert (pfs / "a/x.dat").stat().st_uid == users["a"].pw_uid


def test_bad_credentials_and_no_credential_are_refused(
    node: tuple[str, Path], users: dict[str, pwd.struct_passwd], munge_socket: str
) -> None:
    address, pfs = node
    a = users["a"].pw_name
    # No credential: every request is refused, nothing written.
    sock = connect(address)
    for request in (bb_write("shared/u.dat", b"x"), bb_read("shared/u.dat", 1),
                    bb_drain(""), seq(5) + field(5, b"")):  # fmt: skip
        reply = call(sock, request)
        assert reply.get(2, 0) == BB_UNAUTHENTICATED and b"Authenticate" in reply[3], (
            reply
        )  # type: ignore[operator]
    # The tool without munged: refused, with the reason.
    done = bbctl(address, "/nonexistent/munge.socket", None, "status")
    assert done.returncode != 0 and "UNAUTHENTICATED" in done.stderr, done
    good = credential(munge_socket, "harmonia-bbd", a)
    refused = {
        "forged": good[:-12] + b"AAAAAAAAAAA:",
        "garbage": b"MUNGE:not-a-credential:",
        "for another daemon": credential(munge_socket, "harmonia-schedd", a),
    }
    for what, bad in refused.items():
        sock = connect(address)
        reply = call(sock, bb_authenticate(bad))
        assert reply.get(2, 0) == BB_UNAUTHENTICATED, (what, reply)
        assert (
            call(sock, bb_write("shared/u.dat", b"x")).get(2, 0) == BB_UNAUTHENTICATED
        ), what
    # Replayed: accepted once, then refused on any connection.
    as_user(address, good)
    reply = call(connect(address), bb_authenticate(good))
    assert reply.get(2, 0) == BB_UNAUTHENTICATED and b"replayed" in reply[3].lower(), (
        reply
    )  # type: ignore[union-attr]
    # Too old for the node's window (--auth-window 2), though munged's TTL would still take it.
    old = credential(munge_socket, "harmonia-bbd", a)
    time.sleep(3.2)
    reply = call(connect(address), bb_authenticate(old))
    assert reply.get(2, 0) == BB_UNAUTHENTICATED and b"window" in reply[3], reply  # type: ignore[operator]
    assert not (pfs / "shared/u.dat").exists()


def test_path_escapes_are_refused_for_users(
    node: tuple[str, Path],
    users: dict[str, pwd.struct_passwd],
    munge_socket: str,
    tmp_path: Path,
) -> None:
    address, pfs = node
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    (pfs / "shared/link").symlink_to(outside)
    sock = as_user(
        address, credential(munge_socket, "harmonia-bbd", users["a"].pw_name)
    )
    for name in (
        "../outside/x",
        "shared/../../outside/x",
        str(outside / "x"),
        "shared/link/x",
    ):
        reply = call(sock, bb_write(name, b"escape"))
        assert reply.get(2, 0) != BB_OK, (name, reply)
    # A directory swapped for a link between the write and its drain: the drain writes through
    # the descriptor opened at the write, to the file deleted with its directory, never through
    # the link.
    (pfs / "shared/run").mkdir()
    (pfs / "shared/run").chmod(0o777)
    assert call(sock, bb_write("shared/run/out.dat", b"data")).get(2, 0) == BB_OK
    shutil.rmtree(pfs / "shared/run")
    (pfs / "shared/run").symlink_to(outside)
    call(sock, bb_drain("shared/run/out.dat"))
    assert list(outside.iterdir()) == []


# --- the scheduler ---------------------------------------------------------------------------


@pytest.fixture
def schedd(reachable: Path, munge_socket: str) -> Iterator[tuple[Path, str]]:
    unix = reachable / "schedd.sock"
    with munge_daemon(unix, munge_socket) as address:
        yield unix, address


def job(
    address: str, key: str, path: Path, user: str | None, munge_socket: str, hold: float
) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ["PATH"], "LD_PRELOAD": str(LIBRARY.resolve()),
        "HARMONIA_SCHEDD": address, "HARMONIA_JOB": key, "HARMONIA_MUNGE_SOCKET": munge_socket,
    }  # fmt: skip
    command = [sys.executable, str(WRITER), str(path), "1", "0", str(hold)]
    if user:
        command = ["runuser", "-u", user, "--", "env", *[f"{k}={v}" for k, v in env.items()],
                   "/usr/bin/python3", str(WRITER), str(path), "1", "0", str(hold)]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip


def test_user_b_cannot_join_or_squat_user_as_job(
    schedd: tuple[Path, str],
    users: dict[str, pwd.struct_passwd],
    munge_socket: str,
    reachable: Path,
) -> None:
    # A job key names one of its user's jobs: B naming A's key, over TCP or the Unix socket,
    # gets a job of its own, and A's job (its processes, its phase) is untouched.
    unix, tcp = schedd
    out = reachable / "out"
    out.mkdir()
    out.chmod(0o1777)
    a, b = users["a"].pw_name, users["b"].pw_name
    owner = job(f"tcp:{tcp}", "job-of-a", out / "a.dat", a, munge_socket, hold=6)
    intruders = []
    try:
        assert wait_until(
            lambda: any(j["job"] == "job-of-a" for j in status(unix)["jobs"])
        )
        for address in (f"tcp:{tcp}", str(unix)):
            intruders.append(
                job(address, "job-of-a", out / "b.dat", b, munge_socket, hold=3)
            )
        assert wait_until(lambda: len(status(unix)["jobs"]) == 2), status(unix)
        jobs = {int(j.get("uid", 0)): j for j in status(unix)["jobs"]}
        assert set(jobs) == {users["a"].pw_uid, users["b"].pw_uid}
        assert all(j["job"] == "job-of-a" for j in jobs.values())
        assert jobs[users["a"].pw_uid]["processes"] == 1, "nobody joined A's job"
        assert jobs[users["b"].pw_uid]["processes"] == 2
    finally:
        for intruder in intruders:
            _, err = intruder.communicate(timeout=30)
            assert intruder.returncode == 0 and "refused" not in err, err
        _, err = owner.communicate(timeout=30)
    assert owner.returncode == 0 and "refused" not in err, err
    assert (out / "a.dat").read_bytes() == b"A" * 1_000_000


def test_an_unauthenticated_tcp_client_gets_nothing(
    schedd: tuple[Path, str], munge_socket: str
) -> None:
    _, tcp = schedd
    sock = connect(tcp)
    for name, number in CONTROL_REQUESTS.items():
        reply = call(sock, seq(number) + field(number, b""))
        assert CONTROL_ERROR in reply, (name, reply)
        error = decode(reply[CONTROL_ERROR])  # type: ignore[arg-type]
        assert error.get(1) == CONTROL_UNAUTHENTICATED, (name, error)
    forged = credential(munge_socket, "harmonia-schedd")[:-12] + b"AAAAAAAAAAA:"
    reply = call(sock, seq(99) + field(23, field(1, forged)))
    assert decode(reply[CONTROL_ERROR]).get(1) == CONTROL_UNAUTHENTICATED  # type: ignore[arg-type]
    good = credential(munge_socket, "harmonia-schedd")
    assert CONTROL_AUTHENTICATED in call(sock, seq(100) + field(23, field(1, good)))
    status = call(sock, seq(101) + field(11, b""))
    assert CONTROL_ERROR not in status and 12 in status, status
    # Replayed on a second connection: refused.
    again = call(connect(tcp), seq(1) + field(23, field(1, good)))
    assert decode(again[CONTROL_ERROR]).get(1) == CONTROL_UNAUTHENTICATED  # type: ignore[arg-type]
