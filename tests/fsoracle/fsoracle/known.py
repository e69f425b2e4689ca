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


KNOWN: list[KnownDefect] = []
