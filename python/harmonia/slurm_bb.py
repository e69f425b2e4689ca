"""The hooks behind burst_buffer.lua (docs/slurm.md): `python -m harmonia.slurm_bb CONFIG HOOK
ARGS...`, run by slurmctld as SlurmUser. Each prints what Slurm shows and exits non-zero on
failure. Kept free of heavy imports: job_process, paths and pools run while slurmctld waits.

A job's buffer space is `<pfs>/.harmonia-jobs/<job id>` ($HARMONIA_BB in the job): writes there
go through libharmonia to the buffer nodes under the job's key (`slurm-<id>`, which libharmonia
takes from SLURM_JOB_ID). Stage-in copies through the same path before the job starts; stage-out
drains the job's files from every node to the PFS and then moves them to their destinations."""

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DIRECTIVE = "#BB_LUA"
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
JOBDW_KEYS = ("pool", "capacity", "io", "access", "priority", "hint", "node_agent")
STAGE_KEYS = ("source", "destination", "type")
BB_VARIABLE = "$HARMONIA_BB"
# The stage-in copier, run under libharmonia: reads the source, writes the target in 4 MiB pieces.
_COPY = """
import os, sys
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
src = os.open(sys.argv[1], os.O_RDONLY)
dst = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
copied = 0
while chunk := os.read(src, 4 << 20):
    view = memoryview(chunk)
    while view:
        n = os.write(dst, view)
        view, copied = view[n:], copied + n
os.close(dst)
print(copied)
"""


class HookError(Exception):
    """A hook failed; the message is what Slurm shows."""


@dataclass
class Stage:
    source: str
    destination: str
    type: str  # file or directory


@dataclass
class Request:
    """A job's directives."""

    capacity: int = 0  # reserved through Slurm for the whole job; 0: none
    io: int = 0  # the job's declared output, for the policy's shares; 0: the capacity
    pool: str = ""
    priority: int = 0
    hint: str = "flushable"
    access: str = "striped"
    node_agent: bool = False  # one harmonia-agentd per node speaks for the ranks
    ntasks: int = 1
    stage_in: list[Stage] = field(default_factory=list)
    stage_out: list[Stage] = field(default_factory=list)


def parse_size(text: str) -> int:
    """Slurm's capacity syntax: a whole number of bytes with an optional K, M, G, T or P
    (binary) suffix, as burst_buffer/lua itself reads it."""
    match = re.fullmatch(r"(\d+)([KMGTP]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if not match:
        raise ValueError(f"{text!r} is not a size (e.g. 512M, 2G, 1048576)")
    return int(match.group(1)) * UNITS[match.group(2).upper()]


def _inside_bb(path: str, where: str) -> str:
    """A path in the job's buffer space ($HARMONIA_BB/...), as a relative path."""
    if not path.startswith(BB_VARIABLE + "/"):
        raise ValueError(f"{where}={path}: must be inside the job's buffers, {BB_VARIABLE}/...")
    relative = path[len(BB_VARIABLE) + 1 :].strip("/")
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{where}={path}: needs a plain relative path after {BB_VARIABLE}/")
    return relative


def parse_directives(script: str, config: dict[str, Any]) -> Request:
    """The job script's #BB_LUA lines (before its first command, like #SBATCH); raises
    HookError naming the line and the key at fault."""
    request = Request()
    seen_jobdw = False
    total = int(config["capacity"]) * int(config["buffers"])
    for number, raw in enumerate(script.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("#SBATCH"):
            tasks = re.search(r"(?:-n\s*|--ntasks[= ])(\d+)", line)
            if tasks:
                request.ntasks = max(1, int(tasks.group(1)))
        if not line.startswith(DIRECTIVE):
            if line and not line.startswith("#"):
                break
            continue
        where = f"line {number}: {line}"
        words = line[len(DIRECTIVE) :].split()
        if not words:
            raise HookError(f"{where}: expected jobdw, stage_in or stage_out")
        verb, pairs = words[0], {}
        for word in words[1:]:
            key, equals, value = word.partition("=")
            if not equals or not value:
                raise HookError(f"{where}: {word!r}: expected key=value")
            if key in pairs:
                raise HookError(f"{where}: {key} given twice")
            pairs[key] = value
        try:
            if verb == "jobdw":
                if seen_jobdw:
                    raise ValueError("a second jobdw: one per job")
                seen_jobdw = True
                _jobdw(request, pairs, total, config)
            elif verb in ("stage_in", "stage_out"):
                _stage(request, verb, pairs)
            else:
                raise ValueError(
                    f"unknown directive {verb!r} (expected jobdw, stage_in, stage_out)"
                )
        except ValueError as error:
            raise HookError(f"{where}: {error}") from None
    if (request.stage_in or request.stage_out) and not seen_jobdw:
        raise HookError(f"{DIRECTIVE} stage_in/stage_out need a `{DIRECTIVE} jobdw` line")
    return request


def _jobdw(request: Request, pairs: dict[str, str], total: int, config: dict[str, Any]) -> None:
    for key in pairs:
        if key not in JOBDW_KEYS:
            raise ValueError(f"unknown key {key!r} (expected {', '.join(JOBDW_KEYS)})")
    # DataWarp reserves for the whole job, so it needs the capacity; Harmonia's policies grant
    # phases as they come, so there a job may only declare its output (io=) and Slurm then
    # holds none of the pool for it.
    if "capacity" not in pairs and (config["mode"] == "datawarp" or "io" not in pairs):
        needs = "in DataWarp mode" if config["mode"] == "datawarp" else "(or io=SIZE)"
        raise ValueError(f"capacity=SIZE is required {needs}")
    for key in ("capacity", "io"):
        if key not in pairs:
            continue
        text = pairs[key]
        if text.startswith("-"):
            raise ValueError(f"{key}={text}: must not be negative")
        size = parse_size(text)
        if size <= 0:
            raise ValueError(f"{key}={text}: must be more than 0 bytes")
        if key == "capacity" and size > total:
            raise ValueError(f"{key}={text}: more than the {total} bytes all buffer nodes hold")
        setattr(request, key, size)
    request.pool = pairs.get("pool", "")
    if request.capacity and request.pool != config["pool"]:
        raise ValueError(f"pool={request.pool or '(missing)'}: expected pool={config['pool']}")
    if not request.capacity and "pool" in pairs:
        raise ValueError("pool= needs capacity=SIZE (Slurm accounts a pool by capacity)")
    access = pairs.get("access", "striped")
    if access != "striped":
        raise ValueError(
            f"access={access}: only striped (one namespace shared by the job's nodes) is offered"
        )
    try:
        request.priority = int(pairs.get("priority", "0"))
    except ValueError:
        raise ValueError(f"priority={pairs['priority']}: expected an integer") from None
    if not -1000000 <= request.priority <= 1000000:
        raise ValueError(f"priority={request.priority}: expected -1000000 to 1000000")
    request.hint = pairs.get("hint", "flushable")
    if request.hint not in ("cached", "flushable"):
        raise ValueError(f"hint={request.hint}: expected cached or flushable")
    agent = pairs.get("node_agent", "no")
    if agent not in ("yes", "no"):
        raise ValueError(f"node_agent={agent}: expected yes or no")
    request.node_agent = agent == "yes"


def _stage(request: Request, verb: str, pairs: dict[str, str]) -> None:
    for key in pairs:
        if key not in STAGE_KEYS:
            raise ValueError(f"unknown key {key!r} (expected {', '.join(STAGE_KEYS)})")
    for key in ("source", "destination"):
        if key not in pairs:
            raise ValueError(f"{key}=PATH is required")
    for key in ("source", "destination"):
        rest = pairs[key].removeprefix(BB_VARIABLE + "/")
        if "$" in rest:
            raise ValueError(f"{key}={pairs[key]}: variables are not expanded here "
                             f"(only a leading {BB_VARIABLE}/)")  # fmt: skip
    kind = pairs.get("type", "file")
    if kind not in ("file", "directory"):
        raise ValueError(f"type={kind}: expected file or directory")
    if verb == "stage_in":
        source = pairs["source"]
        if not source.startswith("/"):
            raise ValueError(f"source={source}: must be an absolute path")
        if kind == "file" and not Path(source).is_file():
            raise ValueError(f"source={source}: no such file")
        if kind == "directory" and not Path(source).is_dir():
            raise ValueError(f"source={source}: no such directory")
        _inside_bb(pairs["destination"], "destination")
        request.stage_in.append(Stage(source, pairs["destination"], kind))
    else:
        destination = pairs["destination"]
        if not destination.startswith("/"):
            raise ValueError(f"destination={destination}: must be an absolute path")
        if not Path(destination).parent.is_dir():
            raise ValueError(f"destination={destination}: its directory does not exist")
        _inside_bb(pairs["source"], "source")
        request.stage_out.append(Stage(pairs["source"], destination, kind))


# Per-job state ---------------------------------------------------------------------------------
class Hooks:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.state_dir = Path(config["state"])
        self.pfs = Path(config["pfs"])
        self.jobs_root = Path(config["jobs"])

    def job_dir(self, job_id: str) -> Path:
        return self.jobs_root / job_id

    def state_path(self, job_id: str) -> Path:
        return self.state_dir / f"{job_id}.json"

    def load(self, job_id: str) -> dict[str, Any]:
        path = self.state_path(job_id)
        if not path.is_file():
            return {}
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def save(self, job_id: str, state: dict[str, Any]) -> None:
        path = self.state_path(job_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(path)

    def request(self, job_script: str) -> Request:
        try:
            text = Path(job_script).read_text(errors="replace")
        except OSError as error:
            raise HookError(f"cannot read the job script {job_script}: {error.strerror}") from None
        return parse_directives(text, self.config)

    def log(self, job_id: str, line: str) -> None:
        with (self.state_dir / f"{job_id}.log").open("a") as out:
            out.write(f"{time.strftime('%H:%M:%S')} {line}\n")

    # The hooks -----------------------------------------------------------------------------------
    def job_process(self, job_script: str, *_ids: str) -> str:
        self.request(job_script)  # raises naming the directive at fault
        return ""

    def setup(self, job_id: str, uid: str, gid: str, pool: str, size: str, job_script: str) -> str:
        request = self.request(job_script)
        directory = self.job_dir(job_id)
        directory.mkdir(parents=True, exist_ok=True)
        os.chown(directory, int(uid), int(gid))
        directory.chmod(0o700)
        self.save(job_id, {"job": job_id, "uid": int(uid), "gid": int(gid),
                           "request": asdict(request), "pool": pool, "size": size,
                           "staged_in": 0, "stage": "setup", "dir": str(directory)})  # fmt: skip
        self.log(job_id, f"setup: {directory}, {request.capacity} bytes in pool {pool}")
        return ""

    def job_env(self, job_id: str, request: Request) -> dict[str, str]:
        directory = self.job_dir(job_id)
        env = {
            "HARMONIA_BB": str(directory),
            "LD_PRELOAD": self.config["libharmonia"],
            "HARMONIA_SCHEDD": self.config["schedd"],
            "HARMONIA_BUFFER_ROOT": str(self.pfs),
            "HARMONIA_STAGE_INCLUDE": str(directory),
            "HARMONIA_PRIORITY": str(request.priority),
            "HARMONIA_HINT": request.hint,
            # DataWarp reserves this x ranks for the whole job; Harmonia sizes phases by it.
            "HARMONIA_BYTES_PER_PROCESS": str(
                max(1, (request.io or request.capacity) // request.ntasks)
            ),
        }
        if request.node_agent:  # read by the node-agent TaskProlog (harmonia-node-agent.sh)
            env["HARMONIA_NODE_AGENT"] = "1"
        return env

    def data_in(self, job_id: str, job_script: str, *_ids: str) -> str:
        # Slurm 22.05 passes no user to data_in: the job's user is the one setup recorded.
        state = self.load(job_id)
        if not state:
            raise HookError(f"job {job_id}: data_in before setup")
        uid, gid = state["uid"], state["gid"]
        request = self.request(job_script)
        env = {**os.environ, **self.job_env(job_id, request), "HARMONIA_JOB": f"slurm-{job_id}"}
        directory = self.job_dir(job_id)
        staged, copies = 0, []
        for stage in request.stage_in:
            target = directory / _inside_bb(stage.destination, "destination")
            source = Path(stage.source)
            below = _files_below(source) if stage.type == "directory" else []
            files = (
                [(source, target)]
                if stage.type == "file"
                else [(p, target / p.relative_to(source)) for p in below]
            )
            for src, dst in files:
                staged += self._copy_through_buffers(src, dst, env, uid, gid)
                copies.append(str(dst.relative_to(directory)))
            self.log(job_id, f"stage_in {stage.source} -> {target}: {len(files)} file(s)")
        state.update(staged_in=staged, stage="data_in", copies=copies)
        self.save(job_id, state)
        return ""

    def _copy_through_buffers(
        self, source: Path, target: Path, env: dict[str, str], uid: int, gid: int
    ) -> int:
        """Copies `source` to `target` under libharmonia, as the job's user: the bytes land on
        the buffer nodes under the job's key. A plain descriptor, not dd's or cp's: libharmonia
        leaves writes to descriptors 0-2 and copy_file_range to plain I/O. Returns the bytes."""
        size = source.stat().st_size
        done = subprocess.run(
            [_system_python(), "-c", _COPY, str(source), str(target)],
            env=env, capture_output=True, text=True, timeout=3600, **_as_user(uid, gid),
        )  # fmt: skip
        if done.returncode != 0:
            raise HookError(f"stage_in {source}: copy failed: {done.stderr.strip()[-500:]}")
        # The PFS file may still be empty: the nodes hold the bytes until they drain.
        copied = int(done.stdout.strip() or -1)
        if copied != size:
            raise HookError(f"stage_in {source}: {copied} of {size} bytes copied")
        return size

    def real_size(self, job_id: str, *_ids: str) -> str:
        state = self.load(job_id)
        if not state:
            return ""
        if self.config["mode"] == "datawarp":  # the whole reservation, for the whole job
            return str(state["request"]["capacity"])
        # Harmonia grants phases as they come: until then the job holds what it staged in.
        return str(max(1, int(state.get("staged_in", 0))))

    def paths(self, job_id: str, job_script: str, path_file: str, *_ids: str) -> str:
        request = self.request(job_script)
        with open(path_file, "a") as out:
            for key, value in self.job_env(job_id, request).items():
                out.write(f"{key}={value}\n")
        return ""

    def pre_run(self, job_id: str, job_script: str, *_ids: str) -> str:
        status = self.schedd_status()
        buffers = status.get("buffers", [])
        down = [str(b.get("index")) for b in buffers if not b.get("connected")]
        if not buffers or down:
            raise HookError(f"buffer nodes not connected to harmonia-schedd: {', '.join(down)}")
        if not self.job_dir(job_id).is_dir():
            raise HookError(f"{self.job_dir(job_id)}: the job's buffer space is gone")
        state = self.load(job_id)
        state["stage"] = "running"
        self.save(job_id, state)
        return ""

    def post_run(self, job_id: str, job_script: str, *_ids: str) -> str:
        # The job's processes are gone; wait until the scheduler has let them go, so that no
        # phase of theirs is still open when its data is drained.
        key = f"slurm-{job_id}"
        deadline = time.monotonic() + 30
        while any(j.get("job") == key for j in self.schedd_status().get("jobs", [])):
            if time.monotonic() > deadline:
                self.log(job_id, "post_run: harmonia-schedd still lists the job after 30 s")
                break
            time.sleep(0.2)
        state = self.load(job_id)
        state["stage"] = "post_run"
        self.save(job_id, state)
        return ""

    def data_out(self, job_id: str, job_script: str, *_ids: str) -> str:
        request = self.request(job_script)
        state = self.load(job_id)
        if not state:
            raise HookError(f"job {job_id}: data_out without setup")
        drained = self.drain_job(job_id)
        directory = self.job_dir(job_id)
        moved = 0
        for stage in request.stage_out:
            source = directory / _inside_bb(stage.source, "source")
            destination = Path(stage.destination)
            if stage.type == "file" and not source.is_file():
                raise HookError(f"stage_out source={stage.source}: the job wrote no such file")
            if stage.type == "directory" and not source.is_dir():
                raise HookError(f"stage_out source={stage.source}: the job made no such directory")
            moved += self._persist(source, destination, state)
            self.log(job_id, f"stage_out {source} -> {destination}")
        state.update(stage="staged_out", drained_files=drained, staged_out=moved)
        self.save(job_id, state)
        return ""

    def _persist(self, source: Path, destination: Path, state: dict[str, Any]) -> int:
        """Moves `source` to `destination` as the job's user (_MOVE); returns the bytes."""
        done = subprocess.run(
            [_system_python(), "-c", _MOVE, str(source), str(destination)],
            capture_output=True, text=True, timeout=3600,
            **_as_user(state["uid"], state["gid"]),
        )  # fmt: skip
        if done.returncode != 0:
            raise HookError(f"stage_out to {destination}: {done.stderr.strip()[-500:]}")
        return int(done.stdout.strip())

    def teardown(self, job_id: str, job_script: str, *_rest: str) -> str:
        directory = self.job_dir(job_id)
        # Whatever the job got acknowledged reaches the PFS, cancelled or failed alike.
        self.drain_job(job_id)
        # Stage-in's copies of PFS files go; the job's own files stay unless staged out.
        for copy in self.load(job_id).get("copies", []):
            _unlink_beneath(directory, copy)
        if not directory.exists() or not _has_files(directory):
            shutil.rmtree(directory, ignore_errors=True)
            self.log(job_id, "teardown: buffer space released")
        else:
            # Files no stage_out moved (cancelled, failed, or not asked for) are never deleted:
            # drained, they stay on the PFS for the user.
            self.log(job_id, f"teardown: files not staged out stay in {directory}")
        self.state_path(job_id).unlink(missing_ok=True)
        return ""

    # Talking to the daemons ----------------------------------------------------------------------
    def schedd_status(self) -> dict[str, Any]:
        done = subprocess.run(
            [self.config["schedctl"], "--address", self.config["schedd"], "status", "--compact"],
            capture_output=True, text=True, check=False, timeout=20,
        )  # fmt: skip
        if done.returncode != 0:
            raise HookError(f"harmonia-schedd at {self.config['schedd']} does not answer")
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def node_addresses(self) -> list[str]:
        root = Path(self.config["node_ports_dir"])
        ports = sorted(root.glob("bb*.port"), key=lambda p: int(p.stem[2:]))
        return [f"127.0.0.1:{p.read_text().strip()}" for p in ports]

    def node_statuses(self) -> list[dict[str, Any]]:
        """Each node's own status, with the bytes it holds per job under `used_by`."""
        out = []
        for address in self.node_addresses():
            done = subprocess.run(
                [self.config["bbctl"], "--node", address, "status"],
                capture_output=True, text=True, check=False, timeout=20,
            )  # fmt: skip
            if done.returncode != 0:
                raise HookError(f"buffer node {address} does not answer: {done.stderr.strip()}")
            status = json.loads(done.stdout)
            status["address"] = address
            out.append(status)
        return out

    def drain_job(self, job_id: str) -> int:
        """Drains every file of the job's buffer space from every node, and waits."""
        directory = self.job_dir(job_id)
        if not directory.is_dir():
            return 0
        files = [p.relative_to(self.pfs) for p in _files_below(directory)]
        for address in self.node_addresses():
            for name in files:
                done = subprocess.run(
                    [self.config["bbctl"], "--node", address, "drain", str(name)],
                    capture_output=True, text=True, check=False, timeout=3600,
                )  # fmt: skip
                if done.returncode != 0:
                    raise HookError(f"drain of {name} on {address} failed: "
                                    f"{(done.stderr or done.stdout).strip()}")  # fmt: skip
        return len(files)

    def pools(self) -> str:
        # Slurm counts a pool in units of its granularity: whole MiB here.
        total = int(self.config["capacity"]) * int(self.config["buffers"])
        return json.dumps({"pools": [
            {"id": self.config["pool"], "quantity": total >> 20, "granularity": 1 << 20}
        ]})  # fmt: skip

    def status(self, *_args: str) -> str:
        """`scontrol show bbstat`: the pool's nodes (as they report themselves) and each job."""
        status = self.schedd_status()
        connected = {b.get("address"): b.get("connected") for b in status.get("buffers", [])}
        lines = [f"Harmonia pool {self.config['pool']}: mode {self.config['mode']} "
                 f"(policy {status.get('policy') or self.config['policy']})",
                 "node  address               capacity         held     received      drained"
                 "  state"]  # fmt: skip
        for k, node in enumerate(self.node_statuses()):
            state = "DOWN" if not connected.get(node["address"]) else (
                "draining" if node.get("draining") else "up")  # fmt: skip
            lines.append(f"bb{k:<3} {node['address']:<20} {int(node['capacity']):>10} "
                         f"{int(node['used']):>12} {int(node['received_bytes']):>12} "
                         f"{int(node['drained_bytes']):>12}  {state}")  # fmt: skip
        lines.append("job       stage         capacity    staged_in  processes  phases")
        running = {j.get("job"): j for j in status.get("jobs", [])}
        for path in sorted(self.state_dir.glob("*.json")):
            job = json.loads(path.read_text())
            live = running.get(f"slurm-{job['job']}", {})
            capacity, staged = int(job["request"]["capacity"]), int(job.get("staged_in", 0))
            lines.append(f"{job['job']:<9} {job.get('stage', ''):<11} {capacity:>10} "
                         f"{staged:>12} {int(live.get('processes', 0)):>10} "
                         f"{int(live.get('phases', 0)):>7}")  # fmt: skip
        return "\n".join(lines)


def _as_user(uid: int, gid: int) -> dict[str, Any]:
    """subprocess arguments that run a child as the job's user with that user's groups only
    (not SlurmUser's supplementary groups); nothing when not root."""
    if os.getuid() != 0:
        return {}
    try:
        groups = os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
    except KeyError:
        groups = [gid]
    return {"user": uid, "group": gid, "extra_groups": groups}


def _unlink_beneath(directory: Path, relative: str) -> None:
    """Removes directory/relative without following any link on the way (the job's user may
    have swapped a directory for a link to elsewhere); a path that is not there is left."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        parts = relative.split("/")
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.unlink(parts[-1], dir_fd=fd)
    except OSError:
        pass  # gone, or a link or non-directory on the way: nothing of ours to remove
    finally:
        os.close(fd)


def _system_python() -> str:
    """A Python the job's user may run (the venv's may live under root's home)."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def _has_files(directory: Path) -> bool:
    """Whether anything but empty directories is under `directory` (links not followed)."""
    return any(
        names or any((Path(root) / d).is_symlink() for d in dirs)
        for root, dirs, names in os.walk(directory, followlinks=False)
    )


def _files_below(directory: Path) -> list[Path]:
    """Every regular file under `directory`, symbolic links never followed nor listed: the
    job's user controls what is there, and the hooks run as SlurmUser."""
    return sorted(
        Path(root) / name
        for root, _dirs, names in os.walk(directory, followlinks=False)
        for name in names
        if not (Path(root) / name).is_symlink()
    )


# The stage-out mover, run as the job's user (never as SlurmUser: the user names the
# destination, and only the kernel's permission checks may decide where their files go). Moves a
# drained file or directory durably: a rename on one file system, else a copy fsynced before the
# source goes. A directory destination must not exist yet. Prints the bytes moved.
_MOVE = """
import errno, os, shutil, sys
source, destination = sys.argv[1], sys.argv[2]
def fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
is_dir = os.path.isdir(source) and not os.path.islink(source)
if is_dir and os.path.lexists(destination):
    sys.exit(f"destination={destination}: exists; a directory is staged out to a new name")
files = [source] if not is_dir else [os.path.join(d, f) for d, _, fs in os.walk(source) for f in fs]
size = sum(os.lstat(f).st_size for f in files)
def move():
    try:
        os.replace(source, destination)
    except OSError as error:
        if error.errno != errno.EXDEV:  # only another file system calls for a copy
            raise
        if is_dir:
            shutil.copytree(source, destination, symlinks=True)
            for d, _, fs in os.walk(destination):
                for f in fs:
                    if not os.path.islink(os.path.join(d, f)):
                        fsync(os.path.join(d, f))
            shutil.rmtree(source)
        else:
            shutil.copyfile(source, destination, follow_symlinks=False)
            fsync(destination)
            os.unlink(source)
    fsync(os.path.dirname(os.path.abspath(destination)))
try:
    move()
except OSError as error:
    sys.exit(f"{error.filename}: {error.strerror}")
print(size)
"""


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m harmonia.slurm_bb CONFIG HOOK ARGS...", file=sys.stderr)
        return 2
    try:
        config = json.loads(Path(argv[0]).read_text())
    except (OSError, ValueError) as error:
        print(f"{argv[0]}: cannot read Harmonia's burst-buffer configuration: {error}")
        return 1
    hooks = Hooks(config)
    hook = argv[1]
    known = ("job_process", "setup", "data_in", "real_size", "paths", "pre_run", "post_run",
             "data_out", "teardown", "pools", "status")  # fmt: skip
    if hook not in known:
        print(f"unknown hook {hook!r}")
        return 2
    try:
        said = getattr(hooks, hook)(*argv[2:])
    except HookError as error:
        print(error)
        return 1
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as error:
        print(f"{hook}: {error}")
        return 1
    if said:
        print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
