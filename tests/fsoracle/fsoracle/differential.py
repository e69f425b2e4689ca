"""One sequence in every mode and as every user, compared with the oracle (the same sequence,
same user, no library); the differences sorted into known defects and new ones."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from fsoracle.compare import Difference, differences
from fsoracle.harness import LIBRARY_MODES, User, Workspace
from fsoracle.known import KNOWN, KnownDefect


@dataclass
class Verdict:
    """What one sequence showed: per known defect the differences it explains, and the first
    difference of each run that no known defect explains."""

    known: dict[str, list[Difference]] = field(default_factory=dict)
    new: list[Difference] = field(default_factory=list)
    runs: int = 0

    def report(self, sequence: list[str]) -> str:
        lines = ["sequence:", *(f"  {line}" for line in sequence)]
        for difference in self.new:
            lines.append(f"new: {difference}")
        for key, found in self.known.items():
            lines.append(f"known ({key}): {found[0]}")
        return "\n".join(lines)


def classify(found: list[Difference], sequence: list[str],
             known: Iterable[KnownDefect] = KNOWN) -> tuple[dict[str, list[Difference]],
                                                            Difference | None]:  # fmt: skip
    """Walks one run's differences line by line, in order. A known defect explains some fields
    of a line (seeing the line's other differences); if it changes what the program does next
    (its `taints`), the rest of the run is its consequence. The first field no known defect
    explains is returned as new."""
    known = list(known)
    explained: dict[str, list[Difference]] = {}
    lines: dict[int, list[Difference]] = {}
    for difference in found:
        lines.setdefault(difference.index, []).append(difference)
    for index in sorted(lines, key=lambda i: i if i >= 0 else 10**6 - i):
        line = lines[index]
        tainted = False
        for difference in line:
            defect = next(
                (k for k in known if k.explains(difference, line, sequence)), None
            )
            if defect is None:
                return explained, difference
            explained.setdefault(defect.key, []).append(difference)
            tainted = tainted or defect.taints
        if tainted:
            break
    return explained, None


def check(workspace: Workspace, sequence: list[str], users: Iterable[User],
          modes: Iterable[str] = LIBRARY_MODES,
          known: Iterable[KnownDefect] = KNOWN) -> Verdict:  # fmt: skip
    verdict = Verdict()
    known = list(known)
    for user in users:
        oracle = workspace.run(sequence, "plain", user)
        for mode in modes:
            run = workspace.run(sequence, mode, user)
            verdict.runs += 1
            explained, new = classify(differences(sequence, oracle, run, mode, user.label),
                                      sequence, known)  # fmt: skip
            for key, found in explained.items():
                verdict.known.setdefault(key, []).extend(found)
            if new is not None:
                verdict.new.append(new)
    return verdict
