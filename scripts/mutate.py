#!/usr/bin/env python3
"""Mutation testing of the policy core (`make mutate`, docs/benchmarks.md).

Two sets of mutants of src/core, each built into core_tests and run against the whole suite:

- the *policy mutants* below, always all of them: every policy's cost function replaced by a
  constant, and its queue order reversed (issue 16: the tests must notice both);
- *operator mutants* from universalmutator (PyPI, regular-expression rules for C++: relational,
  arithmetic and logical operators swapped, constants changed, statements deleted), a seeded
  random sample of them over the files in OPERATOR_FILES.

The tree is copied to a scratch directory (the checkout is never touched), configured once, and
for each mutant the one mutated file is written, core_tests rebuilt (ccache serves every other
file) and run. A mutant is *killed* when core_tests fails or times out, *survives* when it passes,
and is *invalid* when it does not compile (left out of the kill rate). The report (Markdown and
JSON) lists the kill rate per set and every survivor with its diff line.
"""

import argparse
import difflib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPERATOR_FILES = [
    "src/core/scheduler.cpp",
    "src/core/optimizer.cpp",
    "src/core/policies/datawarp.cpp",
    "src/core/policies/optimizing_policy.cpp",
    "src/core/policies/max_buffer_efficiency.cpp",
    "src/core/policies/max_bandwidth.cpp",
    "src/core/policies/fairness.cpp",
    "src/core/policies/min_stall.cpp",
    "src/core/policies/priority.cpp",
]


@dataclass(frozen=True)
class Rewrite:
    """A policy mutant: in `file`, replace the one match of `pattern` by `replacement`."""

    name: str
    file: str
    pattern: str
    replacement: str


def _constant_cost(
    policy: str, file: str, group: str, deferred: str | None
) -> list[Rewrite]:
    """The policy's objective made constant: its group value, its deferral value, or both."""
    mutants = [
        Rewrite(f"{policy}: cost = {value}", file, group, f"return {value};")
        for value in ("0.0", "1.0", "-1.0")
    ]
    if deferred is not None:
        mutants.append(
            Rewrite(f"{policy}: deferral cost = 0", file, deferred, "return 0.0;")
        )
    return mutants


POLICY_MUTANTS = [
    *_constant_cost(
        "max-buffer-efficiency",
        "src/core/policies/max_buffer_efficiency.cpp",
        r"return \(double\(newly_busy\) / g\.total_buffers - bytes / total_capacity\) / 2;",
        None,  # its deferral value is already the constant 0 (Eq. 4 counts scheduled phases)
    ),
    *_constant_cost(
        "max-bandwidth",
        "src/core/policies/max_bandwidth.cpp",
        r"return value;",
        r"return c\.bytes / \(c\.waited \+ d\.mean_until_done\(\)\);",
    ),
    *_constant_cost(
        "fairness",
        "src/core/policies/fairness.cpp",
        r"return -worst;",
        r"return -\(c\.waited \+ d\.backlog\);",
    ),
    *_constant_cost(
        "min-stall",
        "src/core/policies/min_stall.cpp",
        r"return value;",
        r"return -\(c\.waited \+ d\.mean_until_done\(\) - d\.slice\);",
    ),
    Rewrite(
        "optimizing policies: candidate order reversed",
        "src/core/policies/optimizing_policy.cpp",
        r"std::tie\(a\.first, ra\.app, ra\.index\) < std::tie\(b\.first, rb\.app, rb\.index\)",
        "std::tie(a.first, ra.app, ra.index) > std::tie(b.first, rb.app, rb.index)",
    ),
    Rewrite(
        "optimizing policies: random order replaced by request order",
        "src/core/policies/optimizing_policy.cpp",
        r"if \(traits_\.order == CandidateOrder::Fcfs\) return p\.requested;",
        "return p.requested;",
    ),
    Rewrite(
        "datawarp: reservation (its cost) = 0",
        "src/core/policies/datawarp.cpp",
        r"return std::min\(state\(app\)\.info\.declared_bytes, total_capacity\(\)\);",
        "return 0.0;",
    ),
    Rewrite(
        "datawarp: batch queue LIFO instead of FCFS",
        "src/core/policies/datawarp.cpp",
        r"const AppId app = queue_\.front\(\);((?:.|\n)*?)queue_\.pop_front\(\);",
        r"const AppId app = queue_.back();\1queue_.pop_back();",
    ),
    Rewrite(
        "datawarp: head of the queue is its newest job",
        "src/core/policies/datawarp.cpp",
        r"const AppId app = queue_\.front\(\);",
        "const AppId app = queue_.back();",
    ),
    Rewrite(
        "plan-based: cost = 0",
        "src/core/policies/plan_based.cpp",
        r"out\.score \+=\s*std::pow\(start - apps_\[static_cast<size_t>\(app\)\]\.arrival, "
        r"config_\.plan_alpha\);",
        "out.score += 0.0;",
    ),
    Rewrite(
        "batch-reservation policies: queue last come first",
        "src/core/policies/batch_reservations.cpp",
        r"  queue_\.push_back\(app\);",
        "  queue_.push_front(app);",
    ),
    Rewrite(
        "slurm-easy-sjf: longest backfilled first",
        "src/core/policies/slurm_easy.cpp",
        r"return walltime_of\(a\) < walltime_of\(b\);",
        "return walltime_of(a) > walltime_of(b);",
    ),
    Rewrite(
        "batch queue: backfilling ignores the first job's reservation",
        "src/core/scheduler.cpp",
        r"const bool before_shadow = walltime > 0 && now \+ walltime <= shadow;",
        "const bool before_shadow = true;",
    ),
    Rewrite(
        "priority: priority (its ranking key) = constant",
        "src/core/policies/priority.cpp",
        r"if \(p\.request\.priority == top\) level\.push_back\(p\);",
        "level.push_back(p);",
    ),
    Rewrite(
        "priority: equal priorities served last come first",
        "src/core/policies/priority.cpp",
        r"std::tie\(a\.requested, a\.request\.app\) < std::tie\(b\.requested, b\.request\.app\)",
        "std::tie(a.requested, a.request.app) > std::tie(b.requested, b.request.app)",
    ),
]


@dataclass
class Outcome:
    name: str
    file: str
    kind: str  # "policy" or "operator"
    status: str = ""  # killed, survived, invalid
    change: str = ""
    failed_tests: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run(
    cmd: list[str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def copy_tree(dest: Path) -> None:
    """The checkout's files (tracked and new, not ignored) under dest."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def one_line_change(original: str, mutated: str) -> str:
    """The changed lines of a mutant, `-old` / `+new`, for the report."""
    diff = [
        line
        for line in difflib.unified_diff(
            original.splitlines(), mutated.splitlines(), n=0
        )
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return " / ".join(" ".join(line.split()) for line in diff)[:200]


def policy_mutant(rewrite: Rewrite, original: str) -> str:
    mutated, count = re.subn(rewrite.pattern, rewrite.replacement, original)
    if count != 1:
        sys.exit(
            f"mutate: policy mutant '{rewrite.name}' matches {count} times in {rewrite.file}"
        )
    return mutated


def operator_mutants(
    tree: Path, files: list[str], scratch: Path
) -> list[tuple[str, str, str]]:
    """Every universalmutator mutant of `files` as (file, name, text), minus those that change
    only a comment or are the same code as another mutant."""
    mutate = Path(sys.executable).with_name("mutate")
    found: list[tuple[str, str, str]] = []
    for relative in files:
        out = scratch / Path(relative).stem
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                str(mutate),
                str(tree / relative),
                "cpp",
                "--noCheck",
                "--mutantDir",
                str(out),
            ],
            capture_output=True,
            check=True,
            cwd=out,  # it writes its scratch files into the working directory
        )
        original = (tree / relative).read_text()
        seen = {" ".join(original.split())}
        for path in sorted(out.iterdir(), key=lambda p: int(p.name.split(".")[-2])):
            text = path.read_text()
            change = one_line_change(original, text)
            old = change.split(" / ")[0]
            if old.startswith(("-//", "- //")) or "-/*" in old:
                continue
            key = " ".join(text.split())
            if key in seen:
                continue
            seen.add(key)
            found.append((relative, path.name, text))
    return found


def failed_tests(output: str) -> list[str]:
    names = re.findall(r"^\[  FAILED  \] (\S+) \(", output, flags=re.MULTILINE)
    return sorted(set(names))


def try_mutant(
    tree: Path, build: Path, outcome: Outcome, text: str, original: str
) -> None:
    target = tree / outcome.file
    start = time.monotonic()
    target.write_text(text)
    try:
        built = run(
            ["cmake", "--build", str(build), "-j", "2", "--target", "core_tests"],
            tree,
            600,
        )
        if built is None or built.returncode != 0:
            outcome.status = "invalid"
            return
        tested = run([str(build / "tests/core/core_tests")], tree, 120)
        if tested is None:
            outcome.status = "killed"
            outcome.failed_tests = ["(timeout)"]
        elif tested.returncode != 0:
            outcome.status = "killed"
            outcome.failed_tests = failed_tests(tested.stdout)
        else:
            outcome.status = "survived"
    finally:
        target.write_text(original)
        # The restored file must not look older than its object, or the next build skips it.
        os.utime(target)
        outcome.seconds = time.monotonic() - start


def summary(outcomes: list[Outcome], kind: str) -> tuple[int, int, int]:
    mine = [o for o in outcomes if o.kind == kind]
    killed = sum(o.status == "killed" for o in mine)
    survived = sum(o.status == "survived" for o in mine)
    invalid = sum(o.status == "invalid" for o in mine)
    return killed, survived, invalid


def report(outcomes: list[Outcome], sample: int, seed: int, total_operator: int) -> str:
    lines = ["# Mutation testing of src/core", ""]
    lines += ["| mutants | killed | survived | invalid (do not compile) | kill rate |"]
    lines += ["| --- | ---: | ---: | ---: | ---: |"]
    for kind, label in (
        ("policy", "policy mutants (cost constant, queue reversed)"),
        ("operator", f"operator mutants ({sample} of {total_operator}, seed {seed})"),
    ):
        killed, survived, invalid = summary(outcomes, kind)
        rate = (
            f"{100 * killed / (killed + survived):.0f} %" if killed + survived else "-"
        )
        lines.append(f"| {label} | {killed} | {survived} | {invalid} | {rate} |")
    lines += ["", "## Policy mutants", "", "| mutant | result | tests that failed |"]
    lines += ["| --- | --- | --- |"]
    for o in outcomes:
        if o.kind == "policy":
            tests = ", ".join(o.failed_tests[:4]) + (
                " ..." if len(o.failed_tests) > 4 else ""
            )
            lines.append(f"| {o.name} | {o.status} | {tests} |")
    lines += [
        "",
        "## Surviving operator mutants",
        "",
        "| file | change |",
        "| --- | --- |",
    ]
    for o in outcomes:
        if o.kind == "operator" and o.status == "survived":
            lines.append(f"| {o.file} | `{o.change}` |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sample", type=int, default=150, help="operator mutants to try (0: all)"
    )
    parser.add_argument("--seed", type=int, default=16, help="seed of the sample")
    parser.add_argument("--out", type=Path, default=ROOT / "results/mutation")
    parser.add_argument(
        "--policy-only", action="store_true", help="only the policy mutants"
    )
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="harmonia-mutate-") as scratch_name:
        scratch = Path(scratch_name)
        tree = scratch / "tree"
        build = scratch / "build"
        copy_tree(tree)
        print(
            "configuring and building core_tests in a copy of the tree ...",
            file=sys.stderr,
        )
        configure = [
            "cmake",
            "-S",
            str(tree),
            "-B",
            str(build),
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DCMAKE_CXX_FLAGS_RELEASE=-O1",
            "-DHARMONIA_BUILD_BENCHMARKS=OFF",
        ]
        subprocess.run(configure, check=True, capture_output=True)
        subprocess.run(
            ["cmake", "--build", str(build), "-j", "2", "--target", "core_tests"],
            check=True,
            cwd=tree,
        )
        baseline = run([str(build / "tests/core/core_tests")], tree, 120)
        if baseline is None or baseline.returncode != 0:
            sys.exit("mutate: core_tests fail without any mutation; fix them first")

        work: list[tuple[Outcome, str]] = []
        originals = {f: (tree / f).read_text() for f in OPERATOR_FILES}
        for rewrite in POLICY_MUTANTS:
            text = policy_mutant(rewrite, originals[rewrite.file])
            outcome = Outcome(rewrite.name, rewrite.file, "policy")
            outcome.change = one_line_change(originals[rewrite.file], text)
            work.append((outcome, text))
        operators: list[tuple[str, str, str]] = []
        if not args.policy_only:
            operators = operator_mutants(tree, OPERATOR_FILES, scratch / "mutants")
            chosen = operators
            if 0 < args.sample < len(operators):
                chosen = random.Random(args.seed).sample(operators, args.sample)
            for relative, name, text in chosen:
                outcome = Outcome(name, relative, "operator")
                outcome.change = one_line_change(originals[relative], text)
                work.append((outcome, text))

        outcomes = []
        started = time.monotonic()
        for number, (outcome, text) in enumerate(work, start=1):
            try_mutant(tree, build, outcome, text, originals[outcome.file])
            outcomes.append(outcome)
            elapsed = time.monotonic() - started
            print(
                f"[{number}/{len(work)}] {outcome.status:8} {outcome.file}: {outcome.name} "
                f"({elapsed / number * (len(work) - number):.0f} s left)",
                file=sys.stderr,
            )

    sample = min(args.sample, len(operators)) if args.sample else len(operators)
    text = report(
        outcomes, 0 if args.policy_only else sample, args.seed, len(operators)
    )
    (args.out / "report.md").write_text(text)
    (args.out / "mutants.json").write_text(
        json.dumps([asdict(o) for o in outcomes], indent=1)
    )
    print(text)


if __name__ == "__main__":
    main()
