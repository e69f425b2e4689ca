"""Attacks on the deployments as a site gets them (docs/security.md, "Deployment modes"), by real
users the tests make (alice, whose job and files are attacked; mallory) and by `nobody`:
(a) `harmonia up`'s daemons (BufferCluster's defaults, as root), (b) `harmonia cluster up`
(Slurm, munged, the same daemons), (c) daemons on hosts of their own (network namespaces,
MUNGE). Each attack is refused with a clear error, nothing is read or written for the attacker,
and alice is served throughout. A test marked xfail names a defect that still lets an attack
through: it fails for that reason until the defect is fixed. The Slurm setup hook with a
planted link is attacked in test_slurm_hooks.py."""

import json
import os
import pwd
import shutil
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
from harmonia.buffers import BufferCluster, ClusterError, ClusterSettings, Hosts
from harmonia.slurm import SlurmSettings
from munge_support import munged
from proc_support import descriptors, proc_status
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
        owner = UserWriter(site, alice, key, site.pfs / "alice" / "job.dat", host=1 % 2)
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
        assert (taken["held"], taken["refused"]) == (64, 36), taken
        assert (
            f"too many connections from uid {mallory.pw_uid} (at most 64 each)"
            in (taken["refusal"])
        )
        assert taken_too["held"] == 64, taken_too
        assert (scheduler["held"], scheduler["refused"]) == (1024, 76), scheduler
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
        done = up.bbctl(alice, 0, "get", "alice/served.dat", "0", "17")
        assert done.returncode == 0 and done.stdout == "mallory was here\n", done
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
        assert sum(r["held"] for r in reports) == 512 - 16, reports
        refusals = [r["refusal"] for r in reports if r["refused"]]
        assert refusals and all("kept for root" in r for r in refusals), refusals
        assert proc_status(pid, "Threads") <= 2 * 512 + 8, (
            "bounded by --max-connections"
        )
        assert up.bbctl(None, 1, "status").returncode == 0, "root is served"


# What `harmonia up` writes in its run directory (for one node): what links are planted as.
VICTIM_FILES = ("env.sh", "schedd.log", "schedd.pid", "bb0.pid", "bb0.log", "bb0.port")


def _plant(directory: Path, victim: Path, mallory: pwd.struct_passwd) -> None:
    """mallory's links in `directory`: the run directory's files to root's `victim` files."""
    code = "; ".join(
        f"os.symlink({str(victim / name)!r}, {str(directory / name)!r})"
        for name in (
            "env.sh",
            "schedd.log",
            "schedd.pid",
            "bb0.pid",
            "bb0.log",
            "bb0.port",
        )
    )
    subprocess.run([*run_as(mallory), PYTHON, "-c", f"import os; {code}"], check=True)


@pytest.fixture
def victim() -> Iterator[Path]:
    """Root's own files, in a root-only directory: what planted links point at."""
    where = Path(tempfile.mkdtemp(prefix="harmonia-attacks-victim-"))
    for name in (
        "env.sh",
        "schedd.log",
        "schedd.pid",
        "bb0.pid",
        "bb0.log",
        "bb0.port",
    ):
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
        for name in (
            "env.sh",
            "schedd.log",
            "schedd.pid",
            "bb0.pid",
            "bb0.log",
            "bb0.port",
        )
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
