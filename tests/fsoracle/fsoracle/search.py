"""Generated sequences run until one shows a difference no known defect explains, which
Hypothesis then shrinks to a minimal sequence."""

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from fsoracle.compare import Difference
from fsoracle.crash import Crash, check_crash, crashes, explained
from fsoracle.differential import Verdict, check
from fsoracle.generator import admissible, sequences
from fsoracle.harness import LIBRARY_MODES, User, Workspace
from fsoracle.known import KNOWN, KnownDefect, call_of


class NewDifference(Exception):
    """A sequence's runs differ from the oracle in a way no known defect explains."""


@dataclass
class Tally:
    """What a search has run so far."""

    sequences: int = 0
    runs: int = 0
    known: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass
class Finding:
    sequence: list[str]
    verdict: Verdict


def hunt(workspace: Workspace, users: list[User], examples: int, seed: int | None = None,
         known: Iterable[KnownDefect] = KNOWN, max_calls: int = 30, tally: Tally | None = None,
         progress: Callable[[Tally], None] | None = None,
         shrink_seconds: float = 60,
         modes: Iterable[str] = LIBRARY_MODES) -> Finding | None:  # fmt: skip
    """Runs up to `examples` generated sequences (the same ones every time when `seed` is
    None) in `modes`; returns the first new difference, shrunk by Hypothesis for at most
    `shrink_seconds` and then line by line (`minimize`), or None."""
    modes = list(modes)
    known = list(known)
    tally = tally if tally is not None else Tally()
    last: list[Finding] = []
    shrink_until: list[float] = []

    @search_settings(examples, seed)
    @given(sequences(max_calls))
    def trial(sequence: list[str]) -> None:
        if shrink_until and time.monotonic() > shrink_until[0]:
            # Shrinking has had its time: only the smallest failure so far still fails, so that
            # Hypothesis ends with it at once.
            if sequence == last[-1].sequence:
                raise NewDifference(last[-1].verdict.report(sequence))
            return
        verdict = check(workspace, sequence, users, modes=modes, known=known)
        tally.sequences += 1
        tally.runs += verdict.runs
        for key in verdict.known:
            tally.known[key] += 1
        if progress is not None:
            progress(tally)
        if verdict.new:
            if not shrink_until:
                shrink_until.append(time.monotonic() + shrink_seconds)
            last.append(
                Finding(sequence, verdict)
            )  # Hypothesis's smallest failure so far
            raise NewDifference(verdict.report(sequence))

    if seed is not None:
        trial = hypothesis_seed(seed)(trial)
    try:
        trial()
    except (
        NewDifference,
        Flaky,
    ):  # Flaky: timing made a failure come and go; still one
        return minimize(workspace, last[-1], users, known)
    return None


def search_settings(examples: int, seed: int | None) -> settings:
    """Hypothesis's settings for a search: `examples` sequences, the same ones every time when
    `seed` is None, no example database, failures shrunk, quietly."""
    return settings(max_examples=examples, derandomize=seed is None, database=None,
                    deadline=None, suppress_health_check=list(HealthCheck),
                    phases=[Phase.generate, Phase.shrink], verbosity=Verbosity.quiet,
                    report_multiple_bugs=False)  # fmt: skip


def signature(difference: Difference) -> tuple[str, str, str, str]:
    return (difference.mode, difference.user, call_of(difference), difference.field)


def minimize(workspace: Workspace, finding: Finding, users: list[User],
             known: Iterable[KnownDefect] = KNOWN) -> Finding:  # fmt: skip
    """Removes lines, and simplifies the arguments of those left, while the first new
    difference stays (same mode, user, call and field), in that mode and as that user alone."""
    known = list(known)
    target = finding.verdict.new[0]
    user = next(u for u in users if u.label == target.user)

    def still(sequence: list[str]) -> Verdict | None:
        verdict = check(workspace, sequence, [user], modes=[target.mode], known=known)
        same = [d for d in verdict.new if signature(d) == signature(target)]
        return verdict if same else None

    best = finding
    changed = True
    while changed:
        changed = False
        for candidate in simpler(best.sequence):
            if not admissible(candidate):
                continue
            verdict = still(candidate)
            if verdict is not None:
                best, changed = Finding(candidate, verdict), True
                break
    return best


def simpler(sequence: list[str]) -> Iterator[list[str]]:
    """Smaller variants of a sequence: a line removed (never the closing tree), then one
    argument made smaller (a flag dropped, a number made 1 or 0)."""
    for index in range(len(sequence) - 2, -1, -1):
        yield sequence[:index] + sequence[index + 1 :]
    for index, line in enumerate(sequence):
        words = line.split()
        for k, word in enumerate(words[2:], start=2):
            options = []
            if "|" in word:
                options = ["|".join(p for p in word.split("|") if p != part)
                           for part in word.split("|")[1:]]  # fmt: skip
            elif (
                word.isdigit()
                and int(word) > 1
                and not (word[0] == "0" and len(word) >= 4)
            ):
                options = ["1"] if k == len(words) - 1 else ["1", "0"]
            for option in options:
                yield (
                    sequence[:index]
                    + [" ".join(words[:k] + [option] + words[k + 1 :])]
                    + (sequence[index + 1 :])
                )


@dataclass
class CrashFinding:
    sequence: list[str]
    crash: Crash
    user: str
    problems: list[str]

    def report(self) -> str:
        lines = ["sequence:", *(f"  {line}" for line in self.sequence)]
        lines.append(f"{self.crash}, as {self.user}:")
        return "\n".join([*lines, *(f"  {p}" for p in self.problems)])


def crash_hunt(workspace: Workspace, users: list[User], examples: int, seed: int | None = None,
               known: Iterable[KnownDefect] = KNOWN, max_calls: int = 20,
               tally: Tally | None = None, progress: Callable[[Tally], None] | None = None,
               shrink_seconds: float = 60) -> CrashFinding | None:  # fmt: skip
    """Generated sequences, each killed at a drawn point (crash.crashes) and checked against
    the crash rule; the first problem no known defect explains, shrunk by Hypothesis for at
    most `shrink_seconds`."""
    known = list(known)
    tally = tally if tally is not None else Tally()
    last: list[CrashFinding] = []
    shrink_until: list[float] = []

    @search_settings(examples, seed)
    @given(sequences(max_calls), st.data())
    def trial(sequence: list[str], data: st.DataObject) -> None:
        crash = data.draw(crashes(sequence))
        if shrink_until and time.monotonic() > shrink_until[0]:
            if (sequence, crash) == (last[-1].sequence, last[-1].crash):
                raise NewDifference(last[-1].report())
            return
        for user in users:
            problems = explained(check_crash(workspace, sequence, user, crash), crash,
                                 sequence, known)  # fmt: skip
            tally.runs += 1
            if problems:
                if not shrink_until:
                    shrink_until.append(time.monotonic() + shrink_seconds)
                last.append(CrashFinding(sequence, crash, user.label, problems))
                raise NewDifference("\n".join(problems))
        tally.sequences += 1
        if progress is not None:
            progress(tally)

    if seed is not None:
        trial = hypothesis_seed(seed)(trial)
    try:
        trial()
    except (NewDifference, Flaky):
        return last[-1]
    return None
