"""Defects of libharmonia the tester has found and that are not fixed yet, each with the rule
that recognises its differences. A generated sequence whose runs differ from the oracle only in
ways these explain does not fail the fixed-seed budget; any other difference does. Each defect
has a minimal sequence in tests/fsoracle/regressions/, run in every mode as a strict expected
failure: when a fix lands, that test passes, fails as XPASS, and the defect leaves this list.
(A defect whose minimal sequence fails in some runs only says so in its description and has
none: a strict expected failure of it would pass now and then.)"""

from collections.abc import Callable
from dataclasses import dataclass

from fsoracle.compare import Difference
from fsoracle.harness import through_nodes


@dataclass(frozen=True)
class KnownDefect:
    key: str  # the name of its regression file, without .seq
    description: str
    matches: Callable[[Difference, list[Difference], list[str]], bool]
    taints: bool = True  # whether what follows in the run may be its consequence
    #: for a defect seen after a crash: (problem, killed, mode, lines run before it) -> bool
    crash_matches: Callable[[str, str, str, list[str]], bool] | None = None

    def explains(self, difference: Difference, line: list[Difference],
                 sequence: list[str]) -> bool:  # fmt: skip
        """Whether this defect explains a difference, seen with the other differences of its
        line, in the sequence."""
        return self.matches(difference, line, sequence)

    def explains_crash(
        self, problem: str, target: str, mode: str, ran: list[str]
    ) -> bool:
        """Whether this defect explains a problem of the tree left by a crash, after the
        lines `ran`."""
        return self.crash_matches is not None and self.crash_matches(
            problem, target, mode, ran
        )


def call_of(difference: Difference) -> str:
    """The call of a difference's line (`write`, `stat`...); '' for the tree and the exit."""
    words = difference.call.split()
    return words[1] if difference.index >= 0 and len(words) > 1 else ""


def never(difference: Difference, line: list[Difference], sequence: list[str]) -> bool:
    """For defects seen only after crashes."""
    return False


#: Calls that act on an open descriptor, not by name.
DESCRIPTOR_CALLS = frozenset({
    "read", "pread", "readv", "preadv", "fstat", "lseek", "mmap", "sendfile",
    "copy_file_range", "fread",
})  # fmt: skip
WRITE_CALLS = frozenset({"write", "pwrite", "writev", "pwritev", "ftruncate", "fwrite"})


def data_field(difference: Difference) -> bool:
    """A field that shows a file's bytes, size or the time they changed."""
    last = difference.field.rsplit(".", 1)[-1]
    return last in ("size", "bytes", "hash", "n", "ret", "mtime")


def written_elsewhere_while_open(difference: Difference, sequence: list[str]) -> bool:
    """Whether the descriptor of the difference's call was opened (by name) before another
    process wrote the same name and closed it or exited, and not opened again since."""
    words = difference.call.split()
    if len(words) < 3:
        return False
    process, handle = words[0], words[2]
    opened: dict[tuple[str, str], str] = {}  # (process, handle) -> name
    mine: str | None = None  # the name behind the descriptor, while it stays open
    written_since_open = False
    for line in sequence[: difference.index]:
        p, call, *args = line.split()
        if call in ("open", "openat", "creat", "fopen") and len(args) >= 2:
            opened[(p, args[0])] = args[1]
            if (p, args[0]) == (process, handle):
                mine, written_since_open = args[1], False
        elif (
            call in WRITE_CALLS
            and args
            and p != process
            and mine is not None
            and opened.get((p, args[0])) == mine
        ):
            written_since_open = True
    return mine is not None and written_since_open


def stale_size_as_root(problem: str) -> bool:
    """Whether a crash check's problem is a size, time or read shown as root that differs from
    the oracle's ("buffers/root: line N `CALL`: FIELD: expected X, got Y")."""
    if not problem.startswith("buffers/root: line "):
        return False
    field = problem.split("`: ", 1)[-1].split(":", 1)[0]
    return field.rsplit(".", 1)[-1] in ("size", "mtime", "bytes", "hash")


KNOWN: list[KnownDefect] = [
    KnownDefect(
        "read-of-bytes-another-process-wrote-while-open",
        "through buffer nodes, a descriptor opened before another process wrote the file and "
        "closed it (or exited) reads and fstats the file as it was, until the nodes drain it "
        "or the file is opened again (close-to-open covers opens after the close, as in NFS)",
        lambda d, line, s: (
            through_nodes(d.mode)
            and call_of(d) in DESCRIPTOR_CALLS
            and data_field(d)
            and written_elsewhere_while_open(d, s)
        ),
    ),
    KnownDefect(
        "setgid-set-by-another-process-survives-a-write",
        "through buffer nodes, as an ordinary user, a set-user-ID or set-group-ID bit another "
        "process set after this one opened the file survives this one's write (the node drains "
        "it with its own privilege; the library checks the bits only at open)",
        lambda d, line, s: (
            through_nodes(d.mode)
            and d.user == "user"
            and d.field.endswith(".mode")
            and any(
                w.split()[1] in ("fchmod", "chmod")
                and len(w.split()) > 3
                and w.split()[3].startswith(("02", "04", "06"))
                for w in s
            )
        ),
    ),
    KnownDefect(
        "stat-while-the-scheduler-restarts",
        "through buffer nodes, as root, right after the scheduler is killed and started again a "
        "stat by name shows the PFS file's size, and an open reads the PFS file, not what the "
        "nodes hold, until each node has reported to the new scheduler (no regression file: `0 open h0 a WRONLY|CREAT 0644`, "
        "`0 write h0 4095 1`, `0 close h0`, the scheduler killed, `0 tree` fails as root in "
        "every run tried and as an ordinary user in some)",
        never,
        crash_matches=lambda problem, target, mode, ran: (
            target == "scheduler"
            and through_nodes(mode)
            and stale_size_as_root(problem)
        ),
    ),
]
