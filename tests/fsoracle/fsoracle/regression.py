"""Regression files: minimal sequences, one per defect, with the runs that fail today.

    # What the sequence shows, in plain words (any number of comment lines).
    # fails ram/user disk/user: what goes wrong there, in plain words
    0 open h0 a RDWR|CREAT 0644
    ...

A `# fails MODE/USER...: REASON` line marks those runs (USER: `root` or `user`, an ordinary
user) as expected failures; every other run of the file must match the oracle. A
`# crash TARGET MODE AFTER` line makes it a crash check instead (fsoracle.crash): TARGET
(`program`, `node`, `scheduler`) killed in MODE after line AFTER. `# repeat N` runs it N times,
every run compared (for a defect that loses a race most of the time, not always)."""

from dataclasses import dataclass, field
from pathlib import Path

REGRESSIONS = Path(__file__).resolve().parents[1] / "regressions"


@dataclass
class Regression:
    name: str
    sequence: list[str]
    comments: list[str] = field(default_factory=list)
    fails: dict[str, str] = field(default_factory=dict)  # "mode/user" -> why
    crash: tuple[str, str, int] | None = (
        None  # killed: what, in which mode, after which line
    )
    repeat: int = 1  # runs of it, each compared

    def text(self) -> str:
        lines = [f"# {c}" for c in self.comments]
        reasons: dict[str, list[str]] = {}
        for run, why in self.fails.items():
            reasons.setdefault(why, []).append(run)
        lines += [f"# fails {' '.join(runs)}: {why}" for why, runs in reasons.items()]
        return "\n".join([*lines, *self.sequence]) + "\n"


def load(path: Path) -> Regression:
    regression = Regression(path.stem, [])
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("# fails "):
            runs, _, why = line[len("# fails ") :].partition(":")
            if not why.strip() or not runs.split():
                raise ValueError(
                    f"{path}:{number}: expected '# fails MODE/USER ...: REASON'"
                )
            for run in runs.split():
                regression.fails[run] = why.strip()
        elif line.startswith("# crash "):
            words = line.split()
            if len(words) != 5 or not words[4].isdigit():
                raise ValueError(
                    f"{path}:{number}: expected '# crash TARGET MODE AFTER'"
                )
            regression.crash = (words[2], words[3], int(words[4]))
        elif line.startswith("# repeat "):
            count = line.split()[2]
            if not count.isdigit() or int(count) < 1:
                raise ValueError(
                    f"{path}:{number}: expected '# repeat N', N at least 1"
                )
            regression.repeat = int(count)
        elif line.startswith("#"):
            regression.comments.append(line[1:].strip())
        else:
            regression.sequence.append(line)
    if not regression.sequence or regression.sequence[-1] != "0 tree":
        raise ValueError(f"{path}: a sequence ends with '0 tree'")
    return regression


def every() -> list[Regression]:
    return [load(path) for path in sorted(REGRESSIONS.glob("*.seq"))]
