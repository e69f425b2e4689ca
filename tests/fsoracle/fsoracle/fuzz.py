"""The long run: generated sequences (and crashes) for hours, each new difference shrunk and
saved as a regression file with the seed that found it, progress on one line per batch.

    python -m fsoracle.fuzz --hours 8 --out results/fsoracle     (make fuzz HOURS=8)

A difference found once is not searched for again in the same run (it joins the known defects
for the rest of it), so that the hours go to new ones."""

import argparse
import signal
import sys
import time
from pathlib import Path

from fsoracle.compare import Difference
from fsoracle.harness import Workspace, current_user, ordinary_user
from fsoracle.known import KNOWN, KnownDefect, call_of, never
from fsoracle.regression import Regression
from fsoracle.search import Tally, crash_hunt, hunt, signature


def same_as(found: Difference) -> KnownDefect:
    """A defect that explains differences like `found` (same mode, user, call and field)."""
    mark = signature(found)
    return KnownDefect(f"found-{'-'.join(mark)}", str(found),
                       lambda d, line, s: signature(d) == mark)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fsoracle.fuzz", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--hours", type=float, default=1.0, help="how long (default 1)")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="first seed")
    parser.add_argument("--batch", type=int, default=50, help="sequences per seed")
    parser.add_argument("--max-calls", type=int, default=40, help="calls per sequence")
    parser.add_argument("--out", type=Path, default=Path("results/fsoracle"))
    args = parser.parse_args(argv)
    if args.hours <= 0 or args.batch < 1 or args.max_calls < 1:
        parser.error("--hours, --batch and --max-calls must be positive")
    args.out.mkdir(parents=True, exist_ok=True)
    # SIGTERM ends the run as Ctrl-C does: the daemons stop and the directories go.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    users = [current_user()] + ([u] if (u := ordinary_user()) is not None else [])
    known = list(KNOWN)
    tally, failures = Tally(), 0
    deadline = time.monotonic() + args.hours * 3600
    seed = args.seed
    with Workspace() as workspace:
        while time.monotonic() < deadline:
            finding = hunt(workspace, users, args.batch, seed=seed, known=known,
                           max_calls=args.max_calls, tally=tally)  # fmt: skip
            if finding is not None:
                failures += 1
                first = finding.verdict.new[0]
                known.append(same_as(first))
                save(args.out / f"seed{seed}-{call_of(first) or 'tree'}.seq", seed,
                     finding.sequence, finding.verdict.report(finding.sequence))  # fmt: skip
            crash = crash_hunt(workspace, users, max(1, args.batch // 5), seed=seed,
                               known=known, tally=tally)  # fmt: skip
            if crash is not None:
                failures += 1
                known.append(KnownDefect(f"crash-{seed}", crash.problems[0], never,
                                         crash_matches=lambda p, *_, c=crash: p in c.problems))  # fmt: skip
                save(args.out / f"seed{seed}-crash.seq", seed, crash.sequence, crash.report(),
                     crash=f"{crash.crash.target} {crash.crash.mode} {crash.crash.after}")  # fmt: skip
            rate = tally.sequences / max(tally.elapsed, 1e-9)
            print(f"seed {seed}: {tally.sequences} sequences, {tally.runs} runs, {failures} "
                  f"new failures, {rate:.1f} sequences/s, {tally.elapsed / 60:.1f} min",
                  flush=True)  # fmt: skip
            seed += 1
    seen = ", ".join(f"{key} {count}" for key, count in tally.known.most_common())
    print(f"known defects seen (sequences): {seen or 'none'}")
    print(
        f"done: {failures} new failures in {args.out}"
        if failures
        else "done: nothing new"
    )
    return 1 if failures else 0


def save(
    path: Path, seed: int, sequence: list[str], report: str, crash: str = ""
) -> None:
    comments = [f"Found by python -m fsoracle.fuzz, seed {seed}.", *report.splitlines()]
    regression = Regression(path.stem, sequence, [c for c in comments if c.strip()])
    text = regression.text()
    if crash:
        text = f"# crash {crash}\n{text}"
    path.write_text(text)
    print(f"new failure, saved in {path}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
