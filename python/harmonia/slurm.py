"""A Slurm cluster on this machine with Harmonia's buffer nodes behind Slurm's burst_buffer/lua
plugin (docs/slurm.md): munged with its own key and socket, `harmonia up` (harmonia-schedd and
the harmonia-bbd nodes), with --accounting MariaDB and slurmdbd, slurmctld, one or more slurmd
and a supervisor that restarts a daemon that died, each configured in a directory of its own.
Every daemon's PID is recorded and its PID file kept in the cluster's run/ directory, so `down`
and `restart` find daemons an admin restarted by hand too."""

import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from harmonia.simulator import find_tool
from harmonia.slurm_bb import RETENTION_HOURS
from harmonia.sockets import accepting

POOL = "harmonia"  # the burst-buffer pool Slurm accounts the buffer nodes' capacity in
STATE_FILE = "cluster.json"
# burst_buffer.lua and job_submit.lua, and the directives' reader both load (docs/slurm.md).
LUA_FILES = ("burst_buffer.lua", "job_submit.lua", "harmonia_bb.lua")
BB_TRES = "bb/lua"  # burst_buffer/lua's TRES: MiB of pool space per job (sacct's AllocTRES)
SUPERVISE_EVERY = 1.0  # seconds between the supervisor's looks at the daemons
# A daemon restarted this often within RESTART_WINDOW seconds is given up on (a slurmd's node
# is then drained with the reason).
RESTARTS_BEFORE_GIVING_UP = 3
RESTART_WINDOW = 60.0
DRAIN_REASON = "harmonia cluster:"  # starts the reasons the supervisor drains nodes with
# Processes of a cluster, by their name (/proc/PID/comm): what `down` stops when they name the
# cluster's directory, its slurm.conf or its marker.
DAEMONS = ("munged", "mariadbd", "slurmctld", "slurmd", "slurmdbd", "slurmstepd",
           "harmonia-schedd", "harmonia-bbd", "harmonia-agentd")  # fmt: skip
MARKER = "HARMONIA_CLUSTER"  # set in the environment of every daemon `up` starts


class SlurmClusterError(Exception):
    """The cluster cannot start or stop; the message says which part and why."""


@dataclass(frozen=True)
class SlurmSettings:
    directory: Path
    nodes: int = 2  # slurmd NodeNames
    cpus: int = 1  # CPUs of each node
    buffers: int = 4
    capacity: int = 1 << 30  # bytes per buffer node
    policy: str = "max-bandwidth"  # "datawarp": DataWarp mode
    controller_port: int = 0  # 0: a free one
    node_port: int = 0  # the first slurmd's; the others follow
    # A failed stage-in or stage-out keeps the job's buffer space claimed (held job, or job in
    # STAGE_OUT) until scancel; by default Slurm tears it down (Flags=TeardownFailure).
    keep_on_failure: bool = False
    retention_hours: float = RETENTION_HOURS  # files no stage-out moved are kept this long
    accounting: bool = False  # slurmdbd on MariaDB: sacct, burst-buffer use as a TRES

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", self.directory.absolute())

    @staticmethod
    def saved(data: dict[str, Any]) -> "SlurmSettings":
        """The settings cluster.json recorded (keys a later version added take defaults)."""
        known = {f.name for f in fields(SlurmSettings)}
        values = {k: v for k, v in data.items() if k in known}
        return SlurmSettings(**{**values, "directory": Path(values["directory"])})


def node_agent_script(agentd: str, agents_dir: Path) -> str:
    """harmonia-node-agent.sh (Prolog, TaskProlog, TaskEpilog and Epilog) with its two paths
    set: the agent's binary and the directory of the jobs' agent directories."""
    template = resources.files("harmonia").joinpath("data/slurm/harmonia-node-agent.sh")
    return (
        template.read_text()
        .replace('HARMONIA_AGENTD="/usr/local/bin/harmonia-agentd"', f'HARMONIA_AGENTD="{agentd}"')
        .replace('HARMONIA_AGENT_DIR="/run/harmonia-agents"', f'HARMONIA_AGENT_DIR="{agents_dir}"')
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) is not running.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def _proc(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


@dataclass
class ClusterState:
    """What `up` recorded in cluster.json: the settings, the ports, the tools the hooks call,
    and the PIDs of the daemons."""

    settings: dict[str, Any]
    controller_port: int
    node_ports: list[int]
    node_names: list[str]
    pids: dict[str, int]
    tools: dict[str, str]
    python: str
    buffers_dir: str
    db_port: int = 0  # MariaDB's (127.0.0.1), with --accounting
    dbd_port: int = 0  # slurmdbd's

    @staticmethod
    def load(directory: Path) -> "ClusterState | None":
        path = directory / STATE_FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        return ClusterState(**data)

    def save(self, directory: Path) -> None:
        path = directory / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    def daemons(self) -> list[str]:
        """Every daemon of the cluster, in the order they start (and stop reversed)."""
        names = ["munged", "harmonia"]
        if self.settings.get("accounting"):
            names += ["mariadb", "slurmdbd"]
        return [*names, "slurmctld", *(f"slurmd-{n}" for n in self.node_names), "supervisor"]


class SlurmCluster:
    """`up`, `restart`, `down` and `status` of the cluster in `settings.directory`, and the
    supervisor (`python -m harmonia.slurm DIR`) `up` starts."""

    def __init__(self, settings: SlurmSettings) -> None:
        self.settings = settings
        self.dir = settings.directory

    # Layout ------------------------------------------------------------------------------------
    @property
    def conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.dir / "munge" / "munge.socket"

    @property
    def buffers_dir(self) -> Path:
        return self.dir / "buffers"

    @property
    def pfs(self) -> Path:
        return self.buffers_dir / "pfs"

    @property
    def agents_dir(self) -> Path:
        """Where the Prolog makes each job's node-agent directory (docs/node-agent.md)."""
        return self.dir / "run" / "agents"

    @property
    def db_socket(self) -> Path:
        return self.dir / "run" / "mariadb.sock"

    def env(self) -> dict[str, str]:
        """What a shell needs for sbatch, squeue, scontrol and sacct to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def pid_file(self, name: str) -> Path | None:
        """Where the daemon `name` writes its PID (an admin's restart by hand writes it too)."""
        files = {"munged": "munged.pid", "mariadb": "mariadb.pid", "slurmdbd": "slurmdbd.pid",
                 "slurmctld": "slurmctld.pid", "supervisor": "supervisor.pid"}  # fmt: skip
        if name.startswith("slurmd-"):
            return self.dir / "run" / f"{name}.pid"
        return self.dir / "run" / files[name] if name in files else None

    def ours(self, pid: int) -> bool:
        """Whether `pid` runs a daemon of this cluster: one of DAEMONS (or a Python running
        harmonia) whose command line names the directory, or whose environment carries our
        marker or our SLURM_CONF (slurmstepd; a daemon an admin started with SLURM_CONF set).
        A recycled PID is someone else's and is left alone."""
        comm = _proc(pid, "comm").decode(errors="replace").strip()
        command = _proc(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace")
        if comm.startswith("python"):
            return "harmonia" in command and str(self.dir) in command
        if comm not in DAEMONS:
            return False
        if str(self.dir) in command:
            return True
        environ = _proc(pid, "environ").split(b"\0")
        return any(v in environ for v in (f"{MARKER}={self.dir}".encode(),
                                           f"SLURM_CONF={self.conf}".encode()))  # fmt: skip

    def running(self, state: ClusterState, name: str) -> int | None:
        """The PID `name` runs as: the recorded one or, after a restart by hand, its PID
        file's; None when neither runs."""
        candidates = [state.pids.get(name)]
        pid_file = self.pid_file(name)
        if pid_file is not None:
            try:
                candidates.append(int(pid_file.read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                pass
        for pid in candidates:
            if pid and pid_alive(pid) and self.ours(pid):
                return pid
        return None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Serializes what changes the daemons: up, restart, down and the supervisor's rounds."""
        (self.dir / "run").mkdir(parents=True, exist_ok=True)
        with open(self.dir / "run" / "cluster.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # Start ---------------------------------------------------------------------------------------
    def up(self, progress: Any = print) -> ClusterState:
        """Starts what is not running yet: everything in a new directory, the daemons that are
        not running in a cluster's (with its recorded ports); raises SlurmClusterError on a
        clash."""
        existing = ClusterState.load(self.dir)
        if existing is not None:
            alive = [name for name in existing.daemons() if self.running(existing, name)]
            if len(alive) == len(existing.daemons()):
                progress(f"already running in {self.dir}")
                return existing
            if alive:
                missing = [name for name in existing.daemons() if name not in alive]
                progress(f"partly running in {self.dir}: starting {', '.join(missing)}")
                return self.restart(missing, progress)
        # Everything that can refuse is checked before anything is written.
        self._check_directory()
        s = self.settings
        tools = {
            "libharmonia": str(find_tool("libharmonia.so", "HARMONIA_LIBRARY",
                                         "src/runtime/bbio/libharmonia.so").resolve()),
            "bbctl": str(find_tool("harmonia-bbctl", "HARMONIA_BBCTL",
                                   "src/bbd/harmonia-bbctl").resolve()),
            "schedctl": str(find_tool("harmonia-schedctl", "HARMONIA_SCHEDCTL",
                                      "src/schedd/harmonia-schedctl").resolve()),
            "agentd": str(find_tool("harmonia-agentd", "HARMONIA_AGENTD",
                                    "src/agent/harmonia-agentd").resolve()),
        }  # fmt: skip
        if s.accounting:
            for program, package in (("mariadbd", "mariadb-server"), ("slurmdbd", "slurmdbd")):
                if _program(program) is None:
                    raise SlurmClusterError(f"--accounting: {program} not found (Debian: "
                                            f"{package}; scripts/install-deps.sh)")  # fmt: skip
        taken = {0}
        controller_port = self._port(s.controller_port, "--controller-port", taken)
        node_ports = [self._port(s.node_port + k if s.node_port else 0, "--node-port", taken)
                      for k in range(s.nodes)]  # fmt: skip
        names = [f"hn{k}" for k in range(s.nodes)]
        self._make_layout(names)
        state = ClusterState(
            settings={k: str(v) if isinstance(v, Path) else v for k, v in asdict(s).items()},
            controller_port=controller_port, node_ports=node_ports, node_names=names,
            pids={}, tools=tools, python=sys.executable, buffers_dir=str(self.buffers_dir),
            db_port=self._port(0, "", taken) if s.accounting else 0,
            dbd_port=self._port(0, "", taken) if s.accounting else 0,
        )  # fmt: skip
        state.save(self.dir)
        self._write_config(state)
        failed: Exception | None = None
        with self._locked():
            try:
                for name in state.daemons():
                    state.pids[name] = self._start(state, name, progress)
                    state.save(self.dir)
                self._wait_nodes_idle(names)
            except (SlurmClusterError, OSError) as error:
                failed = error
        if failed is not None:  # down takes the lock itself
            self.down(state, progress=lambda _line: None)
            raise SlurmClusterError(str(failed)) from failed
        (self.dir / "env.sh").write_text(
            "".join(f"export {k}={v}\n" for k, v in self.env().items())
        )
        return state

    def _check_directory(self) -> None:
        if self.dir.exists() and not self.dir.is_dir():
            raise SlurmClusterError(f"--dir {self.dir}: exists and is not a directory")
        if self.dir.is_dir() and any(self.dir.iterdir()):
            ours = (self.dir / STATE_FILE).is_file()
            if not ours:
                raise SlurmClusterError(
                    f"--dir {self.dir}: not empty and not a Harmonia cluster's directory"
                )
        for sock in (self.munge_socket,):
            if sock.exists():
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    probe.connect(str(sock))
                    raise SlurmClusterError(f"{sock}: socket in use by another process")
                except (ConnectionRefusedError, FileNotFoundError):
                    sock.unlink(missing_ok=True)  # left by a daemon that died
                finally:
                    probe.close()

    def _make_layout(self, names: list[str]) -> None:
        for sub in ("etc", "munge", "state", "log", "run", "jobs"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket directory others may write to; jobs' users must reach it.
        self.dir.chmod(0o755)
        (self.dir / "munge").chmod(0o755)
        for name in names:
            (self.dir / "spool" / name).mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _port(given: int, option: str, taken: set[int]) -> int:
        """`given` (refused when in use), or a free port none of `taken`; added to `taken`."""
        if given:
            if port_taken(given) or given in taken:
                raise SlurmClusterError(f"{option} {given}: port already in use")
            port = given
        else:
            port = 0
            while port in taken:
                port = free_port()
        taken.add(port)
        return port

    def _write_config(self, state: ClusterState) -> None:
        s = SlurmSettings.saved(state.settings)
        d = self.dir
        host = socket.gethostname()
        nodes = "\n".join(
            f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={s.cpus} RealMemory=1000 State=UNKNOWN"
            for name, port in zip(state.node_names, state.node_ports, strict=True)
        )
        accounting = (
            f"AccountingStorageType=accounting_storage/slurmdbd\n"
            f"AccountingStorageHost=127.0.0.1\nAccountingStoragePort={state.dbd_port}\n"
            # The munged slurmdbd's clients authenticate with (not the system's default).
            f"AccountingStoragePass={self.munge_socket}\n"
            f"AccountingStorageTRES={BB_TRES}\n"
            if s.accounting
            else "AccountingStorageType=accounting_storage/none\n"
        )
        self.conf.write_text(f"""# Generated by `harmonia cluster up` for {d}, anew on every up.
ClusterName=harmonia
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={state.controller_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
LaunchParameters=use_interactive_step
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=30
JobCompType=jobcomp/none
{accounting}JobAcctGatherType=jobacct_gather/none
PlugStackConfig={d}/etc/plugstack.conf
Prolog={d}/etc/harmonia-node-agent.sh
TaskProlog={d}/etc/harmonia-node-agent.sh
TaskEpilog={d}/etc/harmonia-node-agent.sh
Epilog={d}/etc/harmonia-node-agent.sh
BurstBufferType=burst_buffer/lua
JobSubmitPlugins=lua
MinJobAge=30
InactiveLimit=0
KillWait=5
{nodes}
PartitionName=harmonia Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        (d / "etc" / "plugstack.conf").write_text("")
        (d / "etc" / "burst_buffer.conf").write_text(
            "# Generated by `harmonia cluster up`.\n"
            "Directive=BB_LUA\n"
            + ("" if s.keep_on_failure else "Flags=TeardownFailure\n")
            + "StageInTimeout=600\nStageOutTimeout=600\nOtherTimeout=300\n"
        )
        (d / "etc" / "harmonia-bb.json").write_text(json.dumps(self.hook_config(state), indent=2))
        for name in LUA_FILES:  # as a site installs them: unchanged, beside slurm.conf
            source = resources.files("harmonia").joinpath(f"data/slurm/{name}")
            (d / "etc" / name).write_text(source.read_text())
        script = d / "etc" / "harmonia-node-agent.sh"
        script.write_text(node_agent_script(state.tools["agentd"], self.agents_dir))
        script.chmod(0o755)
        if s.accounting:
            self._write_dbd_config(state)

    def hook_config(self, state: ClusterState) -> dict[str, Any]:
        """What the burst_buffer.lua hooks need (harmonia-bb.json)."""
        s = SlurmSettings.saved(state.settings)
        ports = sorted(int(p.read_text().strip()) for p in self.buffers_dir.glob("bb*.port"))
        return {
            "pool": POOL,
            "mode": "datawarp" if s.policy == "datawarp" else "harmonia",
            "policy": s.policy,
            "buffers": s.buffers,
            "capacity": s.capacity,
            "schedd": str(self.buffers_dir / "schedd.sock"),
            "pfs": str(self.pfs),
            "jobs": str(self.pfs / ".harmonia-jobs"),
            "state": str(self.dir / "jobs"),
            "nodes": [f"127.0.0.1:{p}" for p in ports],
            "node_ports_dir": str(self.buffers_dir),
            "python": state.python,
            "retention_hours": s.retention_hours,
            **state.tools,
        }

    def _spawn(self, command: list[str], log: str,
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:  # fmt: skip
        with (self.dir / "log" / log).open("ab") as out:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.dir / "run", env={**os.environ, **(env or {}), MARKER: str(self.dir)},
                start_new_session=True,  # outlives `up`; `down` stops it by its PID
            )  # fmt: skip

    def _start(self, state: ClusterState, name: str, progress: Any = print) -> int:
        """Starts the daemon `name`; its PID."""
        if name.startswith("slurmd-"):
            node = name.removeprefix("slurmd-")
            pid = self._start_node(node)
            port = state.node_ports[state.node_names.index(node)]
            progress(f"slurmd {node}: 127.0.0.1:{port}")
            return pid
        starters: dict[str, Callable[[ClusterState], tuple[int, str]]] = {
            "munged": self._start_munge, "harmonia": self._start_buffers,
            "mariadb": self._start_mariadb, "slurmdbd": self._start_slurmdbd,
            "slurmctld": self._start_controller, "supervisor": self._start_supervisor,
        }  # fmt: skip
        pid, said = starters[name](state)
        progress(f"{name}: {said}")
        return pid

    def _start_munge(self, _state: ClusterState) -> tuple[int, str]:
        key = self.dir / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        munged = _program("munged")
        if munged is None:
            raise SlurmClusterError("munged not found (Debian: munge; scripts/install-deps.sh)")
        self.munge_socket.unlink(missing_ok=True)
        process = self._spawn(
            [munged, "--foreground", "--force", f"--socket={self.munge_socket}",
             f"--key-file={key}", f"--pid-file={self.dir}/run/munged.pid",
             f"--seed-file={self.dir}/munge/munged.seed",
             f"--log-file={self.dir}/log/munged.log"],
            "munged.out",
        )  # fmt: skip
        self._wait(lambda: accepting(self.munge_socket), "munged did not start", process,
                   self.dir / "log" / "munged.log")  # fmt: skip
        return process.pid, f"socket {self.munge_socket}"

    def _start_buffers(self, state: ClusterState) -> tuple[int, str]:
        s = SlurmSettings.saved(state.settings)
        (self.buffers_dir / "env.sh").unlink(missing_ok=True)
        process = self._spawn(
            [sys.executable, "-m", "harmonia", "up", "--buffers", str(s.buffers),
             "--dir", str(self.buffers_dir), "--capacity", f"{s.capacity} B",
             "--policy", s.policy, "--every", "1"],
            "harmonia-up.log",
        )  # fmt: skip
        self._wait(lambda: (self.buffers_dir / "env.sh").exists(),
                   "harmonia up (harmonia-schedd and the buffer nodes) did not start",
                   process, self.dir / "log" / "harmonia-up.log", timeout=60)  # fmt: skip
        # The nodes' ports are known now.
        (self.dir / "etc" / "harmonia-bb.json").write_text(
            json.dumps(self.hook_config(state), indent=2)
        )
        return process.pid, (f"{s.buffers} buffer nodes of {s.capacity} bytes, policy "
                             f"{s.policy}, PFS {self.pfs}")  # fmt: skip

    def _start_controller(self, state: ClusterState) -> tuple[int, str]:
        slurmctld = _program("slurmctld")
        if slurmctld is None:
            raise SlurmClusterError("slurmctld not found (Debian: slurmctld)")
        process = self._spawn([slurmctld, "-D", "-f", str(self.conf)], "slurmctld.out")
        self._wait(lambda: "UP" in self._scontrol("ping").stdout,
                   "slurmctld did not start", process,
                   self.dir / "log" / "slurmctld.log", timeout=30)  # fmt: skip
        return process.pid, f"127.0.0.1:{state.controller_port}"

    def _start_node(self, name: str) -> int:
        slurmd = _program("slurmd")
        if slurmd is None:
            raise SlurmClusterError("slurmd not found (Debian: slurmd)")
        process = self._spawn([slurmd, "-D", "-N", name, "-f", str(self.conf)],
                              f"slurmd-{name}.out")  # fmt: skip
        time.sleep(0.2)
        if process.poll() is not None:
            log = self.dir / "log" / f"slurmd-{name}.log"
            raise SlurmClusterError(
                f"slurmd {name} exited ({process.returncode}): {_last_line(log)}"
            )
        return process.pid

    def _start_supervisor(self, _state: ClusterState) -> tuple[int, str]:
        process = self._spawn([sys.executable, "-m", "harmonia.slurm", str(self.dir)],
                              "supervisor.log")  # fmt: skip
        (self.dir / "run" / "supervisor.pid").write_text(f"{process.pid}\n")
        return process.pid, f"restarts a daemon that dies (log {self.dir}/log/supervisor.log)"

    # Accounting: MariaDB and slurmdbd in the cluster's directory ------------------------------
    def _db_password(self) -> str:
        path = self.dir / "etc" / "slurmdbd.password"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(24))
        return path.read_text().strip()

    def _write_dbd_config(self, state: ClusterState) -> None:
        """slurmdbd.conf beside slurm.conf, 0600 (it holds the database password)."""
        path = self.dir / "etc" / "slurmdbd.conf"
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"""# Generated by `harmonia cluster up --accounting`, anew on every up.
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={state.dbd_port}
SlurmUser=root
PidFile={self.dir}/run/slurmdbd.pid
LogFile={self.dir}/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={state.db_port}
StorageUser=slurm
StoragePass={self._db_password()}
StorageLoc=slurm_acct_db
""")

    def _sql(self, statement: str) -> subprocess.CompletedProcess[str]:
        """`statement` as MariaDB's root over the cluster's socket (unix_socket: OS root)."""
        return subprocess.run(
            [_program("mariadb") or "mariadb", "--no-defaults", f"--socket={self.db_socket}",
             "-u", "root", "-e", statement],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip

    def _start_mariadb(self, state: ClusterState) -> tuple[int, str]:
        data = self.dir / "db"
        if not (data / "mysql").is_dir():
            shutil.rmtree(data, ignore_errors=True)
            with (self.dir / "log" / "mariadb-install.log").open("ab") as out:
                done = subprocess.run(
                    [_program("mariadb-install-db") or "mariadb-install-db", "--no-defaults",
                     f"--datadir={data}", "--auth-root-authentication-method=socket",
                     "--skip-test-db", "--user=root"],
                    stdout=out, stderr=subprocess.STDOUT, check=False, timeout=300,
                )  # fmt: skip
            if done.returncode != 0:
                log = self.dir / "log" / "mariadb-install.log"
                raise SlurmClusterError(
                    f"mariadb-install-db failed ({done.returncode}); {_tail(log)}"
                )
        process = self._spawn(
            [str(_program("mariadbd")), "--no-defaults", f"--datadir={data}",
             f"--socket={self.db_socket}", f"--pid-file={self.dir}/run/mariadb.pid",
             f"--port={state.db_port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
             "--user=root", f"--log-error={self.dir}/log/mariadb.log",
             "--innodb-buffer-pool-size=32M"],
            "mariadb.out",
        )  # fmt: skip
        self._wait(lambda: self._sql("SELECT 1").returncode == 0, "MariaDB did not start",
                   process, self.dir / "log" / "mariadb.log", timeout=60)  # fmt: skip
        password = self._db_password()
        made = self._sql(
            "CREATE DATABASE IF NOT EXISTS slurm_acct_db; "
            f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
            f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        if made.returncode != 0:
            raise SlurmClusterError(f"MariaDB: cannot make slurmdbd's database and user: "
                                    f"{made.stderr.strip()}")  # fmt: skip
        return process.pid, f"127.0.0.1:{state.db_port}, data in {data}"

    def _start_slurmdbd(self, state: ClusterState) -> tuple[int, str]:
        process = self._spawn([str(_program("slurmdbd")), "-D"], "slurmdbd.out", self.env())
        self._wait(lambda: self._sacctmgr("show", "cluster").returncode == 0,
                   "slurmdbd did not start", process, self.dir / "log" / "slurmdbd.log",
                   timeout=60)  # fmt: skip
        added = self._sacctmgr("add", "cluster", "harmonia")
        if added.returncode != 0 and "already exists" not in added.stdout + added.stderr:
            raise SlurmClusterError(f"sacctmgr add cluster harmonia: {added.stderr.strip()}")
        return process.pid, f"127.0.0.1:{state.dbd_port}"

    def _sacctmgr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sacctmgr", "-i", *args], capture_output=True, text=True, check=False, timeout=30,
            env={**os.environ, **self.env()},
        )  # fmt: skip

    # Restart and supervise ----------------------------------------------------------------------
    def names(self, state: ClusterState, asked: list[str]) -> list[str]:
        """The daemons `asked` names, in start order: a daemon's name, "slurmd" for every
        slurmd, a node's name (hn0) for its slurmd; all of them when none is asked."""
        known = state.daemons()
        wanted = set()
        for name in asked:
            matches = [d for d in known if d == name or d == f"slurmd-{name}"
                       or (name == "slurmd" and d.startswith("slurmd-"))]  # fmt: skip
            if not matches:
                raise SlurmClusterError(f"{name}: not a daemon of this cluster (expected "
                                        f"{', '.join(known)}, slurmd or a node name)")  # fmt: skip
            wanted.update(matches)
        return [d for d in known if d in wanted or not asked]

    def restart(self, asked: list[str], progress: Any = print) -> ClusterState:
        """Stops (when running) and starts the daemons `asked` names (all when none), recording
        their PIDs; a node the supervisor drained is resumed once its slurmd runs."""
        state = ClusterState.load(self.dir)
        if state is None:
            raise SlurmClusterError(f"{self.dir}: no cluster (run `harmonia cluster up`)")
        targets = self.names(state, asked)
        with self._locked():
            for name in reversed(targets):
                self._stop(state, name, progress, [])
            for name in targets:
                state.pids[name] = self._start(state, name, progress)
                state.save(self.dir)
            nodes = [name.removeprefix("slurmd-") for name in targets if name.startswith("slurmd-")]
            if nodes and self.running(state, "slurmctld"):
                self._resume(nodes, progress)
        return state

    def _resume(self, nodes: list[str], progress: Any) -> None:
        """Resumes those of `nodes` the supervisor drained (an admin's own drain stays)."""
        for node in nodes:
            shown = self._scontrol("show", "node", node, "-o").stdout
            reason = shown.partition(" Reason=")[2]
            if "DRAIN" in shown and reason.startswith(DRAIN_REASON):
                self._scontrol("update", f"NodeName={node}", "State=RESUME")
                progress(f"{node}: resumed")

    def supervise(self) -> None:
        """The supervisor's loop, until `down`: every SUPERVISE_EVERY seconds, a daemon that is
        not running is started again (munged, MariaDB, slurmdbd, slurmctld, each slurmd; not
        `harmonia up`, whose nodes outlive it: `restart harmonia`); one restarted
        RESTARTS_BEFORE_GIVING_UP times within RESTART_WINDOW seconds is given up on, a slurmd's
        node drained with the reason. Each event is a line in log/supervisor.log."""
        restarts: dict[str, list[float]] = {}
        failures: dict[str, str] = {}
        given_up: set[str] = set()

        def note(line: str) -> None:
            print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}", flush=True)

        note(f"supervising {self.dir} (pid {os.getpid()})")
        while True:
            time.sleep(SUPERVISE_EVERY)
            _reap_children()
            with self._locked():
                state = ClusterState.load(self.dir)
                if state is None or state.pids.get("supervisor") != os.getpid():
                    note("no longer recorded as the cluster's supervisor; stopping")
                    return
                for name in state.daemons():
                    if name in ("harmonia", "supervisor"):
                        continue
                    if self.running(state, name):
                        given_up.discard(name)
                        continue
                    if name in given_up:
                        continue
                    now = time.monotonic()
                    recent = [t for t in restarts.get(name, []) if now - t < RESTART_WINDOW]
                    if len(recent) >= RESTARTS_BEFORE_GIVING_UP:
                        given_up.add(name)
                        note(self._give_up(state, name, failures.get(name, "it keeps exiting")))
                        continue
                    restarts[name] = [*recent, now]
                    try:
                        state.pids[name] = self._start(state, name, lambda _line: None)
                        state.save(self.dir)
                        note(f"{name} was not running; started again (pid {state.pids[name]})")
                    except (SlurmClusterError, OSError) as error:
                        failures[name] = str(error)
                        note(f"{name} was not running; starting it failed: {error}")

    def _give_up(self, state: ClusterState, name: str, why: str) -> str:
        """Stops restarting `name`; a slurmd's node is drained with the reason. The log line."""
        said = (f"{name}: {RESTARTS_BEFORE_GIVING_UP} restarts within {RESTART_WINDOW:.0f} s, "
                f"given up; last: {why}")  # fmt: skip
        if name.startswith("slurmd-") and self.running(state, "slurmctld"):
            node = name.removeprefix("slurmd-")
            reason = f"{DRAIN_REASON} slurmd exited and did not restart: {why}"[:250]
            done = self._scontrol("update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")
            said += f"; {node} drained" if done.returncode == 0 else f"; drain: {done.stderr}"
        return said

    def _wait_nodes_idle(self, names: list[str]) -> None:
        def ready() -> bool:
            done = self._scontrol("show", "nodes", "-o")
            states = [line for line in done.stdout.splitlines() if "NodeName=" in line]
            return len(states) == len(names) and all(
                "State=IDLE" in line or "State=MIXED" in line or "State=ALLOC" in line
                for line in states
            )

        self._wait(ready, "the slurmd nodes did not register with slurmctld", None,
                   self.dir / "log" / "slurmctld.log", timeout=60)  # fmt: skip

    def _scontrol(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, check=False, timeout=20,
            env={**os.environ, **self.env()},
        )  # fmt: skip

    @staticmethod
    def _wait(ready: Any, message: str, process: subprocess.Popen[bytes] | None,
              log: Path, timeout: float = 20) -> None:  # fmt: skip
        deadline = time.monotonic() + timeout
        while not ready():
            if process is not None and process.poll() is not None:
                raise SlurmClusterError(
                    f"{message}: it exited with {process.returncode}; {_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise SlurmClusterError(f"{message} within {timeout:.0f} s; {_tail(log)}")
            time.sleep(0.2)

    # Stop and look -------------------------------------------------------------------------------
    def down(self, state: ClusterState | None = None, progress: Any = print) -> list[str]:
        """Stops everything the cluster runs: the supervisor, the jobs (cancelled, their
        teardown given 30 s to drain), each daemon by its recorded PID or its PID file's (one
        restarted by hand too) in the reverse of start order (`harmonia up` drains every node to
        the PFS before it exits), then any process of the cluster still running (a slurmstepd
        whose slurmd was killed, and its job). Returns what could not be stopped cleanly."""
        state = state or ClusterState.load(self.dir)
        if state is None:
            progress(f"nothing recorded in {self.dir}")
            return []
        problems: list[str] = []
        self._stop(state, "supervisor", progress, problems)
        with self._locked():
            if self.running(state, "slurmctld"):
                self._end_jobs(progress)
            for name in reversed(state.daemons()):
                self._stop(state, name, progress, problems)
            self._stop_leftovers(progress)
            state.pids = {}
            state.save(self.dir)
        self.munge_socket.unlink(missing_ok=True)
        return problems

    def _stop(self, state: ClusterState, name: str, progress: Any, problems: list[str]) -> None:
        """Stops `name` (SIGTERM, then SIGKILL after a grace time, noted in `problems`); for
        `harmonia up`, also a node or scheduler it left running when it was killed."""
        pids = [self.running(state, name)]
        if name == "harmonia":
            pids += [_pid_in(p) for p in sorted(self.buffers_dir.glob("*.pid"))]
        for pid in dict.fromkeys(p for p in pids if p):
            if not (pid_alive(pid) and self.ours(pid)):
                continue  # not running, or gone with `harmonia up`
            os.kill(pid, signal.SIGTERM)
            # harmonia up drains every node to the PFS before it exits.
            if not _wait_gone(pid, 120 if name == "harmonia" else 15):
                os.kill(pid, signal.SIGKILL)
                problems.append(f"{name} (pid {pid}) did not stop on SIGTERM; killed")
                _wait_gone(pid, 5)
            progress(f"stopped {name} (pid {pid})")

    def _end_jobs(self, progress: Any) -> None:
        env = {**os.environ, **self.env()}
        queue = subprocess.run(["squeue", "-h", "-o", "%A"], capture_output=True, text=True,
                               check=False, timeout=20, env=env)  # fmt: skip
        jobs = queue.stdout.split()
        if not jobs:
            return
        subprocess.run(["scancel", *jobs], capture_output=True, check=False, timeout=20,
                       env=env)  # fmt: skip
        progress(f"cancelled {len(jobs)} job(s)")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = subprocess.run(["squeue", "-h"], capture_output=True, text=True, check=False,
                                  timeout=20, env=env)  # fmt: skip
            if left.returncode != 0 or not left.stdout.strip():
                return
            time.sleep(0.3)
        progress("jobs still ending after 30 s; stopping the daemons")

    def leftovers(self) -> dict[int, str]:
        """Processes of this cluster still running, and what they run: daemons (self.ours)
        and every process below a slurmstepd of ours (its job's), never this process or one
        above it."""
        mine = {os.getpid()}
        pid = os.getpid()
        while pid > 1:
            pid = _parent(pid)
            mine.add(pid)
        parents = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                parents[int(entry.name)] = _parent(int(entry.name))
        found = {p: _proc(p, "comm").decode(errors="replace").strip()
                 for p in parents if p not in mine and pid_alive(p) and self.ours(p)}  # fmt: skip
        grew = True
        while grew:
            grew = False
            for child, parent in parents.items():
                if (
                    parent in found
                    and child not in found
                    and child not in mine
                    and pid_alive(child)
                ):
                    found[child] = _proc(child, "comm").decode(errors="replace").strip()
                    grew = True
        return found

    def _stop_leftovers(self, progress: Any) -> None:
        found = self.leftovers()
        for pid in found:
            with _gone_already():
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(pid_alive(p) for p in found):
            time.sleep(0.1)
        for pid, comm in found.items():
            if pid_alive(pid):
                with _gone_already():
                    os.kill(pid, signal.SIGKILL)
            progress(f"stopped leftover {comm} (pid {pid})")

    def status(self) -> dict[str, Any]:
        """The daemons (running or not, and whether under the recorded PID or another one, as
        after a restart by hand) and each node's state in Slurm."""
        state = ClusterState.load(self.dir)
        if state is None:
            return {}
        daemons = {}
        for name in state.daemons():
            pid = self.running(state, name)
            daemons[name] = {"pid": pid or state.pids.get(name), "running": pid is not None,
                             "recorded": pid is None or pid == state.pids.get(name)}  # fmt: skip
        nodes: dict[str, dict[str, Any]] = {
            name: {"port": port} for name, port in zip(state.node_names, state.node_ports,
                                                       strict=True)
        }  # fmt: skip
        if daemons["slurmctld"]["running"]:
            for line in self._scontrol("show", "nodes", "-o").stdout.splitlines():
                fields_ = dict(f.split("=", 1) for f in line.split(" Reason=")[0].split()
                               if "=" in f)  # fmt: skip
                node = fields_.get("NodeName", "")
                if node in nodes:
                    nodes[node]["state"] = fields_.get("State", "")
                    nodes[node]["reason"] = line.partition(" Reason=")[2].rpartition(" [")[0]
        return {
            "directory": str(self.dir),
            "daemons": daemons,
            "controller_port": state.controller_port,
            "nodes": nodes,
            "policy": state.settings.get("policy"),
            "accounting": bool(state.settings.get("accounting")),
            "slurm_conf": str(self.conf),
        }


def _program(name: str) -> str | None:
    found = shutil.which(name) or f"/usr/sbin/{name}"
    return found if Path(found).exists() else None


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


@contextmanager
def _gone_already() -> Iterator[None]:
    try:
        yield
    except ProcessLookupError:
        pass


def _reap_children() -> None:
    """Collects the supervisor's exited children (daemons it restarted), so none stays a
    zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        try:  # reap it when it is our child (up and down in one process, as in the tests)
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return True


def _last_line(log: Path) -> str:
    """The log's last line without Slurm's [timestamp]."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"no log at {log}"
    if not lines:
        return f"{log} is empty"
    return lines[-1].partition("] ")[2] or lines[-1]


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"no log at {log}"
    return f"{log}: " + " | ".join(text[-lines:]) if text else f"{log} is empty"


if __name__ == "__main__":
    # The supervisor `up` starts: python -m harmonia.slurm DIR
    SlurmCluster(SlurmSettings(Path(sys.argv[1]))).supervise()
