"""Attacks on the deployments as a site gets them (docs/security.md, "Deployment modes"), by real
users the tests make (alice, whose job and files are attacked; mallory) and by `nobody`:
(a) `harmonia up`'s daemons (BufferCluster's defaults, as root), (b) `harmonia cluster up`
(Slurm, munged, the same daemons), (c) daemons on hosts of their own (network namespaces,
MUNGE). Each attack is refused with a clear error, nothing is read or written for the attacker,
and alice is served throughout. The Slurm setup hook with a planted link is attacked in
test_slurm_hooks.py."""

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bbio_support import BUILD, LIBRARY
from harmonia.buffers.cluster import BufferCluster, ClusterError, ClusterSettings, Hosts
from harmonia.slurm import SlurmSettings
from harmonia.slurm_bb import Hooks
from munge_support import munged
from proc_support import cpu_seconds, descriptors, proc_status
from schedd_support import SCHEDCTL, SCHEDD, SteppedWriter, expected_bytes, wait_until
from slurm_support import Cluster as SlurmCluster
from slurm_support import needs_slurm, running
from testbed_support import hosts_of_their_own, why_no_testbed
from users_support import made_users, run_as, why_no_users

BBD = (BUILD / "src" / "bbd" / "harmonia-bbd").absolute()
BBCTL = (BUILD / "src" / "bbd" / "harmonia-bbctl").absolute()
ATTACKER = Path(__file__).with_name("attacker.py")
STEPPED_WRITER = Path(__file__).with_name("stepped_writer.py")
HARMONIA = Path(sys.executable).with_name("harmonia")
# The users' Python: the virtual environment may not be theirs.
PYTHON = "/usr/bin/python3"
# A munged socket that is not there: clients then make no credential, whatever runs here.
NO_MUNGED = "/nonexistent/munge.socket"
TESTBED_NAME = f"hma{os.getpid() % 10000}"


def _why_not() -> str:
    if not (BBD.is_file() and SCHEDD.is_file() and LIBRARY.is_file()):
        return "the daemons and libharmonia are not built"
    if not Path(PYTHON).is_file():
        return f"{PYTHON} is missing: the users' programs run with it"
    return why_no_users()


pytestmark = pytest.mark.skipif(bool(_why_not()), reason=_why_not() or "-")


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, pwd.struct_passwd]]:
    """alice and mallory, made for these tests and removed afterwards; and nobody."""
    with made_users("alice", "mallory") as made:
        yield {**made, "nobody": pwd.getpwnam("nobody")}


# --- the deployments ---------------------------------------------------------------------------


@dataclass
class Site:
    """A deployment under attack: where its daemons are, and how a program runs as a user on
    one of its client hosts (this machine, or a test-bed host's namespace)."""

    schedd: str  # what jobs and tools are given: a Unix socket's path, or tcp:HOST:PORT
    schedd_socket: Path  # the scheduler's Unix socket (root's status)
    nodes: list[str]  # HOST:PORT of each buffer node
    node_pids: list[int]
    pfs: Path
    scratch: Path  # every user may read it: what users send from
    munge_socket: str = ""  # the test bed: every TCP client authenticates with MUNGE
    hosts: Hosts | None = None

    def on(self, user: pwd.struct_passwd | None, host: int = 0) -> list[str]:
        """The start of a command line run as `user` (root: None) on client host `host`."""
        where = (
            ["ip", "netns", "exec", self.hosts.compute[host][0]] if self.hosts else []
        )
        return [*where, *(run_as(user) if user else [])]

    def env(self, credential: bool = True, munge: str = "") -> dict[str, str]:
        """The tools' environment: their munged `munge` (default: the test bed's; none on
        this host), or none at all (no credential)."""
        munge = (munge or self.munge_socket or NO_MUNGED) if credential else NO_MUNGED
        return {**os.environ, "HARMONIA_MUNGE_SOCKET": munge}

    def job_env(self, key: str, munge: str = "") -> dict[str, str]:
        return {
            **self.env(munge=munge), "LD_PRELOAD": str(LIBRARY.resolve()), "HARMONIA_SCHEDD": self.schedd,
            "HARMONIA_BUFFER_ROOT": str(self.pfs), "HARMONIA_STAGE_INCLUDE": str(self.pfs),
            "HARMONIA_JOB": key,
        }  # fmt: skip

    def bbctl(
        self,
        user: pwd.struct_passwd | None,
        node: int,
        *args: str,
        host: int = 0,
        credential: bool = True,
        munge: str = "",
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.on(user, host), str(BBCTL), "--node", self.nodes[node], *args],
            capture_output=True, text=True, env=self.env(credential, munge), timeout=60,
            check=False,
        )  # fmt: skip

    def node_status(self, node: int) -> dict[str, Any]:
        done = self.bbctl(None, node, "status")
        assert done.returncode == 0, done.stderr
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def total(self, counter: str) -> int:
        return sum(int(self.node_status(k)[counter]) for k in range(len(self.nodes)))

    def status(self, user: pwd.struct_passwd | None = None) -> dict[str, Any]:
        """harmonia-schedctl status on the scheduler's Unix socket, as `user` (root: None)."""
        done = subprocess.run(
            [*(run_as(user) if user else []), str(SCHEDCTL.absolute()), "--address",
             str(self.schedd_socket), "status", "--compact"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def jobs(self, key: str) -> dict[int, dict[str, Any]]:
        """The scheduler's jobs named `key`, by their user's uid."""
        return {
            int(j.get("uid", 0)): j for j in self.status()["jobs"] if j["job"] == key
        }


def _reachable(prefix: str) -> Path:
    """A new directory every user can pass through (pytest's own are root's, mode 0700)."""
    where = Path(tempfile.mkdtemp(prefix=prefix))
    where.chmod(0o755)
    return where


def _prepare(pfs: Path, scratch: Path, alice: pwd.struct_passwd) -> None:
    """What the attacks aim at: a root-only directory and file on the PFS and alice's 0700
    directory; and, in a scratch directory every user may write in (sticky, as /tmp), a file
    every user can send from."""
    scratch.mkdir()
    scratch.chmod(0o1777)
    (pfs / "rootonly").mkdir(mode=0o700)
    (pfs / "rootonly" / "secret").write_text("root's")
    (pfs / "rootfile").write_text("root's")
    (pfs / "rootfile").chmod(0o600)
    (pfs / "alice").mkdir(mode=0o700)
    os.chown(pfs / "alice", alice.pw_uid, alice.pw_gid)
    (scratch / "payload").write_bytes(b"mallory was here\n" * 1000)
    (scratch / "payload").chmod(0o644)


def _node_addresses(cluster: BufferCluster) -> list[str]:
    directory = cluster.settings.directory
    return [f"{cluster.node_host(k)}:{(directory / f'bb{k}.port').read_text().strip()}"
            for k in range(cluster.settings.buffers)]  # fmt: skip


@pytest.fixture(scope="module")
def up(users: dict[str, pwd.struct_passwd]) -> Iterator[Site]:
    """(a) `harmonia up`'s daemons with BufferCluster's defaults (4 nodes), run by root."""
    directory = _reachable("harmonia-attacks-up-")
    try:
        with BufferCluster(ClusterSettings(directory)) as cluster:
            site = Site(str(cluster.socket), cluster.socket, _node_addresses(cluster),
                        [n.pid for n in cluster.nodes if n], cluster.pfs,
                        directory / "scratch")  # fmt: skip
            _prepare(site.pfs, site.scratch, users["alice"])
            yield site
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(users: dict[str, pwd.struct_passwd]) -> Iterator[tuple[Site, SlurmCluster]]:
    """(b) `harmonia cluster up` with its defaults but a small size: munged, slurmctld, one
    slurmd, harmonia-schedd and two nodes, everything run by root."""
    if needs_slurm.args[0]:
        pytest.skip(needs_slurm.kwargs["reason"])

    def make(directory: Path) -> SlurmCluster:
        return SlurmCluster(
            SlurmSettings(directory, nodes=1, buffers=2, capacity=64 << 20)
        )

    with running(make, "harmonia-attacks-slurm-") as c:
        buffers = c.cluster.buffers_dir
        pids = [int((buffers / f"bb{k}.pid").read_text()) for k in range(2)]
        site = Site(c.hooks["schedd"], Path(c.hooks["schedd"]), c.hooks["nodes"], pids,
                    c.cluster.pfs, c.dir / "scratch")  # fmt: skip
        _prepare(site.pfs, site.scratch, users["alice"])
        yield site, c


@pytest.fixture(scope="module")
def testbed() -> Iterator[dict[str, Any]]:
    reason = why_no_testbed(TESTBED_NAME, "munged", "munge")
    if reason:
        pytest.skip(reason)
    with hosts_of_their_own(TESTBED_NAME) as description:
        yield description


@pytest.fixture(scope="module")
def bed(testbed: dict[str, Any], users: dict[str, pwd.struct_passwd]) -> Iterator[Site]:
    """(c) harmonia-schedd and two nodes on hosts of their own (their namespace addresses),
    with MUNGE as they must; clients on the two compute hosts."""
    directory = _reachable("harmonia-attacks-bed-")
    try:
        with munged("harmonia-attacks-munge-") as (munge_socket,):
            hosts = Hosts.from_testbed(testbed, munge_socket)
            with BufferCluster(
                ClusterSettings(directory, buffers=2, hosts=hosts)
            ) as cluster:
                site = Site(f"tcp:{hosts.schedd_address}", cluster.socket,
                            _node_addresses(cluster), [n.pid for n in cluster.nodes if n],
                            cluster.pfs, directory / "scratch", munge_socket,
                            hosts)  # fmt: skip
                _prepare(site.pfs, site.scratch, users["alice"])
                yield site
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module", params=["up", "cluster", "bed"])
def site(request: pytest.FixtureRequest) -> Site:
    """Each deployment in turn."""
    if request.param == "cluster":
        return request.getfixturevalue("cluster")[0]  # type: ignore[no-any-return]
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


# --- users' programs ---------------------------------------------------------------------------


class UserWriter(SteppedWriter):
    """stepped_writer.py as `user` under libharmonia, job `key`, on client host `host` (with
    the munged `munge`)."""

    def __init__(
        self,
        site: Site,
        user: pwd.struct_passwd,
        key: str,
        path: Path,
        host: int = 0,
        munge: str = "",
    ) -> None:
        self.process = subprocess.Popen(
            [*site.on(user, host), PYTHON, str(STEPPED_WRITER), str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=site.job_env(key, munge),
        )  # fmt: skip
        self.expect("opened")


@contextmanager
def writing(writer: SteppedWriter, chunks: int = 20) -> Iterator[list[int]]:
    """Writes the writer's chunks 0 .. chunks - 1 over and over, one every 0.1 s, in the
    background while the block runs (its job stays in its I/O phase); yields the number of
    writes made so far (in a list, updated)."""
    made = [0]
    stop = threading.Event()

    def keep() -> None:
        while not stop.is_set():
            writer.write(made[0] % chunks)
            made[0] += 1
            stop.wait(0.1)

    thread = threading.Thread(target=keep)
    thread.start()
    try:
        yield made
    finally:
        stop.set()
        thread.join(timeout=30)


@contextmanager
def attacker(
    site: Site,
    user: pwd.struct_passwd,
    *args: str,
    host: int = 0,
    credential: bool = True,
) -> Iterator[dict[str, Any]]:
    """attacker.py `args` as `user`: its JSON report, while it holds what it took (until the
    block ends)."""
    process = subprocess.Popen(
        [*site.on(user, host), PYTHON, str(ATTACKER), *args], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=site.env(credential),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.communicate(timeout=30)[1]
        yield json.loads(line)
    finally:
        process.communicate(timeout=30)


# --- every deployment --------------------------------------------------------------------------


def test_nobody_writes_nothing_root_only_through_a_node(
    site: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    # A node runs as root: as nobody and as mallory, write into a root-only directory and
    # over a root 0600 file, then drain, through every node.
    received = site.total("received_bytes")
    local = str(site.scratch / "payload")
    for name in ("nobody", "mallory"):
        uid = users[name].pw_uid
        for node in range(len(site.nodes)):
            for target in ("rootonly/planted", "rootfile"):
                done = site.bbctl(users[name], node, "put", target, local)
                assert done.returncode != 0, done
                assert "FORBIDDEN" in done.stderr, done.stderr
                assert f"Permission denied (as uid {uid})" in done.stderr, done.stderr
                site.bbctl(users[name], node, "drain", target)
    if site.hosts:  # and a client with no credential at all
        done = site.bbctl(
            users["nobody"], 0, "put", "rootfile", local, credential=False
        )
        assert done.returncode != 0 and "UNAUTHENTICATED" in done.stderr, done
    assert sorted(p.name for p in (site.pfs / "rootonly").iterdir()) == ["secret"]
    assert (site.pfs / "rootfile").read_text() == "root's"
    info = (site.pfs / "rootfile").stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)
    assert site.total("received_bytes") == received, "no byte of theirs was taken in"


def test_mallory_cannot_read_overwrite_or_drain_alices_held_data(
    site: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    alice, mallory = users["alice"], users["mallory"]
    secret = site.pfs / "alice" / "secret.dat"
    writer = UserWriter(site, alice, "alice-held", secret)
    try:
        with writing(writer) as made:
            # alice's job in its phase, its data held on the nodes (not drained yet).
            assert wait_until(lambda: site.total("used") > 0, timeout=30), (
                "alice's data held"
            )
            held = site.total("used")
            local = str(site.scratch / "payload")
            got = []
            for node in range(len(site.nodes)):
                done = site.bbctl(mallory, node, "get", "alice/secret.dat", "0", "100")
                assert done.returncode != 0 and done.stdout == "", (
                    "no byte of alice's data"
                )
                got.append(done.stderr)
                done = site.bbctl(mallory, node, "put", "alice/secret.dat", local)
                assert done.returncode != 0 and "FORBIDDEN" in done.stderr, done
                site.bbctl(mallory, node, "drain", "alice/secret.dat")
                site.bbctl(mallory, node, "drain")  # "everything": only mallory's files
                done = site.bbctl(mallory, node, "put", "alice/new.dat", local)
                assert done.returncode != 0, done
                assert f"Permission denied (as uid {mallory.pw_uid})" in done.stderr, (
                    done
                )
            refused = f"belongs to uid {alice.pw_uid}, not to uid {mallory.pw_uid}"
            assert any(refused in e for e in got), got
            # Nothing drained for mallory: alice's file on the PFS is still empty, her data
            # still held, and her job kept writing.
            assert secret.stat().st_size == 0
            assert site.total("used") >= held
            written = made[0]
            assert wait_until(lambda: made[0] > written, timeout=10), (
                "alice still writes"
            )
        assert "refused" not in writer.close()
    finally:
        writer.kill()
    assert not (site.pfs / "alice" / "new.dat").exists()
    expected = expected_bytes(min(made[0], 20))
    # Every node drains its stripes once alice's phase ended: her bytes, all of them.
    assert wait_until(lambda: secret.read_bytes() == expected, timeout=60), (
        "drained whole"
    )
    assert secret.stat().st_uid == alice.pw_uid


def test_a_user_cannot_register_a_buffer_node(
    site: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    # mallory starts a buffer node of her own that says it is the first node (--advertise):
    # the scheduler refuses it and keeps its nodes.
    mallory = users["mallory"]
    before = [(b["address"], b["connected"]) for b in site.status()["buffers"]]
    own = Path(tempfile.mkdtemp(prefix="harmonia-attacks-node-"))
    os.chown(own, mallory.pw_uid, mallory.pw_gid)
    command = [str(BBD), "--device", str(own), "--pfs", str(own), "--schedd",
               site.schedd if site.hosts else f"unix:{site.schedd}",
               "--advertise", site.nodes[0]]  # fmt: skip
    if site.hosts:
        address = site.hosts.compute[1][1]
        command += ["--listen", f"{address}:7090", "--auth", "munge",
                    "--munge-socket", site.munge_socket]  # fmt: skip
    node = subprocess.Popen([*site.on(mallory, 1 if site.hosts else 0), *command],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=site.env())  # fmt: skip
    try:
        assert node.stderr is not None
        said = ""
        deadline = time.monotonic() + 20
        while "registration refused" not in said and time.monotonic() < deadline:
            said += node.stderr.readline()
        assert "registration refused" in said, said
        assert f"RegisterBuffer from uid {mallory.pw_uid}" in said, said
        assert [
            (b["address"], b["connected"]) for b in site.status()["buffers"]
        ] == before
    finally:
        node.kill()
        node.communicate(timeout=10)
        shutil.rmtree(own, ignore_errors=True)


def test_a_job_key_cannot_be_squatted(
    site: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    # mallory registers alice's next Slurm job key first; alice's job then runs coordinated
    # (a job of her own, its data through the buffers), not written through.
    alice, mallory = users["alice"], users["mallory"]
    key = "slurm-4242"
    squatter = UserWriter(site, mallory, key, site.pfs / "squat.dat")
    owner = None
    try:
        squatter.write(0)  # libharmonia registers at a process's first I/O
        # Registered, and out of its phase (a phase in progress keeps others off the buffers
        # whoever runs it: see test_a_phase_of_1_tib_leaves_buffers_for_alice).
        assert wait_until(
            lambda: site.jobs(key).get(mallory.pw_uid, {}).get("in_phase") == 0,
            timeout=20,
        ), site.status()["jobs"]
        received = site.total("received_bytes")
        # alice on the test bed's other compute host (the same host elsewhere).
        owner = UserWriter(site, alice, key, site.pfs / "alice" / "job.dat", host=1)
        with writing(owner, chunks=3):
            assert wait_until(lambda: site.total("received_bytes") >= received + 3_000_000,
                              timeout=30), "alice's data went through the buffers"  # fmt: skip
            jobs = site.jobs(key)
            assert set(jobs) == {alice.pw_uid, mallory.pw_uid}, jobs
            assert jobs[alice.pw_uid]["processes"] == 1, "nobody joined alice's job"
            assert jobs[alice.pw_uid]["directive"]["buffers"], (
                "alice's phase has buffers"
            )
        assert "refused" not in owner.close()
    finally:
        for writer in (squatter, owner):
            if writer is not None:
                writer.kill()


# --- harmonia up -------------------------------------------------------------------------------


def test_one_user_cannot_take_every_connection(
    up: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    # mallory and nobody each open 100 connections to a node and mallory 1,100 to the
    # scheduler: each gets its share (64 on a node, 1,024 on the scheduler) and no more; root
    # and alice are served meanwhile.
    alice, mallory = users["alice"], users["mallory"]
    pid = up.node_pids[0]
    threads, files = proc_status(pid, "Threads"), descriptors(pid)
    with (
        attacker(up, mallory, "hold", "node", up.nodes[0], "100") as taken,
        attacker(up, users["nobody"], "hold", "node", up.nodes[0], "100") as taken_too,
        attacker(
            up, mallory, "hold", "schedd", str(up.schedd_socket), "1100"
        ) as scheduler,
    ):
        # (A connection of hers that just ended may still count for a moment.)
        assert 60 <= taken["held"] <= 64 and taken["held"] + taken["refused"] == 100, (
            taken
        )
        assert (
            f"too many connections from uid {mallory.pw_uid} (at most 64 each)"
            in (taken["refusal"])
        )
        assert 60 <= taken_too["held"] <= 64, taken_too
        assert 1020 <= scheduler["held"] <= 1024, scheduler
        assert scheduler["held"] + scheduler["refused"] == 1100, scheduler
        # Bounds: two threads and one descriptor per connection served, a few more of its own.
        print(f"\nbbd with 128 connections held: {proc_status(pid, 'Threads')} threads "
              f"(idle {threads}), {descriptors(pid)} descriptors (idle {files})")  # fmt: skip
        assert proc_status(pid, "Threads") <= threads + 2 * 128 + 4
        assert descriptors(pid) <= files + 128 + 4
        assert up.bbctl(None, 0, "status").returncode == 0, "root is served"
        assert up.status()["buffers"], "root's harmonia-schedctl status answers"
        done = up.bbctl(
            alice, 0, "put", "alice/served.dat", str(up.scratch / "payload")
        )
        assert done.returncode == 0, done.stderr
        done = up.bbctl(alice, 0, "drain", "alice/served.dat")
        assert done.returncode == 0, done.stderr
        sent = (up.scratch / "payload").read_bytes()
        assert (up.pfs / "alice" / "served.dat").read_bytes() == sent
        assert up.status(alice)["buffers"], "alice's harmonia-schedctl status answers"


def test_users_together_leave_root_its_slots(up: Site) -> None:
    # Eight users (uids with no passwd entry: any uid a process can take) open 64 connections
    # each to one node, 512 in all: the last 16 of the node's 512 stay root's.
    pid = up.node_pids[1]
    colluders = [pwd.struct_passwd((f"u{k}", "x", 70001 + k, 70001 + k, "", "/", "/bin/false"))
                 for k in range(8)]  # fmt: skip
    with ExitStack() as stack:
        reports = [stack.enter_context(attacker(up, user, "hold", "node", up.nodes[1], "64"))
                   for user in colluders]  # fmt: skip
        assert 512 - 16 - 4 <= sum(r["held"] for r in reports) <= 512 - 16, reports
        refusals = [r["refusal"] for r in reports if r["refused"]]
        assert refusals and all("kept for root" in r for r in refusals), refusals
        assert proc_status(pid, "Threads") <= 2 * 512 + 8, (
            "bounded by --max-connections"
        )
        assert up.bbctl(None, 1, "status").returncode == 0, "root is served"


def test_alice_is_served_where_munged_runs(
    up: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    # A site's hosts run munged (Slurm's); alice's tools and job can reach it.
    alice = users["alice"]
    with munged("harmonia-attacks-site-munge-") as (munge_socket,):
        done = up.bbctl(alice, 0, "status", munge=munge_socket)
        assert done.returncode == 0, (
            f"harmonia-bbctl status as alice: {done.stderr.strip()}"
        )
        received = up.total("received_bytes")
        writer = UserWriter(up, alice, "alice-munged", up.pfs / "alice" / "munged.dat",
                            munge=munge_socket)  # fmt: skip
        try:
            with writing(writer, chunks=3):
                assert wait_until(lambda: up.total("received_bytes") >= received + 3_000_000,
                                  timeout=15), "alice's data through the buffers"  # fmt: skip
            err = writer.close()
            assert "refused" not in err and "writing through" not in err, err
        finally:
            writer.kill()


# CPU a node may spend to accept a connection and find out whose it is.
ACCEPT_CPU_SECONDS = 0.002


def test_connections_a_node_cannot_name_cost_it_little(
    up: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    # nobody holds 18,000 loopback sockets of its own (9,000 connections to itself, within one
    # process's descriptors, none to a daemon), then knocks: 40 connections to a node, each
    # closed at once (the table then lists it as closing, so the node does not find it).
    pid = up.node_pids[2]
    with attacker(up, users["nobody"], "sockets", "9000") as held:
        cpu = cpu_seconds(pid)
        subprocess.run([*up.on(users["nobody"]), PYTHON, str(ATTACKER), "knock", up.nodes[2],
                        "40"], capture_output=True, check=True, timeout=120)  # fmt: skip
        spent = (cpu_seconds(pid) - cpu) / 40
    print(f"\nnode CPU per connection it could not name, {held['sockets']} sockets held by "
          f"nobody: {spent * 1e3:.1f} ms")  # fmt: skip
    assert spent < ACCEPT_CPU_SECONDS, spent


def test_a_phase_of_1_tib_leaves_buffers_for_alice(
    up: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    # mallory's job declares a 1 TiB phase (harmonia_io_begin) and keeps it open; alice's job
    # then writes 3 MB: its phase must get buffers at once, its writes not wait.
    alice, mallory = users["alice"], users["mallory"]
    hog = subprocess.Popen(
        [*up.on(mallory), PYTHON, str(ATTACKER), "hog", str(up.pfs / "hog.dat")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=up.job_env("hog"),
    )  # fmt: skip
    owner = None
    try:
        assert hog.stdout is not None and hog.stdout.readline() == "in phase\n"
        assert wait_until(
            lambda: up.jobs("hog").get(mallory.pw_uid, {}).get("in_phase") == 1
        )
        # Bounded by the site: half of all buffers (--max-phase-share 0.5), not 1 TiB.
        reserved = sum(b["scheduled_used"] for b in up.status()["buffers"])
        assert reserved <= 0.5 * 4 * (256 << 20), reserved
        received = up.total("received_bytes")
        owner = UserWriter(up, alice, "alice-after-hog", up.pfs / "alice" / "after.dat")
        waits = []
        for k in range(3):
            started = time.monotonic()
            owner.write(k)
            waits.append(time.monotonic() - started)
        granted = up.jobs("alice-after-hog")[alice.pw_uid]["directive"]["buffers"]
        print(f"\nalice's writes beside a 1 TiB phase: {[f'{w:.2f} s' for w in waits]}, "
              f"buffers {granted}")  # fmt: skip
        assert granted, "alice's phase got buffers"
        assert max(waits) < 0.5, waits
        # libharmonia sends a stripe once it is whole, the last one at the close.
        err = owner.close()
        assert "refused" not in err and "writing through" not in err, err
        assert wait_until(
            lambda: up.total("received_bytes") >= received + 3_000_000, timeout=5
        ), "her data on the buffers"
    finally:
        for process in (hog, owner.process if owner else None):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate(timeout=10)


# What `harmonia up` writes in its run directory (for one node): what links are planted as.
VICTIM_FILES = ("env.sh", "schedd.log", "schedd.pid", "bb0.pid", "bb0.log", "bb0.port")


def _plant(directory: Path, victim: Path, mallory: pwd.struct_passwd) -> None:
    """mallory's links in `directory`: the run directory's files to root's `victim` files."""
    code = "; ".join(
        f"os.symlink({str(victim / name)!r}, {str(directory / name)!r})"
        for name in VICTIM_FILES
    )
    subprocess.run([*run_as(mallory), PYTHON, "-c", f"import os; {code}"], check=True)


@pytest.fixture
def victim() -> Iterator[Path]:
    """Root's own files, in a root-only directory: what planted links point at."""
    where = Path(tempfile.mkdtemp(prefix="harmonia-attacks-victim-"))
    for name in VICTIM_FILES:
        (where / name).write_text("root's\n")
    (where / "stage-in").mkdir()
    (where / "stage-in" / "precious").write_text("root's\n")
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _untouched(victim: Path) -> bool:
    return all(
        (victim / name).read_text() == "root's\n" and (victim / name).stat().st_uid == 0
        for name in VICTIM_FILES
    ) and [p.name for p in (victim / "stage-in").iterdir()] == ["precious"]


@pytest.mark.parametrize("made_by", ["mallory", "root, writable by all"])
def test_harmonia_up_refuses_a_dir_another_user_made(
    users: dict[str, pwd.struct_passwd], victim: Path, made_by: str
) -> None:
    # A run directory mallory made first (or one anyone may write in), holding her links to
    # root's files: root's `harmonia up --dir` refuses it by name and writes nothing.
    mallory = users["mallory"]
    directory = Path(tempfile.mkdtemp(prefix="harmonia-attacks-dir-"))
    try:
        if made_by == "mallory":
            os.chown(directory, mallory.pw_uid, mallory.pw_gid)
            directory.chmod(0o755)
            expected = f"belongs to uid {mallory.pw_uid}, not to this user"
        else:
            directory.chmod(0o1777)
            expected = "writable by others (mode 1777)"
        _plant(directory, victim, mallory)
        planted = sorted(p.name for p in directory.iterdir())
        done = subprocess.run(
            [str(HARMONIA), "up", "--buffers", "1", "--dir", str(directory)],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "HARMONIA_BUILD": str(BUILD)},
        )  # fmt: skip
        assert done.returncode == 2, done
        assert f"--dir {directory}: " in done.stderr and expected in done.stderr, (
            done.stderr
        )
        assert sorted(p.name for p in directory.iterdir()) == planted, (
            "nothing made there"
        )
        assert _untouched(victim), "nothing written through the links"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


SWAP = """
import os, sys, time
parent = sys.argv[1]
while not os.path.exists(parent + "/run/schedd.pid"):
    time.sleep(0.002)
os.rename(parent + "/run", parent + "/taken")  # root's directory, renamed in mallory's
os.rename(parent + "/mine", parent + "/run")
"""


def test_harmonia_up_in_another_users_directory_writes_nothing_of_hers(
    users: dict[str, pwd.struct_passwd], victim: Path
) -> None:
    # root runs `harmonia up --dir P/run`, P being mallory's: once root's run directory is
    # made (its schedd.pid written), mallory renames it and puts hers in its place, with her
    # node device a link to a root-only directory.
    mallory = users["mallory"]
    parent = Path(tempfile.mkdtemp(prefix="harmonia-attacks-parent-"))
    os.chown(parent, mallory.pw_uid, mallory.pw_gid)
    parent.chmod(0o755)
    code = (f"import os; os.makedirs({str(parent / 'mine' / 'pfs')!r}); "
            f"os.symlink({str(victim)!r}, {str(parent / 'mine' / 'bb0')!r})")  # fmt: skip
    subprocess.run([*run_as(mallory), PYTHON, "-c", code], check=True)
    swap = subprocess.Popen([*run_as(mallory), PYTHON, "-c", SWAP, str(parent)])
    up = subprocess.Popen(
        [str(HARMONIA), "up", "--buffers", "1", "--dir", str(parent / "run"), "--every", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HARMONIA_BUILD": str(BUILD)},
    )  # fmt: skip
    try:
        swap.wait(timeout=30)
        time.sleep(1)  # harmonia up goes on starting its node
    finally:
        up.send_signal(signal.SIGINT)
        up.communicate(timeout=60)
        if swap.poll() is None:
            swap.kill()
            swap.wait()
    try:
        made = sorted(p.name for p in victim.iterdir())
        assert _untouched(victim) and made == sorted(VICTIM_FILES + ("stage-in",)), (
            f"through her link: {made}, stage-in/ emptied"
        )
        hers = parent / "run"
        written = sorted(p.name for p in hers.iterdir() if p.lstat().st_uid == 0)
        assert written == [], f"root wrote {written} in mallory's directory"
    finally:
        shutil.rmtree(parent, ignore_errors=True)


# --- harmonia cluster up -----------------------------------------------------------------------


def test_a_squatted_slurm_key_does_not_hold_up_the_jobs_end(
    cluster: tuple[Site, SlurmCluster], users: dict[str, pwd.struct_passwd]
) -> None:
    # mallory registers slurm-77, alice's Slurm job, and stays: the burst-buffer hooks (run as
    # SlurmUser) set alice's job up and, after it ran, post_run must return at once.
    site, slurm = cluster
    alice, mallory = users["alice"], users["mallory"]
    squatter = UserWriter(site, mallory, "slurm-77", site.pfs / "squat77.dat")
    hooks = Hooks(slurm.hooks)
    ended = threading.Event()

    def post_run() -> None:
        try:
            hooks.post_run("77")
        finally:
            ended.set()

    try:
        squatter.write(0)
        assert wait_until(lambda: mallory.pw_uid in site.jobs("slurm-77"))
        hooks.setup(
            "77", str(alice.pw_uid), str(alice.pw_gid), "harmonia", "1", SLURM_REQUEST
        )
        threading.Thread(target=post_run, daemon=True).start()
        assert ended.wait(timeout=5), "post_run still waits for mallory's process"
    finally:
        squatter.kill()
        ended.wait(timeout=40)
        hooks.teardown("77", "false")


SLURM_REQUEST = json.dumps({"capacity": "1048576", "io": "0", "pool": "harmonia", "priority": 0,
                            "hint": "flushable", "access": "striped", "node_agent": False,
                            "ntasks": 1, "stage_in": {}, "stage_out": {}})  # fmt: skip


# --- hosts of their own ------------------------------------------------------------------------


def test_daemons_refuse_a_network_address_without_munge(
    bed: Site, tmp_path: Path
) -> None:
    # On a buffer host's own address, with the default authentication (the kernel's word,
    # which only covers peers on this host): neither daemon starts, and each names --auth munge.
    assert bed.hosts is not None
    namespace, address = bed.hosts.buffers[0]
    started = {
        "harmonia-bbd": [str(BBD), "--device", str(tmp_path), "--pfs", str(tmp_path),
                         "--listen", f"{address}:7095"],
        "harmonia-schedd": [str(SCHEDD.absolute()), "--socket", str(tmp_path / "s.sock"),
                            "--tcp", f"{address}:7096"],
    }  # fmt: skip
    for name, command in started.items():
        done = subprocess.run(["ip", "netns", "exec", namespace, *command],
                              capture_output=True, text=True, timeout=20, check=False)  # fmt: skip
        assert done.returncode != 0, (name, done)
        assert f"{address}:709" in done.stderr and "--auth munge" in done.stderr, (
            done.stderr
        )
    assert not (tmp_path / "s.sock").exists()
    listening = subprocess.run(["ip", "netns", "exec", namespace, "ss", "-ltn"],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert ":7095" not in listening and ":7096" not in listening, listening
    # Nor does a cluster on the test bed's hosts without munged.
    hosts = Hosts(bed.hosts.schedd, bed.hosts.buffers, bed.hosts.compute)
    with pytest.raises(ClusterError, match="need MUNGE"):
        BufferCluster(ClusterSettings(tmp_path / "run", buffers=1, hosts=hosts)).start()


# A node's resident memory may grow by this much at most while 16 clients that never
# authenticate push two 16 MiB writes each (512 MiB in all): a frame of 4 KiB at most is read
# from each, and no payload.
UNAUTHENTICATED_GROWTH_KIB = 16 * 1024


def test_unauthenticated_payloads_take_no_memory(
    bed: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    pid = bed.node_pids[0]
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "harmonia-bbd"
    received = bed.total("received_bytes")
    before = proc_status(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from now on
    done = subprocess.run(
        [*bed.on(users["nobody"]), PYTHON, str(ATTACKER), "push", bed.nodes[0], "16", "2"],
        capture_output=True, text=True, env=bed.env(credential=False), timeout=120, check=True,
    )  # fmt: skip
    results = json.loads(done.stdout)
    peak = proc_status(pid, "VmHWM")
    print(f"\nbbd, 16 unauthenticated clients pushing 2 x 16 MiB: RSS {before} KiB, peak "
          f"{peak} KiB (+{peak - before}), {sum(int(r['sent']) for r in results)} bytes taken "
          f"by the kernel")  # fmt: skip
    assert peak - before < UNAUTHENTICATED_GROWTH_KIB, (before, peak)
    answered = [r for r in results if r["code"] is not None]
    assert all(r["code"] == 7 and "no identity" in r["message"] for r in answered), (
        results
    )
    assert bed.total("received_bytes") == received
    assert not list(bed.pfs.glob("pushed*")), "nothing written"
    done = bed.bbctl(
        users["alice"], 0, "put", "alice/served.dat", str(bed.scratch / "payload")
    )
    assert done.returncode == 0, done.stderr


def test_unauthenticated_connections_from_a_host_leave_its_users_served(
    bed: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    alice = users["alice"]
    with attacker(bed, users["nobody"], "hold", "node", bed.nodes[0], "100",
                  credential=False) as taken:  # fmt: skip
        assert 60 <= taken["held"] <= 64 and "address" in taken["refusal"], taken
        # From the other compute host all are served.
        assert bed.bbctl(alice, 0, "status", host=1).returncode == 0
        assert bed.bbctl(None, 0, "status", host=1).returncode == 0
        # From the attacker's host too: alice (authenticated) and root.
        refused = {
            who: done.stderr.strip()
            for who, done in (("alice", bed.bbctl(alice, 0, "status")),
                              ("root", bed.bbctl(None, 0, "status")))
            if done.returncode != 0
        }  # fmt: skip
        assert not refused, f"refused on the attacker's host: {refused}"


def test_unauthenticated_connections_from_a_host_leave_its_jobs_registered(
    bed: Site, users: dict[str, pwd.struct_passwd]
) -> None:
    assert bed.hosts is not None
    alice = users["alice"]
    with attacker(bed, users["nobody"], "hold", "schedd", bed.hosts.schedd_address, "1100",
                  credential=False) as taken:  # fmt: skip
        assert 1020 <= taken["held"] <= 1024, taken
        owner = UserWriter(bed, alice, "alice-beside", bed.pfs / "alice" / "beside.dat")
        try:
            owner.write(0)
            assert wait_until(
                lambda: alice.pw_uid in bed.jobs("alice-beside"), timeout=5
            ), "alice's job on the attacker's host registered"
        finally:
            owner.kill()
