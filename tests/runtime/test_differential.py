"""Differential testing of libharmonia (docs/testing.md): operation sequences run by the
executor (tests/fsoracle/fsexec.c) without the library and with RAM staging, SSD staging and
buffer nodes, as root and as an ordinary user, must print the same results, errno, bytes and
stat fields, and leave the same tree (docs/staging-library.md, "The model the tester checks").

- the regression files (tests/fsoracle/regressions): one minimal sequence per defect found, run
  in every mode; the runs that fail today are strict expected failures;
- a fixed-seed budget of generated sequences, which fails on any difference that no known
  defect explains, with the sequence shrunk to a minimal one;
- checks that the tester is not comparing plain I/O with plain I/O: staging is on in each mode
  and for each user."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fsoracle"))
from fsoracle import posix_suite
from fsoracle.compare import differences
from fsoracle.crash import Crash, check_crash
from fsoracle.differential import classify
from fsoracle.harness import (
    BBD,
    FAULTY,
    FSEXEC,
    LIBRARY_MODES,
    User,
    Workspace,
    current_user,
    ordinary_user,
)
from fsoracle.regression import Regression, every
from fsoracle.search import crash_hunt, hunt

#: Generated sequences in `make test`: about a minute on the 2-core CI machine.
BUDGET = int(os.environ.get("HARMONIA_FSORACLE_BUDGET", "300"))
CRASH_BUDGET = int(os.environ.get("HARMONIA_FSORACLE_CRASH_BUDGET", "150"))
USERS = ("root", "user")


@pytest.fixture(scope="module")
def workspace() -> Iterator[Workspace]:
    for tool in (FSEXEC, BBD):
        if not tool.is_file():
            pytest.skip(f"not built: {tool}")
    with Workspace() as running:
        yield running


def user_for(label: str) -> User:
    """Root, or an ordinary user (nobody, which needs this test to run as root)."""
    if label == "root":
        if os.getuid() != 0:
            pytest.skip("runs as root only when the tests do")
        return current_user()
    if os.getuid() != 0:
        return current_user()
    user = ordinary_user()
    if user is None:
        pytest.skip("no user 'nobody' on this machine to run as")
    return user


def regression_runs() -> Iterator[object]:
    for regression in every():
        for mode in [regression.crash[1]] if regression.crash else LIBRARY_MODES:
            for label in USERS:
                why = regression.fails.get(f"{mode}/{label}")
                # An expected failure fails by its differences only (AssertionError): a known
                # rule that does not explain them is an error of its own.
                marks = (
                    [pytest.mark.xfail(strict=True, reason=why, raises=AssertionError)]
                    if why
                    else []
                )
                yield pytest.param(regression, mode, label, marks=marks,
                                   id=f"{regression.name}-{mode}-{label}")  # fmt: skip


@pytest.mark.parametrize(("regression", "mode", "label"), list(regression_runs()))
def test_regression_sequence_gives_what_plain_io_gives(
    workspace: Workspace, regression: Regression, mode: str, label: str
) -> None:
    user = user_for(label)
    sequence = regression.sequence
    if regression.crash is not None:
        target, _, after = regression.crash
        problems = check_crash(workspace, sequence, user, Crash(target, mode, after))
        assert not problems, "\n".join(map(str, problems))
        return
    oracle = workspace.run(sequence, "plain", user)
    for _ in range(regression.repeat):
        run = workspace.run(sequence, mode, user)
        found = differences(sequence, oracle, run, mode, user.label)
        if f"{mode}/{label}" in regression.fails:
            explained, new = classify(found, sequence)
            if new is not None or set(explained) - {regression.name}:
                raise LookupError(
                    f"the known defect {regression.name} (fsoracle/known.py) does not "
                    f"explain what differs: {new or explained}"
                )
        assert not found, "\n".join(str(d) for d in found[:20])


def test_generated_crashes_leave_a_tree_the_program_could_have_seen(
    workspace: Workspace,
) -> None:
    users = [current_user()] + ([u] if (u := ordinary_user()) is not None else [])
    finding = crash_hunt(workspace, users, examples=CRASH_BUDGET)
    assert finding is None, (
        "a crash left a tree the rule does not allow (docs/staging-library.md), and no known "
        "defect explains it:\n" + finding.report()
    )


def test_generated_sequences_give_what_plain_io_gives(workspace: Workspace) -> None:
    users = [current_user()] + ([u] if (u := ordinary_user()) is not None else [])
    finding = hunt(workspace, users, examples=BUDGET, shrink_seconds=20)
    assert finding is None, (
        "a difference no known defect explains (tests/fsoracle/fsoracle/known.py); save the "
        "sequence under tests/fsoracle/regressions/ once understood:\n"
        + finding.verdict.report(finding.sequence)
    )


def test_generated_sequences_with_small_files_to_the_pfs_give_what_plain_io_gives(
    workspace: Workspace,
) -> None:
    """Through buffer nodes with the library's default small-file limit (the "buffers" mode
    sends every file to the nodes): a small file goes to the PFS at its close."""
    users = [current_user()] + ([u] if (u := ordinary_user()) is not None else [])
    finding = hunt(workspace, users, examples=BUDGET, shrink_seconds=20,
                   modes=["buffers-small"])  # fmt: skip
    assert finding is None, (
        "a difference no known defect explains (tests/fsoracle/fsoracle/known.py):\n"
        + finding.verdict.report(finding.sequence)
    )


@pytest.mark.parametrize("label", USERS)
@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_staging_holds_the_bytes_back_in_each_mode(
    workspace: Workspace, mode: str, label: str
) -> None:
    # Another process's stat before the writer settles shows the file on disk: 0 bytes while
    # the library holds them (docs/staging-library.md, "Known limits"). Plain I/O shows them.
    user = user_for(label)
    sequence = ["0 spawn 1", "0 creat h0 a 0644", "0 write h0 5000 1", "1 stat a",
                "0 close h0", "1 exit", "0 tree"]  # fmt: skip
    plain = workspace.run(sequence, "plain", user)
    staged = workspace.run(sequence, mode, user)
    assert plain.lines[3]["st"]["size"] == 5000
    assert staged.lines[3]["st"]["size"] == 0, (
        "the library staged nothing: staging is off"
    )
    assert staged.tree["a"]["content"] == plain.tree["a"]["content"]


@pytest.mark.parametrize("label", USERS)
def test_buffer_mode_sends_the_bytes_to_the_nodes(
    workspace: Workspace, label: str
) -> None:
    user = user_for(label)
    assert workspace.cluster is not None
    before = workspace.cluster.node_total("received_bytes")
    sequence = ["0 creat h0 a 0644", "0 write h0 3000000 1", "0 close h0", "0 tree"]
    outcome = workspace.run(sequence, "buffers", user)
    assert workspace.cluster.node_total("received_bytes") - before >= 3_000_000
    assert len(outcome.tree["a"]["content"]) == 3_000_000


@pytest.mark.parametrize("label", USERS)
def test_a_small_file_goes_to_the_pfs_at_its_close_unless_told_otherwise(
    workspace: Workspace, label: str
) -> None:
    """A file of 5,000 bytes in small writes: the library's default writes it to the PFS at
    its close, no byte to a node; with HARMONIA_SMALL_FILE=0 the nodes receive it."""
    user = user_for(label)
    assert workspace.cluster is not None
    sequence = ["0 creat h0 a 0644", "0 write h0 2500 1", "0 write h0 2500 2", "0 close h0",
                "0 tree"]  # fmt: skip
    plain = workspace.run(sequence, "plain", user)
    received = {}
    for mode in ("buffers-small", "buffers"):
        before = workspace.cluster.node_total("received_bytes")
        outcome = workspace.run(sequence, mode, user)
        received[mode] = workspace.cluster.node_total("received_bytes") - before
        assert outcome.tree["a"]["content"] == plain.tree["a"]["content"], mode
    assert received["buffers-small"] == 0, "a small file went to a node"
    assert received["buffers"] >= 5000, "HARMONIA_SMALL_FILE=0 sent it to no node"


#: Cases of pjdfstest whose outcome differs from the plain run's, in every mode; once fixed,
#: the test fails until the case leaves this list.
POSIX_SUITE_DIFFERENCES: dict[str, str] = {}  # case -> why, while it differs


@pytest.mark.parametrize("label", USERS)
def test_posix_conformance_suite_gives_what_plain_io_gives(
    workspace: Workspace, label: str
) -> None:
    user = user_for(label)
    try:
        posix_suite.build()
    except posix_suite.SuiteUnavailable as why:
        pytest.skip(str(why))
    plain = posix_suite.run(workspace, "plain", user)
    assert plain and not [c for c, outcome in plain.items() if outcome == "FAILED"]
    for mode in LIBRARY_MODES:
        found = posix_suite.differences(
            plain, posix_suite.run(workspace, mode, user, list(plain))
        )
        assert set(found) == set(POSIX_SUITE_DIFFERENCES), f"{mode}: {found}"


@pytest.mark.parametrize(
    ("fault", "field"),
    [("errno", "errno"), ("stat", "st.size"), ("rename", "entry")],
)
def test_the_tester_catches_a_wrong_interposer(
    workspace: Workspace, fault: str, field: str
) -> None:
    # The tester must keep failing on a wrong library once libharmonia's defects are fixed.
    if not FAULTY.is_file():
        pytest.skip(f"not built: {FAULTY}")
    user = current_user()
    sequence = ["0 creat h0 a 0644", "0 write h0 100 1", "0 fstat h0", "0 close h0",
                "0 rename a b", "0 tree"]  # fmt: skip
    oracle = workspace.run(sequence, "plain", user)
    wrong = workspace.run(sequence, "plain", user,
                          env={"LD_PRELOAD": str(FAULTY), "FSORACLE_FAULT": fault})  # fmt: skip
    found = differences(sequence, oracle, wrong, "faulty", user.label)
    assert any(d.field == field for d in found), found
    assert not differences(sequence, oracle, workspace.run(sequence, "plain", user), "plain",
                           user.label)  # fmt: skip
