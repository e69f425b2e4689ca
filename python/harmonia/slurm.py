"""A Slurm cluster on this machine with Harmonia's buffer nodes behind Slurm's burst_buffer/lua
plugin (docs/slurm.md): munged with its own key and socket, slurmctld, one or more slurmd, and
`harmonia up` (harmonia-schedd and the harmonia-bbd nodes), each configured in a directory of
its own and stopped by the PIDs recorded there."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from harmonia.simulator import find_tool
from harmonia.slurm_bb import RETENTION_HOURS

POOL = "harmonia"  # the burst-buffer pool Slurm accounts the buffer nodes' capacity in
STATE_FILE = "cluster.json"
# burst_buffer.lua and job_submit.lua, and the directives' reader both load (docs/slurm.md).
LUA_FILES = ("burst_buffer.lua", "job_submit.lua", "harmonia_bb.lua")


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", self.directory.absolute())


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


def _owns(pid: int, marker: str) -> bool:
    """Whether `pid` is still the process we started: its command line names our directory (a
    recycled PID is someone else's and is left alone)."""
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


@dataclass
class ClusterState:
    """What `up` recorded in cluster.json: the settings, the ports, the tools the hooks call,
    and the PIDs `down` stops."""

    settings: dict[str, Any]
    controller_port: int
    node_ports: list[int]
    node_names: list[str]
    pids: dict[str, int]
    tools: dict[str, str]
    python: str
    buffers_dir: str

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


class SlurmCluster:
    """`up`, `down` and `status` of the cluster in `settings.directory`."""

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

    def env(self) -> dict[str, str]:
        """What a shell needs for sbatch, squeue and scontrol to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    # Start ---------------------------------------------------------------------------------------
    def up(self, progress: Any = print) -> ClusterState:
        """Starts what is not running yet (idempotent); raises SlurmClusterError on a clash."""
        existing = ClusterState.load(self.dir)
        if existing is not None:
            alive = {name: pid for name, pid in existing.pids.items()
                     if pid_alive(pid) and _owns(pid, str(self.dir))}  # fmt: skip
            if alive and len(alive) == len(existing.pids):
                progress(f"already running in {self.dir}")
                return existing
            if alive:
                raise SlurmClusterError(
                    f"{self.dir}: partly running ({', '.join(sorted(alive))}); "
                    f"run `harmonia cluster down --dir {self.dir}` first"
                )
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
        controller_port = self._port(s.controller_port, "--controller-port")
        node_ports = []
        for k in range(s.nodes):
            given = s.node_port + k if s.node_port else 0
            port = self._port(given, "--node-port")
            while port in node_ports or port == controller_port:
                port = free_port()
            node_ports.append(port)
        names = [f"hn{k}" for k in range(s.nodes)]
        self._make_layout()
        state = ClusterState(
            settings={k: str(v) if isinstance(v, Path) else v for k, v in asdict(s).items()},
            controller_port=controller_port, node_ports=node_ports, node_names=names,
            pids={}, tools=tools, python=sys.executable, buffers_dir=str(self.buffers_dir),
        )  # fmt: skip
        state.save(self.dir)
        self._write_config(state)
        try:
            state.pids["munged"] = self._start_munge()
            state.save(self.dir)
            progress(f"munged: socket {self.munge_socket}")
            state.pids["harmonia"] = self._start_buffers()
            state.save(self.dir)
            progress(f"harmonia up: {s.buffers} buffer nodes of {s.capacity} bytes, "
                     f"policy {s.policy}, PFS {self.pfs}")  # fmt: skip
            state.pids["slurmctld"] = self._start_controller()
            state.save(self.dir)
            progress(f"slurmctld: 127.0.0.1:{controller_port}")
            for name, port in zip(names, node_ports, strict=True):
                state.pids[f"slurmd-{name}"] = self._start_node(name)
                state.save(self.dir)
                progress(f"slurmd {name}: 127.0.0.1:{port}")
            self._wait_nodes_idle(names)
        except (SlurmClusterError, OSError) as error:
            self.down(state, progress=lambda _line: None)
            raise SlurmClusterError(str(error)) from error
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

    def _make_layout(self) -> None:
        for sub in ("etc", "munge", "state", "log", "run", "jobs"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket directory others may write to; jobs' users must reach it.
        self.dir.chmod(0o755)
        (self.dir / "munge").chmod(0o755)
        for name in self._names():
            (self.dir / "spool" / name).mkdir(parents=True, exist_ok=True)

    def _names(self) -> list[str]:
        return [f"hn{k}" for k in range(self.settings.nodes)]

    @staticmethod
    def _port(given: int, option: str) -> int:
        if given:
            if port_taken(given):
                raise SlurmClusterError(f"{option} {given}: port already in use")
            return given
        return free_port()

    def _write_config(self, state: ClusterState) -> None:
        s = self.settings
        d = self.dir
        host = socket.gethostname()
        nodes = "\n".join(
            f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={s.cpus} RealMemory=1000 State=UNKNOWN"
            for name, port in zip(state.node_names, state.node_ports, strict=True)
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
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
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

    def hook_config(self, state: ClusterState) -> dict[str, Any]:
        """What the burst_buffer.lua hooks need (harmonia-bb.json)."""
        ports = sorted(int(p.read_text().strip()) for p in self.buffers_dir.glob("bb*.port"))
        return {
            "pool": POOL,
            "mode": "datawarp" if self.settings.policy == "datawarp" else "harmonia",
            "policy": self.settings.policy,
            "buffers": self.settings.buffers,
            "capacity": self.settings.capacity,
            "schedd": str(self.buffers_dir / "schedd.sock"),
            "pfs": str(self.pfs),
            "jobs": str(self.pfs / ".harmonia-jobs"),
            "state": str(self.dir / "jobs"),
            "nodes": [f"127.0.0.1:{p}" for p in ports],
            "node_ports_dir": str(self.buffers_dir),
            "python": state.python,
            "retention_hours": self.settings.retention_hours,
            **state.tools,
        }

    def _spawn(self, command: list[str], log: str) -> subprocess.Popen[bytes]:
        with (self.dir / "log" / log).open("ab") as out:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives `up`; `down` stops it by its PID
            )  # fmt: skip

    def _start_munge(self) -> int:
        key = self.dir / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
        munged = shutil.which("munged") or "/usr/sbin/munged"
        if not Path(munged).exists():
            raise SlurmClusterError("munged not found (Debian: munge; scripts/install-deps.sh)")
        process = self._spawn(
            [munged, "--foreground", "--force", f"--socket={self.munge_socket}",
             f"--key-file={key}", f"--pid-file={self.dir}/run/munged.pid",
             f"--seed-file={self.dir}/munge/munged.seed",
             f"--log-file={self.dir}/log/munged.log"],
            "munged.out",
        )  # fmt: skip
        self._wait(lambda: self.munge_socket.exists(), "munged did not start", process,
                   self.dir / "log" / "munged.log")  # fmt: skip
        return process.pid

    def _start_buffers(self) -> int:
        s = self.settings
        process = self._spawn(
            [sys.executable, "-m", "harmonia", "up", "--buffers", str(s.buffers),
             "--dir", str(self.buffers_dir), "--capacity", f"{s.capacity} B",
             "--policy", s.policy, "--every", "1"],
            "harmonia-up.log",
        )  # fmt: skip
        self._wait(lambda: (self.buffers_dir / "env.sh").exists(),
                   "harmonia up (harmonia-schedd and the buffer nodes) did not start",
                   process, self.dir / "log" / "harmonia-up.log", timeout=60)  # fmt: skip
        self._refresh_hook_config()
        return process.pid

    def _refresh_hook_config(self) -> None:
        state = ClusterState.load(self.dir)
        if state is not None:
            (self.dir / "etc" / "harmonia-bb.json").write_text(
                json.dumps(self.hook_config(state), indent=2)
            )

    def _start_controller(self) -> int:
        slurmctld = shutil.which("slurmctld") or "/usr/sbin/slurmctld"
        if not Path(slurmctld).exists():
            raise SlurmClusterError("slurmctld not found (Debian: slurmctld)")
        process = self._spawn([slurmctld, "-D", "-f", str(self.conf)], "slurmctld.out")
        self._wait(lambda: self._scontrol("ping").returncode == 0 and
                   "UP" in self._scontrol("ping").stdout,
                   "slurmctld did not start", process,
                   self.dir / "log" / "slurmctld.log", timeout=30)  # fmt: skip
        return process.pid

    def restart_controller(self) -> int:
        """Stops slurmctld (SIGTERM: it saves its state, as `systemctl restart` does) and starts
        it again; returns its new PID."""
        state = ClusterState.load(self.dir)
        if state is None:
            raise SlurmClusterError(f"{self.dir}: no cluster")
        old = state.pids.get("slurmctld")
        if old and pid_alive(old) and _owns(old, str(self.dir)):
            os.kill(old, signal.SIGTERM)
            if not _wait_gone(old, 30):
                raise SlurmClusterError(f"slurmctld (pid {old}) did not stop on SIGTERM")
        state.pids["slurmctld"] = self._start_controller()
        state.save(self.dir)
        return state.pids["slurmctld"]

    def _start_node(self, name: str) -> int:
        slurmd = shutil.which("slurmd") or "/usr/sbin/slurmd"
        if not Path(slurmd).exists():
            raise SlurmClusterError("slurmd not found (Debian: slurmd)")
        process = self._spawn([slurmd, "-D", "-N", name, "-f", str(self.conf)],
                              f"slurmd-{name}.out")  # fmt: skip
        time.sleep(0.2)
        if process.poll() is not None:
            raise SlurmClusterError(
                f"slurmd {name} exited ({process.returncode}); see {self.dir}/log/slurmd-{name}.*"
            )
        return process.pid

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
        """Stops exactly the recorded PIDs: the slurmd, slurmctld, then `harmonia up` (which
        drains its nodes to the PFS), then munged. Returns what could not be stopped."""
        state = state or ClusterState.load(self.dir)
        if state is None:
            progress(f"nothing recorded in {self.dir}")
            return []
        order = sorted(state.pids, key=lambda n: (not n.startswith("slurmd"), n != "slurmctld",
                                                  n != "harmonia", n))  # fmt: skip
        problems = []
        for name in order:
            pid = state.pids[name]
            if not (pid_alive(pid) and _owns(pid, str(self.dir))):
                continue
            os.kill(pid, signal.SIGTERM)
            # harmonia up drains every node to the PFS before it exits.
            if not _wait_gone(pid, 120 if name == "harmonia" else 15):
                os.kill(pid, signal.SIGKILL)
                problems.append(f"{name} (pid {pid}) did not stop on SIGTERM; killed")
                _wait_gone(pid, 5)
            progress(f"stopped {name} (pid {pid})")
        state.pids = {}
        state.save(self.dir)
        self.munge_socket.unlink(missing_ok=True)
        return problems

    def status(self) -> dict[str, Any]:
        state = ClusterState.load(self.dir)
        if state is None:
            return {}
        return {
            "directory": str(self.dir),
            "daemons": {
                name: {"pid": pid, "running": pid_alive(pid) and _owns(pid, str(self.dir))}
                for name, pid in state.pids.items()
            },  # fmt: skip
            "controller_port": state.controller_port,
            "nodes": dict(zip(state.node_names, state.node_ports, strict=True)),
            "policy": state.settings.get("policy"),
            "slurm_conf": str(self.conf),
        }


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


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"no log at {log}"
    return f"{log}: " + " | ".join(text[-lines:]) if text else f"{log} is empty"
