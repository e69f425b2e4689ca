"""Defects of libharmonia the tester has found and that are not fixed yet, each with the rule
that recognises its differences. A generated sequence whose runs differ from the oracle only in
ways these explain does not fail the fixed-seed budget; any other difference does. Each defect
has a minimal sequence in tests/fsoracle/regressions/, run in every mode as a strict expected
failure: when a fix lands, that test passes, fails as XPASS, and the defect leaves this list."""

from collections.abc import Callable
from dataclasses import dataclass

from fsoracle.compare import Difference


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


def called(sequence: list[str], *calls: str) -> bool:
    return any(line.split()[1] in calls for line in sequence)


def shows_fewer_bytes(line: list[Difference]) -> bool:
    """Whether a line's differences show a file (or a read) shorter than the oracle's."""
    return any(
        d.field.rsplit(".", 1)[-1] in ("size", "bytes", "n", "ret")
        and isinstance(d.expected, int) and isinstance(d.got, int) and d.got < d.expected
        for d in line
    )  # fmt: skip


def data_field(difference: Difference) -> bool:
    """A field that shows a file's bytes, size or the time they changed."""
    last = difference.field.rsplit(".", 1)[-1]
    return last in ("size", "bytes", "hash", "n", "ret", "content", "mtime", "atime")


#: errno before each call; a call that leaves errno alone prints it.
SENTINEL = 4242


def tree_path(difference: Difference) -> str:
    """The path a tree difference is about ('' for other lines)."""
    if difference.index == -1:
        return difference.call
    if call_of(difference) == "tree" and difference.field.startswith("entries."):
        return difference.field[len("entries.") :].rsplit(".", 1)[0]
    return ""


def renamed_or_unlinked(path: str, sequence: list[str], calls: tuple[str, ...] = (
        "rename", "renameat2", "unlink")) -> bool:  # fmt: skip
    """Whether a line renames, exchanges or unlinks that path or a directory above it (either
    end of a rename)."""
    for line in sequence:
        words = line.split()
        if words[1] in calls and any(
            path == w or path.startswith(w + "/") for w in words[2:4]
        ):
            return True
    return False


def pwrite_on_append(sequence: list[str]) -> bool:
    """Whether a pwrite or pwritev went through a descriptor in O_APPEND mode."""
    append: dict[tuple[str, str], bool] = {}
    for line in sequence:
        words = line.split()
        p, call, args = words[0], words[1], words[2:]
        if call in ("open", "openat", "creat"):
            append[(p, args[0])] = call != "creat" and "APPEND" in args[-2]
        elif call == "setfl":
            append[(p, args[0])] = "APPEND" in args[1]
        elif call == "dup":
            append[(p, args[0])] = append.get((p, args[1]), False)
        elif call == "dup2":
            append[(p, args[1])] = append.get((p, args[0]), False)
        elif call == "fork":  # the child has the parent's descriptors
            append.update(
                {(args[0], h): on for (q, h), on in list(append.items()) if q == p}
            )
        elif call in ("pwrite", "pwritev") and append.get((p, args[0]), False):
            return True
    return False


def setid_only(difference: Difference) -> bool:
    """A mode that differs from the oracle's only by set-user-ID or set-group-ID bits kept."""
    if not difference.field.endswith("mode") or not isinstance(difference.got, str):
        return False
    expected, got = int(str(difference.expected), 8), int(difference.got, 8)
    return expected != got and (expected | (got & 0o6000)) == got


def read_where_oracle_failed(d: Difference, line: list[Difference]) -> bool:
    return call_of(d) in ("read", "pread", "readv", "preadv") and any(
        x.field == "ret" and x.expected == -1 for x in line
    )


KNOWN: list[KnownDefect] = [
    KnownDefect(
        "close-to-open",
        "through buffer nodes, after the writer closed a file or exited, stat shows size 0 and "
        "reads return nothing (in the writer too) until the nodes drain it",
        lambda d, line, s: (
            d.mode == "buffers"
            and d.index >= 0
            and data_field(d)
            and shows_fewer_bytes(line)
        ),
    ),
    KnownDefect(
        "setid-bits-survive-a-write",
        "a write by an ordinary user leaves the set-user-ID and set-group-ID bits (fstat "
        "right after it; through buffer nodes, for good)",
        lambda d, line, s: d.user == "user" and setid_only(d),
        taints=False,
    ),
    KnownDefect(
        "read-on-write-only-descriptor",
        "through buffer nodes, a read on a write-only descriptor returns bytes instead of EBADF",
        lambda d, line, s: d.mode == "buffers" and read_where_oracle_failed(d, line),
    ),
    KnownDefect(
        "seek-data-and-hole",
        "through buffer nodes, lseek with SEEK_DATA or SEEK_HOLE fails while the nodes hold "
        "the file's bytes",
        lambda d, line, s: (
            d.mode == "buffers"
            and call_of(d) == "lseek"
            and d.call.split()[-1] in ("DATA", "HOLE")
        ),
    ),
    KnownDefect(
        "unlinked-file-comes-back",
        "through buffer nodes, a file unlinked (after its close, or while open) is recreated "
        "by the drain",
        lambda d, line, s: (
            d.mode == "buffers"
            and d.expected == "absent"
            and bool(tree_path(d))
            and renamed_or_unlinked(tree_path(d), s)
        ),
    ),
    KnownDefect(
        "rename-leaves-bytes-at-the-old-name",
        "through buffer nodes, a file renamed after its close or while open ends empty under "
        "its new name, and the drain recreates the old name with the bytes",
        lambda d, line, s: (
            d.mode == "buffers"
            and bool(tree_path(d))
            and called(s, "rename", "renameat2")
            and (data_field(d) or d.field.endswith("ino"))
        ),
    ),
    KnownDefect(
        "times-set-after-close",
        "through buffer nodes, times set after the close (by path or descriptor) are replaced "
        "by the drain's time",
        lambda d, line, s: (
            d.mode == "buffers"
            and d.field.rsplit(".", 1)[-1] in ("mtime", "atime")
            and d.expected != "clock"
            and d.got == "clock"
        ),
    ),
    KnownDefect(
        "pwrite-on-append-descriptor",
        "pwrite on an O_APPEND descriptor writes at its offset instead of appending",
        lambda d, line, s: (
            any(w.split()[1] in ("pwrite", "pwritev") for w in s[: max(d.index, 0)])
            and any("APPEND" in w for w in s[: max(d.index, 0)])
            and data_field(d)
        ),
    ),
    KnownDefect(
        "errno-after-success",
        "a call that succeeds changes errno (open, creat, openat and fopen that create or open "
        "a file leave ENOENT; fork leaves EINVAL through buffer nodes)",
        lambda d, line, s: d.field == "errno" and d.expected == SENTINEL,
        taints=False,
    ),
    KnownDefect(
        "recovery-after-rename",
        "with SSD staging, a file renamed while open and then killed is recovered under the "
        "name it was opened under, and the new name stays empty",
        never,
        crash_matches=lambda problem, target, mode, ran: (
            mode == "disk" and called(ran, "rename", "renameat2")
        ),
    ),
    KnownDefect(
        "crash-after-unlink",
        "through buffer nodes, a file unlinked (or renamed away) before the program was killed "
        "is recreated by the drain",
        never,
        crash_matches=lambda problem, target, mode, ran: (
            mode == "buffers" and called(ran, "unlink", "rename", "renameat2")
        ),
    ),
    KnownDefect(
        "efault-path-crashes",
        "a call given an invalid path pointer kills the program (SIGSEGV) instead of failing "
        "with EFAULT",
        lambda d, line, s: call_of(d) == "efault",
    ),
]
