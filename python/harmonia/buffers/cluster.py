"""Buffer nodes on one machine (docs/buffer-nodes.md): a harmonia-schedd running a burst-buffer
policy and N harmonia-bbd nodes reporting to it, for `harmonia up`, the end-to-end experiment
(`harmonia reproduce buffers`) and the tests; and the check that files written by
`harmonia-bench --keep 1` came out whole."""

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harmonia.names import policy_names
from harmonia.simulator import SimulatorNotFound, find_tool
from harmonia.sockets import accepting


def device_directory(need: int, fallback: Path | None = None) -> tuple[Path, bool]:
    """A new directory for buffer nodes' devices: in RAM (/dev/shm, standing in for a node-local
    NVMe apart from the PFS) when that has `need` bytes free, else under `fallback` (the system's
    temporary directory when None); and whether it is in RAM."""
    shm = Path("/dev/shm")
    in_ram = shm.is_dir() and shutil.disk_usage(shm).free > need
    made = tempfile.mkdtemp(prefix="harmonia-devices-", dir=shm if in_ram else fallback)
    return Path(made), in_ram


class ClusterError(Exception):
    """A daemon did not start or a job failed; the message says which and why."""


#: Ports of the daemons on hosts of their own: each namespace is ours alone, so fixed ports
#: cannot clash (and a restarted daemon keeps its address).
SCHEDD_PORT, NODE_PORT = 7000, 7080


def open_run_directory(directory: Path) -> int:
    """A directory for daemons' sockets, logs, pid files and env.sh must be the caller's alone:
    made here if missing (mode 0755: users reach the sockets and env.sh, nobody else writes
    there), opened with no link followed, and checked through that descriptor, which it returns:
    refused by name when it is a symbolic link, not the caller's, or writable by others (another
    user could plant links for root to write through, or replace env.sh). Whoever may rename
    things above it (its parent another user's), the descriptor stays on the directory checked:
    everything is made and started through it (BufferCluster.run_path), never by its name."""
    made = False
    try:
        directory.mkdir(mode=0o755, parents=True)
        made = True
    except FileExistsError:
        pass
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ClusterError(
                f"{directory}: not a directory of its own (a symbolic link, or a file)"
            ) from error
        raise
    st = os.fstat(fd)
    uid = os.getuid()
    why = ""
    if st.st_uid != uid:
        why = f"belongs to uid {st.st_uid}, not to this user (uid {uid}): choose another --dir"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = (f"writable by others (mode {stat.S_IMODE(st.st_mode):04o}): choose another "
               f"--dir, or chmod go-w it")  # fmt: skip
    if why:
        os.close(fd)
        raise ClusterError(f"{directory}: {why}")
    if made:
        os.fchmod(fd, 0o755)  # whatever the umask: users reach pfs/, the socket and env.sh
    return fd


def write_private(directory_fd: int, name: str, text: str, mode: int = 0o644) -> None:
    """Writes `name` in the directory `directory_fd` anew, as a file this process makes
    (O_EXCL), never through a link."""
    try:
        os.unlink(name, dir_fd=directory_fd)
    except FileNotFoundError:
        pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, mode, dir_fd=directory_fd)
    with os.fdopen(fd, "w") as out:
        out.write(text)


@dataclass(frozen=True)
class Hosts:
    """Daemons and jobs on hosts of their own (scripts/testbed.py): each host a network
    namespace with its own address. The scheduler listens on its address (and on its Unix
    socket, for status), the nodes on theirs, and jobs run in the compute hosts' namespaces
    and reach the daemons by address. Every TCP connection authenticates with a credential of
    the munged at `munge_socket` (--auth munge): the daemons serve nobody whose user they do not
    know, and peers on other hosts can only say so with MUNGE."""

    schedd: tuple[str, str]  # namespace, address
    buffers: tuple[tuple[str, str], ...]
    compute: tuple[tuple[str, str], ...]
    munge_socket: str = ""

    @classmethod
    def from_testbed(cls, description: dict[str, Any], munge_socket: str = "") -> "Hosts":
        """From the JSON `scripts/testbed.py up` prints."""
        by_role: dict[str, list[tuple[str, str]]] = {"schedd": [], "bb": [], "c": []}
        for host in description["hosts"]:
            by_role[host["role"]].append((host["namespace"], host["address"]))
        if not by_role["schedd"] or not by_role["c"]:
            raise ClusterError("the test bed needs a scheduler host and a compute host")
        return cls(by_role["schedd"][0], tuple(by_role["bb"]), tuple(by_role["c"]), munge_socket)

    @staticmethod
    def run_in(namespace: str) -> list[str]:
        return ["ip", "netns", "exec", namespace]

    @property
    def schedd_address(self) -> str:
        return f"{self.schedd[1]}:{SCHEDD_PORT}"

    def auth(self) -> list[str]:
        if not self.munge_socket:
            raise ClusterError(
                "daemons on hosts of their own need MUNGE (their peers are on other hosts): "
                "start munged (scripts/munged.sh) and give its socket"
            )
        return ["--auth", "munge", "--munge-socket", self.munge_socket]


@dataclass(frozen=True)
class ClusterSettings:
    directory: Path  # holds pfs/, bb0/.., the socket, logs and the policy's record
    buffers: int = 4
    capacity: int = 256 << 20  # bytes per node
    policy: str = "max-bandwidth"
    write_bw: float = 500e6  # a node's device (bytes/s), from its profile
    interference_slope: float = 0.3
    flush_threshold: float = 0.5
    backup_flushers: int = 0
    phase_bytes: int = 64 << 20  # per process, for phases that declare no size
    stripe: int = 1 << 20
    drain_scheduler: str = "fifo"
    device_root: Path | None = None  # where the nodes' devices bb0/.. go (default: directory)
    sync: str = "none"  # when nodes acknowledge: none (page cache) or data (on the device)
    idle_timeout: float | None = None  # seconds before a node closes an idle connection
    # The share of all buffers one job's phase may ask for (fair admission); experiments that
    # compare with the simulator, which has no such bound, use 1.
    max_phase_share: float = 0.5
    hosts: Hosts | None = None  # hosts of their own (network namespaces); None: all on loopback

    def __post_init__(self) -> None:
        # Absolute: jobs run elsewhere, and libharmonia takes only absolute path prefixes.
        object.__setattr__(self, "directory", self.directory.absolute())
        if self.device_root is not None:
            object.__setattr__(self, "device_root", self.device_root.absolute())

    def device(self, k: int) -> Path:
        """Node k's device directory."""
        return (self.device_root or self.directory) / f"bb{k}"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "not started"
    return f"killed by signal {-code}" if code < 0 else f"exit {code}"


@dataclass
class BufferCluster:
    """The daemons, started by `start` and stopped by `stop` (or as a context manager)."""

    settings: ClusterSettings
    schedd: subprocess.Popen[str] | None = None
    nodes: list[subprocess.Popen[str] | None] = field(default_factory=list)
    run_fd: int = -1  # the run directory, opened and checked by start (open_run_directory)

    def run_path(self, name: str) -> Path:
        """`name` in the run directory as this process, and the daemons and tools it starts
        (they inherit run_fd), reach it: through the descriptor checked at start, whatever
        another user renames above the directory. Users' jobs get the directory's name."""
        return Path(f"/proc/self/fd/{self.run_fd}") / name

    def device_path(self, k: int) -> Path:
        """Node k's device directory as the daemons are given it (run_path when in the run
        directory)."""
        if self.settings.device_root is None:
            return self.run_path(f"bb{k}")
        return self.settings.device(k)

    @property
    def socket(self) -> Path:
        return self.settings.directory / "schedd.sock"

    @property
    def pfs(self) -> Path:
        return self.settings.directory / "pfs"

    def env(self) -> dict[str, str]:
        """What a job needs to write through the buffer nodes."""
        library = find_tool("libharmonia.so", "HARMONIA_LIBRARY", "src/runtime/bbio/libharmonia.so")
        hosts = self.settings.hosts
        return {
            "LD_PRELOAD": str(library.resolve()),
            "HARMONIA_SCHEDD": f"tcp:{hosts.schedd_address}" if hosts else str(self.socket),
            **(
                {"HARMONIA_MUNGE_SOCKET": hosts.munge_socket}
                if hosts and hosts.munge_socket
                else {}
            ),  # fmt: skip
            "HARMONIA_BUFFER_ROOT": str(self.pfs),
            # Only the PFS's files: writes elsewhere (MPI's session files) are no I/O phase.
            "HARMONIA_STAGE_INCLUDE": str(self.pfs),
        }

    def __enter__(self) -> "BufferCluster":
        try:
            self.start()
        except BaseException:
            self.stop()  # what did start (the scheduler, the first nodes) must not outlive it
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        s = self.settings
        if s.policy not in policy_names():
            raise ClusterError(f"policy {s.policy!r}: expected one of {', '.join(policy_names())}")
        if s.buffers < 1:
            raise ClusterError("buffers: at least 1")
        if s.hosts is not None and len(s.hosts.buffers) < s.buffers:
            raise ClusterError(f"buffers: {s.buffers}, but the test bed has "
                               f"{len(s.hosts.buffers)} buffer hosts")  # fmt: skip
        if self.run_fd < 0:
            self.run_fd = open_run_directory(s.directory)
        # The PFS is every user's, as /tmp is: each may make files there, none remove another's.
        self.run_path("pfs").mkdir(exist_ok=True)
        if os.getuid() == 0:
            self.run_path("pfs").chmod(0o1777)
        self.start_schedd()
        self.nodes = [None] * s.buffers
        for k in range(s.buffers):
            self.start_node(k)
        self._wait(
            lambda: all(b.get("connected", False) for b in self.status().get("buffers", [{}])),
            "the buffer nodes did not register with harmonia-schedd",
            self.schedd,
        )

    def start_schedd(self) -> None:
        """Starts the scheduler (again, after a crash: jobs and nodes register with it anew)."""
        s = self.settings
        schedd = find_tool("harmonia-schedd", "HARMONIA_SCHEDD_BIN", "src/schedd/harmonia-schedd")
        socket = self.run_path("schedd.sock")
        socket.unlink(missing_ok=True)
        where: list[str] = []
        if s.hosts is not None:
            where = [*s.hosts.run_in(s.hosts.schedd[0]), str(schedd),
                     "--tcp", s.hosts.schedd_address, *s.hosts.auth()]  # fmt: skip
        else:
            where = [str(schedd)]
        self.schedd = subprocess.Popen(
            [*where, "--socket", str(socket), "--tick", "0.01",
             "--buffers", str(s.buffers), "--policy", s.policy,
             "--buffer-capacity", str(s.capacity), "--buffer-write-bw", str(s.write_bw),
             "--interference-slope", str(s.interference_slope),
             "--flush-threshold", str(s.flush_threshold),
             "--backup-flushers", str(s.backup_flushers),
             "--phase-bytes", str(s.phase_bytes), "--stripe", str(s.stripe),
             "--max-phase-share", str(s.max_phase_share),
             "--record", str(self.run_path("record.json"))],
            stdout=subprocess.DEVNULL, stderr=self._log("schedd"), text=True,
            pass_fds=(self.run_fd,),
        )  # fmt: skip
        self._wait(lambda: accepting(socket), "harmonia-schedd did not start", self.schedd)
        self.write_file("schedd.pid", f"{self.schedd.pid}\n")

    def revive(self) -> list[str]:
        """Starts again every daemon that exited (a node recovers its log and keeps its slot;
        nodes and jobs register anew with a new scheduler). Returns one line per daemon that
        had exited, saying how, and whether it runs again."""
        said = []
        if self.schedd is None or self.schedd.poll() is not None:
            code = self.schedd.returncode if self.schedd is not None else None
            try:
                self.start_schedd()
                said.append(f"harmonia-schedd had exited ({_exit_text(code)}); restarted")
            except (ClusterError, SimulatorNotFound) as error:
                said.append(f"harmonia-schedd had exited ({_exit_text(code)}); {error}")
        for k, node in enumerate(self.nodes):
            if node is not None and node.poll() is None:
                continue
            code = node.returncode if node is not None else None
            try:
                self.start_node(k)
                said.append(f"harmonia-bbd {k} had exited ({_exit_text(code)}); restarted")
            except (ClusterError, SimulatorNotFound) as error:
                said.append(f"harmonia-bbd {k} had exited ({_exit_text(code)}); {error}")
        return said

    def running(self) -> list[bool]:
        """Whether each node's process is alive (the scheduler's view may lag behind)."""
        return [node is not None and node.poll() is None for node in self.nodes]

    def start_node(self, k: int) -> None:
        """Starts node k (again, after a crash: it recovers its log and keeps its slot)."""
        device = self.device_path(k)
        device.mkdir(mode=0o700, parents=True, exist_ok=True)
        bbd = find_tool("harmonia-bbd", "HARMONIA_BBD", "src/bbd/harmonia-bbd")
        port_file = self.run_path(f"bb{k}.port")
        hosts = self.settings.hosts
        where = hosts.run_in(hosts.buffers[k][0]) if hosts is not None else []
        socket = self.run_path("schedd.sock")
        schedd = f"tcp:{hosts.schedd_address}" if hosts is not None else f"unix:{socket}"
        command = [*where, str(bbd), "--device", str(device), "--pfs", str(self.run_path("pfs")),
                   "--capacity", str(self.settings.capacity), "--schedd", schedd,
                   "--drain-scheduler", self.settings.drain_scheduler,
                   "--sync", self.settings.sync]  # fmt: skip
        if hosts is not None:
            command += hosts.auth()
            self.write_file(port_file.name, f"{NODE_PORT}\n")
        if self.settings.idle_timeout is not None:
            command += ["--idle-timeout", str(self.settings.idle_timeout)]
        if port_file.exists():  # a restart keeps its address, hence its slot
            command += ["--listen", f"{self.node_host(k)}:{port_file.read_text().strip()}"]
        node = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self._log(f"bb{k}"), text=True,
            env={**os.environ, **({"HARMONIA_MUNGE_SOCKET": hosts.munge_socket}
                                  if hosts and hosts.munge_socket else {})},
            pass_fds=(self.run_fd,),
        )  # fmt: skip
        line = node.stdout.readline() if node.stdout else ""
        if not line.startswith("port="):
            node.kill()
            raise ClusterError(
                f"harmonia-bbd {k} did not start; see {self.settings.directory / f'bb{k}.log'}"
            )
        self.write_file(port_file.name, line.split("=", 1)[1].strip())
        self.write_file(f"bb{k}.pid", f"{node.pid}\n")
        self.nodes[k] = node

    def node_host(self, k: int) -> str:
        """The address node k listens on."""
        hosts = self.settings.hosts
        return hosts.buffers[k][1] if hosts is not None else "127.0.0.1"

    def kill_node(self, k: int) -> None:
        node = self.nodes[k]
        if node is not None:
            node.send_signal(signal.SIGKILL)
            node.wait()
            self.nodes[k] = None

    def status(self) -> dict[str, Any]:
        ctl = find_tool("harmonia-schedctl", "HARMONIA_SCHEDCTL", "src/schedd/harmonia-schedctl")
        done = subprocess.run(
            [str(ctl), "--address", str(self.run_path("schedd.sock")), "status", "--compact"],
            capture_output=True, text=True, check=False, timeout=10, pass_fds=(self.run_fd,),
        )  # fmt: skip
        if done.returncode != 0:
            return {}
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def buffer_states(self) -> list[dict[str, Any]]:
        """The nodes as the scheduler last heard from them (used, drained_bytes, draining...)."""
        buffers: list[dict[str, Any]] = self.status().get("buffers", [])
        return buffers

    def wait_drained(self, timeout: float = 120) -> None:
        """Until every node holds nothing (all data reached the PFS)."""
        self._wait(
            lambda: all(int(b.get("used", 0)) == 0 for b in self.buffer_states())
            and not self.holds_logs(),
            f"the buffer nodes did not drain within {timeout:.0f} s",
            None,
            timeout,
        )  # fmt: skip

    def holds_logs(self) -> bool:
        """Whether any node's device holds a log (data not drained yet)."""
        return any(any(self.device_path(k).glob("*.bblog")) for k in range(self.settings.buffers))

    def drain_all(self, timeout: float = 600) -> list[str]:
        """Asks every running node to drain all it holds, and waits; returns the failures."""
        failures = []
        for k, node in enumerate(self.nodes):
            if node is None:
                continue
            done = self._bbctl(k, "drain", timeout=timeout)
            if done.returncode != 0:
                failures.append(f"bb{k}: {done.stderr.strip() or done.stdout.strip()}")
        return failures

    def node_status(self, k: int) -> dict[str, Any]:
        """Node k's own state (`harmonia-bbctl status`: used, staged_bytes, staged_read_bytes,
        received_bytes...); ClusterError when it does not answer."""
        done = self._bbctl(k, "status", timeout=10)
        if done.returncode != 0:
            raise ClusterError(f"harmonia-bbctl status of node {k}: {done.stderr.strip()}")
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def node_total(self, counter: str) -> int:
        """A counter of node_status summed over the nodes."""
        return sum(int(self.node_status(k)[counter]) for k in range(self.settings.buffers))

    def _bbctl(self, k: int, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """harmonia-bbctl against node k, from a compute host of the test bed if there is one."""
        ctl = find_tool("harmonia-bbctl", "HARMONIA_BBCTL", "src/bbd/harmonia-bbctl")
        port = self.run_path(f"bb{k}.port").read_text().strip()
        hosts = self.settings.hosts
        where = hosts.run_in(hosts.compute[0][0]) if hosts is not None else []
        return subprocess.run(
            [*where, str(ctl), "--node", f"{self.node_host(k)}:{port}", *args],
            capture_output=True, text=True, check=False, timeout=timeout, env=os.environ
            | ({"HARMONIA_MUNGE_SOCKET": hosts.munge_socket} if hosts else {}),
        )  # fmt: skip

    def stop(self) -> dict[str, Any]:
        """Stops everything; returns the policy's record (per-job waits and completions)."""
        for k in range(len(self.nodes)):
            node = self.nodes[k]
            if node is not None:
                node.send_signal(signal.SIGTERM)
                node.wait(timeout=10)
                self.nodes[k] = None
        if self.schedd is not None and self.schedd.poll() is None:
            self.schedd.send_signal(signal.SIGTERM)
            self.schedd.wait(timeout=10)
        self.schedd = None
        record: dict[str, Any] = {}
        if self.run_fd >= 0:
            if self.run_path("record.json").exists():
                record = json.loads(self.run_path("record.json").read_text())
            os.close(self.run_fd)
            self.run_fd = -1
        return record

    def _log(self, name: str) -> Any:
        fd = os.open(f"{name}.log",
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o640, dir_fd=self.run_fd)  # fmt: skip
        return os.fdopen(fd, "a")

    def write_file(self, name: str, text: str) -> None:
        """Writes the run directory's file `name` anew: never through a link, never into a file
        someone else made (the directory is the caller's alone: open_run_directory)."""
        write_private(self.run_fd, name, text)

    @staticmethod
    def _wait(
        ready: Any, message: str, process: subprocess.Popen[str] | None, timeout: float = 15
    ) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if process is not None and process.poll() is not None:
                raise ClusterError(f"{message}: it exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise ClusterError(message)
            time.sleep(0.05)


@dataclass(frozen=True)
class JobSpec:
    """A VPIC-like job: `ranks` processes, `steps` time steps of `compute` seconds and then
    `requests` writes of `size` bytes each into a file per rank and step."""

    ranks: int = 2
    steps: int = 4
    requests: int = 4
    size: int = 1 << 20
    compute: float = 0.3

    @property
    def bytes_per_rank(self) -> int:
        return self.steps * self.requests * self.size


def run_jobs(
    cluster: BufferCluster, jobs: int, spec: JobSpec, start_slack: float = 3.0
) -> list[dict[str, Any]]:
    """`jobs` jobs as separate mpiruns under libharmonia against `cluster`, started at one
    wall-clock time; returns harmonia-bench's result for each."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise ClusterError("mpirun not found (Debian: openmpi-bin)")
    bench = find_tool("harmonia-bench", "HARMONIA_BENCH", "src/tools/harmonia-bench")
    start_at = time.time() + start_slack
    sessions = Path(tempfile.mkdtemp(prefix="harmonia-buffers-mpi-"))
    launched = []
    try:
        for k in range(jobs):
            (sessions / str(k)).mkdir()
            exported = {**cluster.env(), "HARMONIA_JOB": f"job{k}",
                        # What DataWarp reserves for the job: all it will write.
                        "HARMONIA_BYTES_PER_PROCESS": str(spec.bytes_per_rank)}  # fmt: skip
            hosts = cluster.settings.hosts
            # On a test bed, jobs take the compute hosts in turn.
            where = hosts.run_in(hosts.compute[k % len(hosts.compute)][0]) if hosts else []
            command = [*where, mpirun, "--allow-run-as-root", "--oversubscribe",
                       "-np", str(spec.ranks),
                       "--mca", "orte_tmpdir_base", str(sessions / str(k))]  # fmt: skip
            for name, value in exported.items():
                command += ["-x", f"{name}={value}"]
            command += [str(bench), "--dir", str(cluster.pfs), "--apps", "1", "--first-app", str(k),
                        "--requests", str(spec.requests), "--size", str(spec.size),
                        "--steps", str(spec.steps), "--compute", str(spec.compute),
                        "--keep", "1", "--sync", "none",
                        "--start-at", f"{start_at:.6f}"]  # fmt: skip
            launched.append(
                subprocess.Popen(
                    command,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env={**os.environ, **exported},
                )  # fmt: skip
            )
        results = []
        for k, job in enumerate(launched):
            out, err = job.communicate(timeout=900)
            if job.returncode != 0:
                raise ClusterError(f"job{k} failed (exit {job.returncode}): {err.strip()[-2000:]}")
            results.append(json.loads(out))
        return results
    finally:
        for job in launched:
            if job.poll() is None:
                job.kill()
        shutil.rmtree(sessions, ignore_errors=True)


def verify(pfs: Path, jobs: int, spec: JobSpec) -> list[str]:
    """Problems with the files `run_jobs` wrote (empty: every byte is where it was written)."""
    problems: list[str] = []
    for label in range(jobs):
        for rank in range(spec.ranks):
            for step in range(spec.steps):
                name = (f"app{label}-rank{rank}.dat" if spec.steps == 1
                        else f"app{label}-rank{rank}-step{step}.dat")  # fmt: skip
                path = pfs / name
                if not path.is_file():
                    problems.append(f"{name}: missing")
                    continue
                data = path.read_bytes()
                if len(data) != spec.requests * spec.size:
                    problems.append(
                        f"{name}: {len(data)} bytes, expected {spec.requests * spec.size}"
                    )
                    continue
                for r in range(spec.requests):
                    chunk = data[r * spec.size : (r + 1) * spec.size]
                    head = f"{label}:{rank}:{step}:{r};".encode()
                    body = chunk[64:]
                    if (
                        chunk[: len(head)] != head
                        or chunk[len(head) : 64].strip(b".")
                        or body.count(body[:1]) != len(body)
                    ):
                        problems.append(f"{name}: request {r} is not what was written")
                        break
    return problems
