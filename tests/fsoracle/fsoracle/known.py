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


def data_field(difference: Difference) -> bool:
    """A field that shows a file's bytes, size or the time they changed."""
    last = difference.field.rsplit(".", 1)[-1]
    return last in ("size", "bytes", "hash", "n", "ret", "content", "mtime", "atime")


def exited_holding_writes(sequence: list[str]) -> bool:
    """Whether a process exited while a descriptor or stream it had written through was still
    open (its exit closed it)."""
    written: dict[str, set[str]] = {}
    for line in sequence:
        p, call, *args = line.split()
        if call in ("write", "pwrite", "writev", "pwritev", "ftruncate", "fwrite"):
            written.setdefault(p, set()).add(args[0])
        elif call in ("close", "fclose", "open", "openat", "creat", "fopen", "dup"):
            written.get(p, set()).discard(args[0])
        elif call == "exit" and written.get(p):
            return True
    return False


#: errno before each call; a call that leaves errno alone prints it.
SENTINEL = 4242


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


def setid_file_with_stream(sequence: list[str]) -> bool:
    """Whether a file was made with a set-user-ID or set-group-ID mode and a stream opened."""
    made = any(
        line.split()[1] in ("open", "openat", "creat") and line.split()[-1][:2] in ("04", "02", "06")
        for line in sequence
    )  # fmt: skip
    return made and any(line.split()[1] == "fopen" for line in sequence)


def read_where_oracle_failed(d: Difference, line: list[Difference]) -> bool:
    return call_of(d) in ("read", "pread", "readv", "preadv") and any(
        x.field == "ret" and x.expected == -1 for x in line
    )


KNOWN: list[KnownDefect] = [
    KnownDefect(
        "exit-to-open",
        "through buffer nodes, after a writer exits without closing a file, stat and reads see "
        "the file as it was before some of its writes (often empty) until the nodes drain it, "
        "or, once in a few runs, the size of an earlier, deleted file with the same inode",
        lambda d, line, s: (
            d.mode == "buffers"
            and d.index >= 0
            and data_field(d)
            and exited_holding_writes(s[: d.index])
        ),
    ),
    KnownDefect(
        "stream-and-descriptor-on-a-setid-file",
        "on a set-ID file written by an ordinary user, a stream's full buffer reaches the file "
        "only at fclose, after writes made later through another descriptor",
        lambda d, line, s: (
            d.user == "user" and data_field(d) and setid_file_with_stream(s)
        ),
    ),
    KnownDefect(
        "write-to-a-file-created-read-only",
        "through buffer nodes, an ordinary user's writes to a file created read-only (through "
        "the creating open's descriptor) are refused by the node: 'Permission denied' on stderr",
        lambda d, line, s: (
            d.mode == "buffers"
            and d.user == "user"
            and d.field == "stderr"
            and "Permission denied (as uid" in str(d.got)
        ),
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
        "pwrite-on-append-descriptor",
        "pwrite on an O_APPEND descriptor writes at its offset instead of appending",
        lambda d, line, s: (
            data_field(d) and pwrite_on_append(s if d.index < 0 else s[: d.index + 1])
        ),
        crash_matches=lambda problem, target, mode, ran: pwrite_on_append(ran),
    ),
    KnownDefect(
        "errno-after-success",
        "a call that succeeds changes errno (rename of a file with staged writes leaves "
        "ENOENT)",
        lambda d, line, s: d.field == "errno" and d.expected == SENTINEL,
        taints=False,
    ),
]
