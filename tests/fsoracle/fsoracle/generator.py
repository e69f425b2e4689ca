"""Operation sequences for the executor, drawn by Hypothesis (so that a failing one shrinks).

A sequence works on a small tree (files a, b, c, directories d and e, and d/a, d/b, e/a) from
up to five processes: 0 and 1 (a fresh process, started before anything is written) from the
start, then others by `spawn` (fork and exec) and `fork`. Every line is one call; the executor's
grammar is in docs/testing.md.

Sequences stay within what the library promises (docs/staging-library.md, "The model the tester
checks"): a process never looks at the bytes, size, mode or times of a file, nor changes them,
while another process holds writes of that file it has not settled (fsync, fdatasync, the close
of its last descriptor of the file, or its exit). `Admission` follows names, files, descriptors
and those unsettled writes line by line, and refuses a line that would break the rule; where it
cannot know an outcome (a call that may fail for the user, an open through a link) it assumes
the worst. The generator and the shrinker both go through it, so a shrunk sequence is still one
the generator could have drawn."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

Draw = Callable[[st.SearchStrategy[Any]], Any]

FILES = ("a", "b", "c", "d/a", "d/b", "e/a")
DIRECTORIES = ("d", "e")
PATHS = FILES + DIRECTORIES
LINK_TARGETS = ("a", "b", "d/a", "../a", "d", "missing")
SIZES = (1, 100, 4095, 4096, 4097, 10_000, 65_536, 200_000, 1_100_000)
OFFSETS = (0, 1, 100, 4096, 10_000, 65_536, 1_048_570, 2_000_000)
LENGTHS = (0, 1, 100, 5000, 70_000, 1_100_000)
MODES = (
    "0644",
    "0600",
    "0755",
    "0444",
    "0000",
    "04755",
    "02755",
    "06777",
    "01777",
    "0640",
)
SECONDS = (1_000_000_000, 1_100_000_123, 1_234_567_890)
NANOSECONDS = (0, 1, 123_456_789, 999_999_999)
HANDLES = 6
STREAMS = 3
MAX_PROCS = 5
EFAULT_CALLS = ("open", "creat", "stat", "lstat", "statx", "unlink", "rename", "truncate",
                "chmod", "utimensat", "mkdir", "fopen")  # fmt: skip
STREAM_FLAGS = {"w": "WRONLY|CREAT|TRUNC", "a": "WRONLY|CREAT|APPEND", "r+": "RDWR",
                "w+": "RDWR|CREAT|TRUNC", "r": "RDONLY"}  # fmt: skip
WRITES = ("write", "pwrite", "writev", "pwritev", "ftruncate")
READS = (
    "read",
    "pread",
    "readv",
    "preadv",
    "fstat",
    "futimens",
    "fchmod",
    "fchown",
    "mmap",
)
BY_PATH = ("truncate", "chmod", "chown", "utimensat", "stat", "statx", "readfile")
NAMESPACE = ("rename", "renameat2", "unlink", "link", "symlink", "mkdir", "rmdir")


@dataclass
class Handle:
    file: int | None  # the model's file; None: unknown, or surely no file
    writes: bool
    last: str = (
        ""  # a stream's last call: fread, fwrite, flushed (fflush after fwrite), or ""
    )


@dataclass
class Process:
    parent: int
    handles: dict[int, Handle] = field(default_factory=dict)
    streams: dict[int, Handle] = field(default_factory=dict)
    children: list[int] = field(default_factory=list)


class Admission:
    """Names, files, descriptors and unsettled writes as far as a sequence's lines tell."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {"": 0}  # path -> file (0: the working directory)
        self.kind: dict[int, str] = {0: "d"}
        self.link: dict[int, str] = {}
        self.dirty: dict[
            int, set[int]
        ] = {}  # file -> processes holding unsettled writes
        self.processes = {0: Process(parent=-1)}
        self.started: list[int] = []  # processes to end, in the order they were started

    # ---- names ----

    @staticmethod
    def parent(path: str) -> str:
        return path.rpartition("/")[0]

    def new_file(self, kind: str) -> int:
        file = len(self.kind)
        self.kind[file] = kind
        return file

    def resolve(self, path: str, follow: bool = True, depth: int = 0) -> int | None:
        """The file a path names (through links when `follow`); None: no such file."""
        file = self.names.get(path)
        if follow and file is not None and self.kind[file] == "l" and depth < 4:
            target = self.link[file]
            base = self.parent(path)
            joined = target[3:] if target.startswith("../") else (
                f"{base}/{target}" if base else target)  # fmt: skip
            return self.resolve(joined, True, depth + 1)
        return file

    def remove_name(self, path: str) -> None:
        for name in [n for n in self.names if n == path or n.startswith(path + "/")]:
            del self.names[name]

    def can_move(self, source: str, target: str) -> bool:
        names = self.names
        if source not in names or self.parent(target) not in names or source == target:
            return False
        if target.startswith(source + "/") or source.startswith(target + "/"):
            return False
        if target in names:
            source_dir = self.kind[names[source]] == "d"
            target_dir = self.kind[names[target]] == "d"
            if source_dir != target_dir:
                return False
            if target_dir and any(n.startswith(target + "/") for n in names):
                return False
        return True

    def move(self, source: str, target: str) -> None:
        moved = {
            n: f
            for n, f in self.names.items()
            if n == source or n.startswith(source + "/")
        }
        self.remove_name(target)
        for name, file in moved.items():
            del self.names[name]
            self.names[target + name[len(source) :]] = file

    # ---- unsettled writes ----

    def busy_elsewhere(self, file: int | None, process: int) -> bool:
        """Whether another process holds unsettled writes of the file (None: of any file)."""
        if file is None:
            return any(p != process for writers in self.dirty.values() for p in writers)
        return any(p != process for p in self.dirty.get(file, ()))

    def holds(self, process: int, file: int) -> bool:
        p = self.processes[process]
        return any(
            h.file == file and h.writes
            for h in [*p.handles.values(), *p.streams.values()]
        )

    def settle(self, file: int | None, process: int) -> None:
        if file is not None and file in self.dirty:
            self.dirty[file].discard(process)

    def table(self, p: int, stream: bool) -> dict[int, Handle]:
        return self.processes[p].streams if stream else self.processes[p].handles

    def drop(self, p: int, slot: int, stream: bool = False) -> None:
        """A descriptor (or stream) closed: its file is settled once the process holds no
        other descriptor of it."""
        handle = self.table(p, stream).pop(slot, None)
        if (
            handle is not None
            and handle.file is not None
            and not self.holds(p, handle.file)
        ):
            self.settle(handle.file, p)

    def open(
        self, p: int, slot: int, path: str, flags: str, stream: bool = False
    ) -> bool:
        file = self.resolve(path)
        if self.busy_elsewhere(file, p):
            return False
        self.drop(p, slot, stream)
        if file is None and "CREAT" in flags and self.parent(path) in self.names:
            if (
                path in self.names
            ):  # a dangling link: the file may be created at its target
                self.table(p, stream)[slot] = Handle(None, True)
                return not self.busy_elsewhere(None, p)
            file = self.new_file("f")
            self.names[path] = file
        if file is not None and self.kind[file] != "f":
            file = None
        self.table(p, stream)[slot] = Handle(file, "WRONLY" in flags or "RDWR" in flags)
        return True

    def write_through(self, p: int, slot: int, stream: bool = False) -> bool:
        handle = self.table(p, stream).get(slot)
        if handle is None:
            return True  # EBADF
        if handle.file is None:
            return not self.busy_elsewhere(None, p)
        if self.busy_elsewhere(handle.file, p):
            return False
        if handle.writes:
            self.dirty.setdefault(handle.file, set()).add(p)
        return True

    def read_through(self, p: int, slot: int, stream: bool = False) -> bool:
        handle = self.table(p, stream).get(slot)
        return handle is None or not self.busy_elsewhere(handle.file, p)

    # ---- lines ----

    def admit(self, line: str) -> bool:
        """Applies a line; False (and nothing applied) when it breaks the rule or cannot be
        run (a process that does not exist, a second process with one number)."""
        words = line.split()
        p, call, args = int(words[0]), words[1], words[2:]
        if p not in self.processes:
            return call != "exit" and not (call in ("spawn", "fork"))
        slot = (
            int(args[0][1:])
            if args and args[0][:1] in "hs" and args[0][1:].isdigit()
            else -1
        )
        if call in ("open", "creat"):
            return self.open(
                p, slot, args[1], "WRONLY|CREAT|TRUNC" if call == "creat" else args[2]
            )
        if call == "openat":
            return self.open(p, slot, args[2], args[3])
        if call == "fopen":
            return self.open(p, slot, args[1], STREAM_FLAGS[args[2]], stream=True)
        if call == "close":
            self.drop(p, slot)
        elif call == "fclose":
            self.drop(p, slot, stream=True)
        elif call in WRITES:
            return self.write_through(p, slot)
        elif call in ("fwrite", "fread"):
            # C11 7.21.5.3: input directly after output needs fflush or fseek between, output
            # after input needs fseek (what a stream does otherwise is up to its libc)
            stream = self.processes[p].streams.get(slot)
            if stream is not None and {stream.last, call} == {"fread", "fwrite"}:
                return False
            if stream is not None:
                stream.last = call
            if call == "fread":
                return self.read_through(p, slot, stream=True)
            return self.write_through(p, slot, stream=True)
        elif call in ("fseek", "fflush"):
            stream = self.processes[p].streams.get(slot)
            if stream is not None and (call == "fseek" or stream.last == "fwrite"):
                stream.last = ""
            if call == "fflush":
                return True
            # fseek may write the stream's buffer, and SEEK_END reads the size
            return self.read_through(p, slot, stream=True) and self.write_through(
                p, slot, True
            )
        elif call in READS or (call == "lseek" and args[2] in ("END", "DATA", "HOLE")):
            return self.read_through(p, slot)
        elif call in ("sendfile", "copy_file_range"):
            source, out = (
                (args[1], args[0]) if call == "sendfile" else (args[0], args[1])
            )
            if not self.read_through(p, int(source[1:])):
                return False
            return self.write_through(p, int(out[1:]))
        elif call in BY_PATH or call in ("lstat", "fstatat"):
            follow = call not in ("lstat", "fstatat") and args[-1] != "NOFOLLOW"
            return not self.busy_elsewhere(self.resolve(args[0], follow), p)
        elif call in ("fsync", "fdatasync"):
            handle = self.processes[p].handles.get(slot)
            if handle is not None:
                self.settle(handle.file, p)
        elif call in ("dup", "dup2"):
            # dup NEW OLD closes NEW first; dup2 OLD NEW replaces NEW only when OLD is open
            new, old = (args[0], args[1]) if call == "dup" else (args[1], args[0])
            if new == old:
                return call == "dup2"
            original = self.processes[p].handles.get(int(old[1:]))
            if call == "dup" or original is not None:
                self.drop(p, int(new[1:]))
            if original is not None:
                self.processes[p].handles[int(new[1:])] = Handle(
                    original.file, original.writes
                )
        elif call in NAMESPACE:
            self.namespace(call, args)
        elif call in ("fork", "spawn"):
            return self.start(p, int(args[0]), call == "fork")
        elif call == "exit":
            return self.end(p)
        elif call == "tree":
            return not self.busy_elsewhere(None, p)
        return True

    def namespace(self, call: str, args: list[str]) -> None:
        names = self.names
        if call == "rename" and self.can_move(args[0], args[1]):
            self.move(args[0], args[1])
        elif call == "renameat2":
            source, target, flag = args
            if flag == "EXCHANGE":
                if (source in names and target in names and source != target
                        and not target.startswith(source + "/")
                        and not source.startswith(target + "/")):  # fmt: skip
                    self.move(source, "\0swap")
                    self.move(target, source)
                    self.move("\0swap", target)
            elif self.can_move(source, target) and not (
                flag == "NOREPLACE" and target in names
            ):
                self.move(source, target)
        elif call == "unlink":
            if args[0] in names and self.kind[names[args[0]]] != "d":
                self.remove_name(args[0])
        elif call == "link":
            source, target = args
            ok = (
                source in names and target not in names and self.parent(target) in names
            )
            if ok and self.kind[names[source]] != "d":
                names[target] = names[source]
        elif call == "symlink":
            target, path = args
            if path not in names and self.parent(path) in names:
                file = self.new_file("l")
                self.link[file] = target
                names[path] = file
        elif call == "mkdir":
            if args[0] not in names and self.parent(args[0]) in names:
                names[args[0]] = self.new_file("d")
        elif call == "rmdir":
            empty = not any(n.startswith(args[0] + "/") for n in names)
            if args[0] in names and self.kind[names[args[0]]] == "d" and empty:
                del names[args[0]]

    def start(self, p: int, q: int, fork: bool) -> bool:
        if q in self.processes or not 0 < q < MAX_PROCS:
            return False
        parent = self.processes[p]
        child = Process(parent=p)
        if fork:  # the child shares the parent's descriptors, and its streams' buffers
            child.handles = {
                h: Handle(x.file, x.writes) for h, x in parent.handles.items()
            }
            child.streams = {
                s: Handle(x.file, x.writes) for s, x in parent.streams.items()
            }
        self.processes[q] = child
        parent.children.append(q)
        self.started.append(q)
        if fork:
            for file, writers in self.dirty.items():
                if p in writers and self.holds(q, file):
                    writers.add(q)
        return True

    def end(self, q: int) -> bool:
        process = self.processes.get(q)
        if q == 0 or process is None or process.children:
            return False
        del self.processes[q]
        self.processes[process.parent].children.remove(q)
        self.started.remove(q)
        for writers in self.dirty.values():
            writers.discard(q)
        return True


def admissible(sequence: list[str]) -> bool:
    """Whether every line of a sequence keeps the rule (the shrinker's test of a candidate)."""
    admission = Admission()
    return all(admission.admit(line) for line in sequence)


class Generator:
    """Draws calls one at a time; each line goes into the sequence if `Admission` admits it."""

    def __init__(self) -> None:
        self.admission = Admission()
        self.lines: list[str] = []
        self.seed = 0
        self.add("0 spawn 1")

    def add(self, line: str | None) -> None:
        if line is not None and self.admission.admit(line):
            self.lines.append(line)

    def next_seed(self) -> int:
        self.seed += 1
        return self.seed

    # ---- what the draws pick ----

    def handle(self, draw: Draw, p: int, stream: bool = False) -> str:
        held = sorted(self.admission.table(p, stream))
        if held and draw(st.integers(0, 9)) > 0:
            number = int(draw(st.sampled_from(held)))
        else:
            number = int(draw(st.integers(0, (STREAMS if stream else HANDLES) - 1)))
        return f"{'s' if stream else 'h'}{number}"

    @staticmethod
    def path(draw: Draw) -> str:
        return str(draw(st.sampled_from(PATHS)))

    @staticmethod
    def size(draw: Draw, choices: tuple[int, ...] = SIZES) -> int:
        return int(draw(st.sampled_from(choices)))

    @staticmethod
    def times(draw: Draw) -> str:
        def one() -> str:
            kind = draw(st.integers(0, 5))
            if kind == 4:
                return "now"
            if kind == 5:
                return "omit"
            return (
                f"{draw(st.sampled_from(SECONDS))}.{draw(st.sampled_from(NANOSECONDS))}"
            )

        return f"{one()} {one()}"

    @staticmethod
    def open_flags(draw: Draw) -> str:
        access = draw(st.sampled_from(("RDWR", "WRONLY", "RDONLY")))
        extra = [name for name, odds in (("CREAT", 3), ("TRUNC", 1), ("APPEND", 1), ("EXCL", 0))
                 if draw(st.integers(0, 4)) <= odds]  # fmt: skip
        if draw(st.integers(0, 9)) == 0:
            extra.append(
                draw(st.sampled_from(("NOFOLLOW", "CLOEXEC", "DIRECTORY", "SYNC")))
            )
        return "|".join([access, *extra])

    # ---- the calls ----

    KINDS = (
        ("open",) * 6 + ("write",) * 6 + ("pwrite",) * 4 + ("close",) * 5 + ("stat",) * 3
        + ("read",) * 3 + ("fstat",) * 2 + ("rename",) * 3 + ("unlink",) * 2 + ("fsync",) * 2
        + ("writev", "lseek", "truncate", "ftruncate", "dup", "renameat2", "link", "symlink",
           "mkdir", "rmdir", "chmod", "chown", "utimensat", "futimens", "mmap", "sendfile",
           "copy_file_range", "fopen", "fwrite", "fflush", "fclose", "readfile", "readfile",
           "listdir", "fork", "spawn", "exit", "setfl", "efault", "readlink", "fread", "fseek")
    )  # fmt: skip

    def step(self, draw: Draw) -> None:
        """Draws one call; it joins the sequence if the rule admits it."""
        kind = draw(st.sampled_from(self.KINDS))
        p = int(draw(st.sampled_from(sorted(self.admission.processes))))
        self.add(getattr(self, "draw_" + kind)(draw, p))

    def draw_open(self, draw: Draw, p: int) -> str:
        h, path = self.handle(draw, p), self.path(draw)
        call = draw(
            st.sampled_from(("open", "open", "open", "open", "openat", "creat"))
        )
        mode = draw(st.sampled_from(MODES))
        if call == "creat":
            return f"{p} creat {h} {path} {mode}"
        flags = self.open_flags(draw)
        if call == "openat":
            return f"{p} openat {h} cwd {path} {flags} {mode}"
        return f"{p} open {h} {path} {flags} {mode}"

    def draw_write(self, draw: Draw, p: int) -> str:
        return f"{p} write {self.handle(draw, p)} {self.size(draw)} {self.next_seed()}"

    def draw_pwrite(self, draw: Draw, p: int) -> str:
        h, size, offset = (
            self.handle(draw, p),
            self.size(draw),
            self.size(draw, OFFSETS),
        )
        return f"{p} pwrite {h} {size} {offset} {self.next_seed()}"

    def draw_writev(self, draw: Draw, p: int) -> str:
        h = self.handle(draw, p)
        sizes = ",".join(str(self.size(draw, SIZES[:6])) for _ in range(3))
        if draw(st.booleans()):
            return (
                f"{p} pwritev {h} {sizes} {self.size(draw, OFFSETS)} {self.next_seed()}"
            )
        return f"{p} writev {h} {sizes} {self.next_seed()}"

    def draw_read(self, draw: Draw, p: int) -> str:
        h, size = self.handle(draw, p), self.size(draw)
        choice = draw(st.integers(0, 3))
        if choice == 0:
            return f"{p} pread {h} {size} {self.size(draw, OFFSETS)}"
        if choice == 1:
            return f"{p} readv {h} {size},{self.size(draw, SIZES[:6])}"
        if choice == 2:
            return f"{p} preadv {h} {size},7 {self.size(draw, OFFSETS)}"
        return f"{p} read {h} {size}"

    def draw_fread(self, draw: Draw, p: int) -> str:
        return f"{p} fread {self.handle(draw, p, stream=True)} {self.size(draw, SIZES[:7])}"

    def draw_lseek(self, draw: Draw, p: int) -> str:
        whence = draw(st.sampled_from(("SET", "CUR", "END", "DATA", "HOLE")))
        return f"{p} lseek {self.handle(draw, p)} {self.size(draw, OFFSETS)} {whence}"

    def draw_ftruncate(self, draw: Draw, p: int) -> str:
        return f"{p} ftruncate {self.handle(draw, p)} {self.size(draw, LENGTHS)}"

    def draw_truncate(self, draw: Draw, p: int) -> str:
        return f"{p} truncate {self.path(draw)} {self.size(draw, LENGTHS)}"

    def draw_fsync(self, draw: Draw, p: int) -> str:
        return f"{p} {draw(st.sampled_from(('fsync', 'fdatasync')))} {self.handle(draw, p)}"

    def draw_close(self, draw: Draw, p: int) -> str:
        return f"{p} close {self.handle(draw, p)}"

    def draw_dup(self, draw: Draw, p: int) -> str:
        first, second = self.handle(draw, p), self.handle(draw, p)
        return f"{p} {draw(st.sampled_from(('dup', 'dup2')))} {first} {second}"

    def draw_setfl(self, draw: Draw, p: int) -> str:
        flag = draw(st.sampled_from(("APPEND", "RDONLY", "NONBLOCK")))
        return f"{p} setfl {self.handle(draw, p)} {flag}"

    def draw_rename(self, draw: Draw, p: int) -> str:
        return f"{p} rename {self.path(draw)} {self.path(draw)}"

    def draw_renameat2(self, draw: Draw, p: int) -> str:
        flag = draw(st.sampled_from(("NOREPLACE", "EXCHANGE", "0")))
        return f"{p} renameat2 {self.path(draw)} {self.path(draw)} {flag}"

    def draw_unlink(self, draw: Draw, p: int) -> str:
        return f"{p} unlink {self.path(draw)}"

    def draw_link(self, draw: Draw, p: int) -> str:
        return f"{p} link {self.path(draw)} {self.path(draw)}"

    def draw_symlink(self, draw: Draw, p: int) -> str:
        return f"{p} symlink {draw(st.sampled_from(LINK_TARGETS))} {self.path(draw)}"

    def draw_readlink(self, draw: Draw, p: int) -> str:
        return f"{p} readlink {self.path(draw)}"

    def draw_mkdir(self, draw: Draw, p: int) -> str:
        return f"{p} mkdir {self.path(draw)} {draw(st.sampled_from(('0755', '0700', '01777')))}"

    def draw_rmdir(self, draw: Draw, p: int) -> str:
        return f"{p} rmdir {draw(st.sampled_from(DIRECTORIES))}"

    def draw_chmod(self, draw: Draw, p: int) -> str:
        mode = draw(st.sampled_from(MODES))
        if draw(st.booleans()):
            return f"{p} fchmod {self.handle(draw, p)} {mode}"
        return f"{p} chmod {self.path(draw)} {mode}"

    def draw_chown(self, draw: Draw, p: int) -> str:
        owner = draw(st.sampled_from(("65534 65534", "0 0", "-1 65534")))
        if draw(st.booleans()):
            return f"{p} fchown {self.handle(draw, p)} {owner}"
        return f"{p} chown {self.path(draw)} {owner}"

    def draw_utimensat(self, draw: Draw, p: int) -> str:
        flag = draw(st.sampled_from(("0", "NOFOLLOW")))
        return f"{p} utimensat {self.path(draw)} {self.times(draw)} {flag}"

    def draw_futimens(self, draw: Draw, p: int) -> str:
        return f"{p} futimens {self.handle(draw, p)} {self.times(draw)}"

    def draw_stat(self, draw: Draw, p: int) -> str:
        path = self.path(draw)
        call = draw(
            st.sampled_from(("stat", "lstat", "statx", "fstatat", "statx-nofollow"))
        )
        if call == "statx":
            return f"{p} statx {path} 0"
        if call == "statx-nofollow":
            return f"{p} statx {path} NOFOLLOW"
        return f"{p} {call} {path}"

    def draw_fstat(self, draw: Draw, p: int) -> str:
        return f"{p} fstat {self.handle(draw, p)}"

    def draw_mmap(self, draw: Draw, p: int) -> str:
        length = draw(st.sampled_from((4096, 10_000, 200_000, 1_200_000)))
        offset = draw(st.sampled_from((0, 4096, 65_536)))
        return f"{p} mmap {self.handle(draw, p)} {length} {offset}"

    def draw_sendfile(self, draw: Draw, p: int) -> str:
        out, source = self.handle(draw, p), self.handle(draw, p)
        offset = draw(st.sampled_from((-1, 0, 100)))
        return f"{p} sendfile {out} {source} {offset} {self.size(draw)}"

    def draw_copy_file_range(self, draw: Draw, p: int) -> str:
        source, out = self.handle(draw, p), self.handle(draw, p)
        return f"{p} copy_file_range {source} {out} {self.size(draw)}"

    def draw_fopen(self, draw: Draw, p: int) -> str:
        mode = draw(st.sampled_from(tuple(STREAM_FLAGS)))
        return f"{p} fopen {self.handle(draw, p, stream=True)} {self.path(draw)} {mode}"

    def draw_fwrite(self, draw: Draw, p: int) -> str:
        s = self.handle(draw, p, stream=True)
        return f"{p} fwrite {s} {self.size(draw, SIZES[:7])} {self.next_seed()}"

    def draw_fseek(self, draw: Draw, p: int) -> str:
        whence = draw(st.sampled_from(("SET", "CUR", "END")))
        return f"{p} fseek {self.handle(draw, p, stream=True)} {self.size(draw, OFFSETS)} {whence}"

    def draw_fflush(self, draw: Draw, p: int) -> str:
        return f"{p} fflush {self.handle(draw, p, stream=True)}"

    def draw_fclose(self, draw: Draw, p: int) -> str:
        return f"{p} fclose {self.handle(draw, p, stream=True)}"

    def draw_readfile(self, draw: Draw, p: int) -> str:
        return f"{p} readfile {self.path(draw)}"

    def draw_listdir(self, draw: Draw, p: int) -> str:
        return f"{p} listdir {draw(st.sampled_from(('.', 'd', 'e')))}"

    def free_process(self) -> int | None:
        free = [q for q in range(1, MAX_PROCS) if q not in self.admission.processes]
        return free[0] if free else None

    def draw_fork(self, draw: Draw, p: int) -> str | None:
        q = self.free_process()
        return None if q is None else f"{p} fork {q}"

    def draw_spawn(self, draw: Draw, p: int) -> str | None:
        q = self.free_process()
        return None if q is None else f"{p} spawn {q}"

    def draw_exit(self, draw: Draw, p: int) -> str | None:
        processes = self.admission.processes
        ending = sorted(
            q for q, proc in processes.items() if q != 0 and not proc.children
        )
        return f"{draw(st.sampled_from(ending))} exit" if ending else None

    def draw_efault(self, draw: Draw, p: int) -> str:
        return f"{p} efault {draw(st.sampled_from(EFAULT_CALLS))}"

    def finish(self) -> list[str]:
        """The sequence: every process but 0 ends (children first), then 0 lists the tree."""
        for q in reversed(list(self.admission.started)):
            self.add(f"{q} exit")
        self.add("0 tree")
        return self.lines


def sequences(max_calls: int = 30) -> st.SearchStrategy[list[str]]:
    """Whole sequences, for @given."""

    @st.composite
    def build(draw: Draw) -> list[str]:
        generator = Generator()
        for _ in range(draw(st.integers(1, max_calls))):
            generator.step(draw)
        return generator.finish()

    return build()
