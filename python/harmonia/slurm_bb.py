"""The asynchronous hooks behind burst_buffer.lua (docs/slurm.md): `python -m harmonia.slurm_bb
CONFIG HOOK ARGS...`, run by slurmscriptd as SlurmUser; each prints what Slurm shows (one line on
failure) and exits non-zero on failure. The directives are read in slurmctld by harmonia_bb.lua,
which hands `setup` the job's request as JSON; the later hooks read it from the job's state.

A job's buffer space is `<pfs>/.harmonia-jobs/<job id>` ($HARMONIA_BB in the job): writes there
go through libharmonia to the buffer nodes under the job's key (`slurm-<id>`, which libharmonia
takes from SLURM_JOB_ID). Stage-in copies through the same path before the job starts; stage-out
drains the job's files from every node to the PFS and then moves them to their destinations.
Files no stage-out moved are kept for the configured retention, then removed."""

import errno
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harmonia.units import format_size

BB_VARIABLE = "$HARMONIA_BB"
RETENTION_HOURS = 168  # how long files no stage-out moved are kept, unless the settings say
STATUS_DEADLINE = 0.5  # seconds bbstat waits for harmonia-schedd and each node
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# The stage-in copier, run as the job's user under libharmonia: reads the source, writes the
# target in 4 MiB pieces; on failure one line, the file at fault and why.
_COPY = """
import os, sys
try:
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
except OSError as error:
    sys.exit(f"{error.filename or sys.argv[2]}\\t{error.strerror}")
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
    """A job's directives, as harmonia_bb.lua read them."""

    capacity: int = 0  # reserved through Slurm for the whole job; 0: none
    io: int = 0  # the job's declared output, for the policy's shares; 0: the capacity
    pool: str = ""
    priority: int = 0
    hint: str = "flushable"
    access: str = "striped"
    node_agent: bool = False
    ntasks: int = 1
    stage_in: list[Stage] = field(default_factory=list)
    stage_out: list[Stage] = field(default_factory=list)

    @staticmethod
    def from_json(text: str) -> "Request":
        """The JSON harmonia_bb.lua writes (sizes as strings; an empty list may be {})."""
        try:
            data = json.loads(text)
            return Request(
                capacity=int(data["capacity"]), io=int(data["io"]), pool=str(data["pool"]),
                priority=int(data["priority"]), hint=str(data["hint"]),
                access=str(data["access"]), node_agent=bool(data["node_agent"]),
                ntasks=int(data["ntasks"]),
                stage_in=[Stage(**s) for s in data["stage_in"] or []],
                stage_out=[Stage(**s) for s in data["stage_out"] or []],
            )  # fmt: skip
        except (ValueError, KeyError, TypeError) as error:
            raise HookError(
                f"the request harmonia_bb.lua passed is not readable: {error}"
            ) from None


def relative_in_bb(path: str) -> str:
    """`$HARMONIA_BB/a/b` -> `a/b` (harmonia_bb.lua has refused anything else)."""
    return path.removeprefix(BB_VARIABLE + "/").strip("/")


# Paths beneath a directory, no link followed ---------------------------------------------------
def _why(error: OSError, dirfd: int = -1, name: str = "") -> str:
    """Why opening `name` beneath `dirfd` failed (O_NOFOLLOW | O_DIRECTORY on a link gives
    ENOTDIR, as src/common/beneath.cpp's link_or sorts out)."""
    if error.errno in (errno.ELOOP, errno.ENOTDIR) and dirfd >= 0:
        try:
            if stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
                return "is a symbolic link (not followed)"
        except OSError:
            pass
    if error.errno == errno.ELOOP:
        return "is a symbolic link (not followed)"
    if error.errno == errno.ENOTDIR:
        return "is not a directory"
    return error.strerror or str(error)


def open_beneath(dirfd: int, relative: str) -> int:
    """The directory `relative` beneath `dirfd`, opened one part at a time with O_NOFOLLOW (as
    src/common/beneath.cpp without openat2): a link anywhere on the way is ELOOP."""
    fd = os.dup(dirfd)
    for part in relative.split("/"):
        if part in ("", "."):
            continue
        try:
            inner = os.open(part, DIRECTORY, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd


def _private_dir(dirfd: int, name: str, mode: int, shown: Path) -> tuple[int, bool]:
    """`name` beneath `dirfd`, made with `mode` when missing, opened without following a link;
    the descriptor and whether it was made now."""
    made = False
    try:
        os.mkdir(name, mode, dir_fd=dirfd)
        made = True
    except FileExistsError:
        pass
    except OSError as error:
        raise HookError(f"{shown}: cannot make it: {_why(error)}") from None
    try:
        fd = os.open(name, DIRECTORY, dir_fd=dirfd)
    except OSError as error:
        why = _why(error, dirfd, name)
        raise HookError(f"{shown}: {why}; refusing to make job directories there") from None
    if made:
        os.fchmod(fd, mode)  # not the umask's
    return fd, made


def _admin_only(fd: int, shown: Path) -> None:
    """Refuses a directory another user could write or own: they could swap what is in it."""
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise HookError(
            f"{shown}: owned by uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}; "
            f"job directories are made only under directories of uid {os.geteuid()} that no one "
            "else may write"
        )


def _dir_beneath(root: Path, relative: str) -> int | None:
    """The directory root/relative opened as open_beneath does (the root itself as given);
    None when it is not there or a link or non-directory is on the way."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return open_beneath(top, relative)
    except OSError:
        return None
    finally:
        os.close(top)


def _unlink_beneath(directory: Path, relative: str) -> None:
    """Removes directory/relative without following any link on the way (the job's user may
    have swapped a directory for a link to elsewhere); a path that is not there is left."""
    parent, _, name = relative.rpartition("/")
    fd = _dir_beneath(directory, parent)
    if fd is None:
        return  # gone, or a link or non-directory on the way: nothing of ours to remove
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _files_below(directory: Path) -> list[Path]:
    """Every regular file under `directory`, by descriptor (os.fwalk): links are never followed
    nor listed, even one swapped in while walking; the job's user controls what is there."""
    files = []
    try:
        for root, _dirs, names, fd in os.fwalk(directory, follow_symlinks=False):
            for name in names:
                try:
                    if stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                        files.append(Path(root) / name)
                except FileNotFoundError:
                    pass
    except OSError:
        return []
    return sorted(files)


def _has_files(directory: Path) -> bool:
    """Whether anything but empty directories is under `directory` (links not followed)."""
    return any(
        names or any(os.path.islink(os.path.join(root, d)) for d in dirs)
        for root, dirs, names, _fd in os.fwalk(directory, follow_symlinks=False)
    )


# The hooks -------------------------------------------------------------------------------------
class Hooks:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.state_dir = Path(config["state"])
        self.pfs = Path(config["pfs"])
        self.jobs_root = Path(config["jobs"])
        self.retention_hours = float(config.get("retention_hours", RETENTION_HOURS))

    def job_dir(self, job_id: str) -> Path:
        return self.jobs_root / job_id

    def state_path(self, job_id: str) -> Path:
        return self.state_dir / f"{job_id}.json"

    def kept_path(self, job_id: str) -> Path:
        return self.state_dir / "kept" / f"{job_id}.json"

    def load(self, job_id: str) -> dict[str, Any]:
        path = self.state_path(job_id)
        if not path.is_file():
            return {}
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def save(self, job_id: str, state: dict[str, Any]) -> None:
        _write_json(self.state_path(job_id), state)

    def request(self, state: dict[str, Any]) -> Request:
        data = dict(state["request"])
        data["stage_in"] = [Stage(**s) for s in data["stage_in"]]
        data["stage_out"] = [Stage(**s) for s in data["stage_out"]]
        return Request(**data)

    def log(self, job_id: str, line: str) -> None:
        """One line in the job's log (`state`/JOB.log) and, for events an admin looks for
        across jobs (retention, failures), pass `job_id` "" to write `state`/harmonia-bb.log."""
        name = f"{job_id}.log" if job_id else "harmonia-bb.log"
        with (self.state_dir / name).open("a") as out:
            out.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")

    # Set-up and stage-in -------------------------------------------------------------------------
    def setup(
        self, job_id: str, uid: str, gid: str, pool: str, size: str, request_json: str
    ) -> str:
        request = Request.from_json(request_json)
        directory = self.make_job_space(job_id, int(uid), int(gid))
        self.save(job_id, {"job": job_id, "uid": int(uid), "gid": int(gid),
                           "request": asdict(request), "pool": pool, "size": size,
                           "staged_in": 0, "stage": "setup", "dir": str(directory),
                           "setup_at": time.time()})  # fmt: skip
        self.log(job_id, f"setup: {directory}, {request.capacity} bytes in pool {pool}")
        return ""

    def make_job_space(self, job_id: str, uid: int, gid: int) -> Path:
        """`jobs`/JOB, made beneath the PFS root with no link followed (the job's user must not
        get another directory chowned to them): every directory from the PFS root down to
        `jobs` is SlurmUser's and writable by no one else, the PFS root itself only writable by
        others with the sticky bit; JOB is the user's, mode 0700."""
        if not job_id.isdigit():
            raise HookError(f"job id {job_id!r}: expected a number")
        try:
            relative = self.jobs_root.relative_to(self.pfs)
        except ValueError:
            raise HookError(f"jobs={self.jobs_root}: must be beneath pfs={self.pfs}") from None
        try:
            fd = os.open(self.pfs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise HookError(f"pfs={self.pfs}: {_why(error)}") from None
        try:
            info = os.fstat(fd)
            if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
                raise HookError(
                    f"{self.pfs}: writable by others (mode {stat.S_IMODE(info.st_mode):04o}) "
                    f"without the sticky bit: another user could replace {relative}"
                )
            shown = self.pfs
            for part in relative.parts:
                shown = shown / part
                # 0711: users reach their own job's directory but list no one's.
                inner, _ = _private_dir(fd, part, 0o711, shown)
                os.close(fd)
                fd = inner
                _admin_only(fd, shown)
            space, made = _private_dir(fd, job_id, 0o700, shown / job_id)
            try:
                owner = os.fstat(space).st_uid
                if not made and owner not in (uid, os.geteuid()):
                    raise HookError(
                        f"{shown / job_id}: holds uid {owner}'s files, left by an earlier job "
                        f"{job_id}; `python -m harmonia.slurm_bb CONFIG purge` removes them"
                    )
                os.fchown(space, uid, gid)
                os.fchmod(space, 0o700)
            finally:
                os.close(space)
        finally:
            os.close(fd)
        return self.job_dir(job_id)

    def job_env(self, job_id: str) -> dict[str, str]:
        """What stage-in's copier needs of the job's environment (harmonia_bb.lua's job_env
        gives the job all of it)."""
        directory = str(self.job_dir(job_id))
        return {
            "HARMONIA_BB": directory,
            "LD_PRELOAD": self.config["libharmonia"],
            "HARMONIA_SCHEDD": self.config["schedd"],
            "HARMONIA_BUFFER_ROOT": str(self.pfs),
            "HARMONIA_STAGE_INCLUDE": directory,
            "HARMONIA_JOB": f"slurm-{job_id}",
        }

    def data_in(self, job_id: str) -> str:
        # Slurm 22.05 passes no user to data_in: the job's user is the one setup recorded.
        state = self.load(job_id)
        if not state:
            raise HookError(f"job {job_id}: data_in before setup")
        uid, gid = state["uid"], state["gid"]
        request = self.request(state)
        env = {**os.environ, **self.job_env(job_id)}
        directory = self.job_dir(job_id)
        staged, copies = 0, []
        for stage in request.stage_in:
            before = staged
            target = directory / relative_in_bb(stage.destination)
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
                # What was copied so far is removed by teardown, even when a later copy fails.
                state.update(staged_in=staged, copies=copies)
                self.save(job_id, state)
            self.log(job_id, f"stage_in {stage.source} -> {target}: {len(files)} file(s), "
                     f"{staged - before} bytes")  # fmt: skip
        state.update(staged_in=staged, stage="data_in", copies=copies)
        self.save(job_id, state)
        return ""

    def _copy_through_buffers(
        self, source: Path, target: Path, env: dict[str, str], uid: int, gid: int
    ) -> int:
        """Copies `source` to `target` under libharmonia, as the job's user: the bytes land on
        the buffer nodes under the job's key. A plain descriptor, not dd's or cp's: libharmonia
        leaves writes to descriptors 0-2 and copy_file_range to plain I/O. Returns the bytes."""
        done = subprocess.run(
            [_system_python(), "-c", _COPY, str(source), str(target)],
            env=env, capture_output=True, text=True, timeout=3600, **_as_user(uid, gid),
        )  # fmt: skip
        if done.returncode != 0:
            at, _, why = done.stderr.strip().rpartition("\n")[2].partition("\t")
            if not why:  # not the copier's own line (the interpreter could not start)
                why, at = done.stderr.strip().replace("\n", " ")[-300:], str(target)
            shown = source if at == str(source) else f"{source} -> {at}"
            raise HookError(f"stage_in {shown}: {why}")
        # The PFS file may still be empty: the nodes hold the bytes until they drain.
        copied = int(done.stdout.strip() or -1)
        size = source.stat().st_size
        if copied != size:
            raise HookError(f"stage_in {source}: {copied} of {size} bytes copied")
        return size

    def real_size(self, job_id: str) -> str:
        state = self.load(job_id)
        if not state:
            return ""
        if self.config["mode"] == "datawarp":  # the whole reservation, for the whole job
            return str(state["request"]["capacity"])
        # Harmonia grants phases as they come: until then the job holds what it staged in.
        return str(max(1, int(state.get("staged_in", 0))))

    # The job runs ---------------------------------------------------------------------------------
    def pre_run(self, job_id: str) -> str:
        status = self.schedd_status(timeout=20)
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

    def post_run(self, job_id: str) -> str:
        # The job's processes are gone; wait until the scheduler has let them go, so that no
        # phase of theirs is still open when its data is drained. Job keys are per user: another
        # user's job under the same key is another job, and is not waited for.
        key = f"slurm-{job_id}"
        state = self.load(job_id)
        deadline = time.monotonic() + 30
        while any(j.get("job") == key and j.get("uid", 0) == state.get("uid")
                  for j in self.schedd_status(timeout=20).get("jobs", [])):  # fmt: skip
            if time.monotonic() > deadline:
                self.log(job_id, "post_run: harmonia-schedd still lists the job after 30 s")
                break
            time.sleep(0.2)
        state["stage"] = "post_run"
        self.save(job_id, state)
        return ""

    # Stage-out and teardown ----------------------------------------------------------------------
    def data_out(self, job_id: str) -> str:
        state = self.load(job_id)
        if not state:
            raise HookError(f"job {job_id}: data_out without setup")
        request = self.request(state)
        drained = self.drain_job(job_id)
        directory = self.job_dir(job_id)
        moved = 0
        for stage in request.stage_out:
            source = directory / relative_in_bb(stage.source)
            destination = Path(stage.destination)
            if stage.type == "file" and not source.is_file():
                raise HookError(f"stage_out source={stage.source}: the job wrote no such file")
            if stage.type == "directory" and not source.is_dir():
                raise HookError(f"stage_out source={stage.source}: the job made no such directory")
            size = self._persist(stage, source, destination, state)
            moved += size
            self.log(job_id, f"stage_out {source} -> {destination}: {size} bytes")
        state.update(stage="staged_out", drained_files=drained, staged_out=moved)
        self.save(job_id, state)
        return ""

    def _persist(self, stage: Stage, source: Path, destination: Path, state: dict[str, Any]) -> int:
        """Moves `source` to `destination` as the job's user (_MOVE); returns the bytes."""
        done = subprocess.run(
            [_system_python(), "-c", _MOVE, str(source), str(destination)],
            capture_output=True, text=True, timeout=3600,
            **_as_user(state["uid"], state["gid"]),
        )  # fmt: skip
        if done.returncode != 0:
            why = done.stderr.strip().rpartition("\n")[2] or f"exit status {done.returncode}"
            raise HookError(f"stage_out {stage.source} to {destination}: {why}")
        return int(done.stdout.strip())

    def teardown(self, job_id: str, hurry: str = "false") -> str:
        directory = self.job_dir(job_id)
        state = self.load(job_id)
        # Whatever the job got acknowledged reaches the PFS, cancelled or failed alike.
        self.drain_job(job_id)
        # Stage-in's copies of PFS files go; the job's own files stay unless staged out.
        for copy in state.get("copies", []):
            _unlink_beneath(directory, copy)
        done = (f"teardown: staged in {state.get('staged_in', 0)} bytes, staged out "
                f"{state.get('staged_out', 0)} bytes")  # fmt: skip
        if not directory.exists() or not _has_files(directory):
            self._remove_space(job_id)
            self.log(job_id, f"{done}; buffer space released")
        else:
            # Files no stage_out moved (cancelled, failed, or not asked for) are kept, drained
            # to the PFS, for the retention time; a later teardown or `purge` removes them.
            until = time.time() + self.retention_hours * 3600
            _write_json(self.kept_path(job_id), {"job": job_id, "uid": state.get("uid"),
                                                 "kept_at": time.time()})  # fmt: skip
            self.log(job_id, f"{done}; files not staged out stay in {directory} until "
                     f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(until))} "
                     f"(retention {self.retention_hours:g} h)")  # fmt: skip
        self.state_path(job_id).unlink(missing_ok=True)
        self.purge(exclude=job_id)
        return ""

    def _remove_space(self, job_id: str) -> None:
        """Removes `jobs`/JOB and what is in it, by descriptor (links are removed, never
        followed)."""
        parent = _dir_beneath(self.pfs, str(self.jobs_root.relative_to(self.pfs)))
        if parent is None:
            return
        try:
            shutil.rmtree(job_id, dir_fd=parent)
        except FileNotFoundError:
            pass
        finally:
            os.close(parent)

    def purge(self, older_than_hours: str = "", exclude: str = "") -> str:
        """Removes the kept files of jobs torn down more than the retention time ago (or
        `older_than_hours`), one log line each in `state`/harmonia-bb.log; what it removed."""
        hours = float(older_than_hours) if older_than_hours else self.retention_hours
        removed = []
        for record in sorted((self.state_dir / "kept").glob("*.json")):
            job_id = record.stem
            try:
                kept = json.loads(record.read_text())
            except (OSError, ValueError):
                continue
            age = time.time() - float(kept.get("kept_at", 0))
            if job_id == exclude or age < hours * 3600:
                continue
            self._remove_space(job_id)
            record.unlink(missing_ok=True)
            line = (f"retention: removed {self.job_dir(job_id)} (uid {kept.get('uid')}, "
                    f"kept {age / 3600:.1f} h, retention {hours:g} h)")  # fmt: skip
            self.log("", line)
            self.log(job_id, line)
            removed.append(line)
        return "\n".join(removed)

    # Talking to the daemons ----------------------------------------------------------------------
    def schedd_status(self, timeout: float) -> dict[str, Any]:
        command = [self.config["schedctl"], "--address", self.config["schedd"], "status",
                   "--compact"]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HookError(f"harmonia-schedd at {self.config['schedd']} does not answer "
                            f"within {timeout:g} s") from None  # fmt: skip
        if done.returncode != 0:
            raise HookError(f"harmonia-schedd at {self.config['schedd']} does not answer: "
                            f"{done.stderr.strip()[-200:]}")  # fmt: skip
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def node_addresses(self) -> list[str]:
        root = Path(self.config["node_ports_dir"])
        ports = sorted(root.glob("bb*.port"), key=lambda p: int(p.stem[2:]))
        return [f"127.0.0.1:{p.read_text().strip()}" for p in ports]

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

    def status(self, *args: str) -> str:
        """`scontrol show bbstat [json]`: every node's state and each job's use, within about
        STATUS_DEADLINE seconds whatever a node or harmonia-schedd does."""
        report = self.gather_status(STATUS_DEADLINE)
        return json.dumps(report, indent=1) if "json" in args else render_status(report)

    def gather_status(self, deadline: float) -> dict[str, Any]:
        """Asks harmonia-schedd and every node at once, each for at most `deadline` seconds:
        a node that is dead (nothing to connect to) or hung (stopped, overloaded) is named, never
        waited for."""
        addresses = self.node_addresses()
        commands = {"schedd": [self.config["schedctl"], "--address", self.config["schedd"],
                               "status", "--compact"]}  # fmt: skip
        for k, address in enumerate(addresses):
            commands[f"bb{k}"] = [self.config["bbctl"], "--node", address, "status"]
        answers = _ask_all(commands, deadline)
        schedd, schedd_problem = answers["schedd"]
        seen = {b.get("address"): b for b in (schedd or {}).get("buffers", [])}
        nodes = []
        for k, address in enumerate(addresses):
            answer, problem = answers[f"bb{k}"]
            view = seen.get(address, {})
            if answer is None:
                state = "down" if problem.startswith("no answer") else "dead"
                problem = _process_note(Path(self.config["node_ports_dir"]) / f"bb{k}.pid",
                                        problem)  # fmt: skip
            elif schedd is not None and not view.get("connected"):
                state, problem = "down", "not connected to harmonia-schedd"
            else:
                state = "draining" if answer.get("draining") or view.get("draining") else "up"
            nodes.append({"node": f"bb{k}", "address": address, "state": state,
                          "reason": problem or "", **{key: int(answer[key]) for key in
                          ("capacity", "used", "received_bytes", "drained_bytes", "files")
                          if answer and key in answer}})  # fmt: skip
        live = {j.get("job"): j for j in (schedd or {}).get("jobs", [])}
        jobs = []
        for path in sorted(self.state_dir.glob("*.json"), key=lambda p: p.stem.zfill(12)):
            try:
                job = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being rewritten
            running = live.get(f"slurm-{job['job']}", {})
            jobs.append({"job": job["job"], "user": _user_name(job.get("uid")),
                         "stage": job.get("stage", ""),
                         "capacity": int(job["request"]["capacity"]),
                         "io": int(job["request"]["io"]),
                         "staged_in": int(job.get("staged_in", 0)),
                         "staged_out": int(job.get("staged_out", 0)),
                         "processes": int(running.get("processes", 0)),
                         "phases": int(running.get("phases", 0))})  # fmt: skip
        kept = sorted((p.stem for p in (self.state_dir / "kept").glob("*.json")),
                      key=lambda j: j.zfill(12))  # fmt: skip
        return {"pool": self.config["pool"], "mode": self.config["mode"],
                "policy": (schedd or {}).get("policy") or self.config.get("policy", ""),
                "schedd": "up" if schedd is not None else f"not answering: {schedd_problem}",
                "nodes": nodes, "jobs": jobs, "kept": kept,
                "retention_hours": self.retention_hours}  # fmt: skip


def _ask_all(commands: dict[str, list[str]], deadline: float) -> dict[str, tuple[Any, str]]:
    """Runs every command at once; each one's JSON answer, or None and why not (a command still
    running at the deadline is killed: "no answer within ...")."""
    started = time.monotonic()
    running = {}
    answers: dict[str, tuple[Any, str]] = {}
    for name, command in commands.items():
        try:
            running[name] = subprocess.Popen(command, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)  # fmt: skip
        except OSError as error:
            answers[name] = (None, f"cannot run {command[0]}: {error.strerror}")
    for name, process in running.items():
        try:
            out, err = process.communicate(timeout=max(0.0, started + deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            if process.poll() is None:  # still running: no answer
                process.kill()
                process.communicate()
                answers[name] = (None, f"no answer within {deadline:g} s")
                continue
            out, err = process.communicate()  # it answered while another was waited for
        if process.returncode != 0:
            lines = err.strip().splitlines() or [f"exit status {process.returncode}"]
            answers[name] = (None, lines[-1].rpartition(": ")[2])
            continue
        try:
            answers[name] = (json.loads(out), "")
        except ValueError:
            answers[name] = (None, "an answer that is not JSON")
    return answers


def _process_note(pid_file: Path, problem: str) -> str:
    """`problem`, with what a node on this host is doing when its PID file says (stopped, not
    running)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return problem  # a node elsewhere
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2][:1]
    except OSError:
        return f"{problem}; pid {pid} not running"
    notes = {"T": "stopped", "t": "stopped", "Z": "not running", "D": "waiting on I/O"}
    return f"{problem}; pid {pid} {notes[state]}" if state in notes else problem


def _user_name(uid: Any) -> str:
    try:
        return pwd.getpwuid(int(uid)).pw_name
    except (KeyError, TypeError, ValueError):
        return str(uid)


def render_status(report: dict[str, Any]) -> str:
    """bbstat's table."""

    def size(value: Any, zero: str = "-") -> str:
        """People's units; `zero` for 0 (a job's "-": none asked), "-" for a node's unknown."""
        if not isinstance(value, int):
            return "-"
        return format_size(value) if value else zero

    lines = [f"Harmonia pool {report['pool']}: mode {report['mode']} (policy {report['policy']}); "
             f"harmonia-schedd {report['schedd']}",
             f"{'node':<5} {'address':<21} {'state':<9} {'capacity':>10} {'held':>10} "
             f"{'received':>10} {'drained':>10} {'files':>6}  reason"]  # fmt: skip
    for n in report["nodes"]:
        files = str(n["files"]) if "files" in n else "-"
        lines.append(f"{n['node']:<5} {n['address']:<21} {n['state']:<9} "
                     f"{size(n.get('capacity'), '0 B'):>10} {size(n.get('used'), '0 B'):>10} "
                     f"{size(n.get('received_bytes'), '0 B'):>10} "
                     f"{size(n.get('drained_bytes'), '0 B'):>10} "
                     f"{files:>6}  {n['reason']}".rstrip())  # fmt: skip
    lines.append(
        f"{'job':<9} {'user':<10} {'stage':<11} {'capacity':>10} {'io':>10} "
        f"{'staged_in':>10} {'staged_out':>10} {'processes':>9} {'phases':>6}"
    )
    for j in report["jobs"]:
        lines.append(
            f"{j['job']:<9} {j['user']:<10} {j['stage']:<11} {size(j['capacity']):>10} "
            f"{size(j['io']):>10} {size(j['staged_in']):>10} "
            f"{size(j['staged_out']):>10} {j['processes']:>9} {j['phases']:>6}"
        )
    if report["kept"]:
        lines.append(
            f"kept (not staged out, removed after {report['retention_hours']:g} h): "
            f"jobs {', '.join(report['kept'])}"
        )
    return "\n".join(lines)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


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


def _system_python() -> str:
    """A Python the job's user may run (the venv's may live under root's home)."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


# The stage-out mover, run as the job's user (never as SlurmUser: the user names the
# destination, and only the kernel's permission checks may decide where their files go). Moves a
# drained file or directory durably: a rename on one file system, else a copy fsynced before the
# source goes. A directory destination must not exist yet. Prints the bytes moved; on failure
# one line, why.
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
    sys.exit("exists; a directory is staged out to a new name")
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
    sys.exit(error.strerror)
print(size)
"""

HOOKS = ("setup", "data_in", "real_size", "pre_run", "post_run", "data_out", "teardown",
         "status", "purge")  # fmt: skip


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
    if hook not in HOOKS:
        print(f"unknown hook {hook!r} (expected {', '.join(HOOKS)})")
        return 2
    try:
        said = getattr(hooks, hook)(*argv[2:])
    except HookError as error:
        print(error)
        return 1
    except Exception as error:  # noqa: BLE001 - Slurm shows one line; the log keeps the rest
        job = argv[2] if len(argv) > 2 and argv[2].isdigit() else ""
        try:
            hooks.log(job, f"{hook} failed:\n{traceback.format_exc()}")
        except OSError:
            pass
        print(f"{hook}: {type(error).__name__}: {error}")
        return 1
    if said:
        print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
