"""`auto` in harmonia-sim: on a small mix where one fixed policy clearly wins on auto's objective,
auto does as well as that policy, whichever order its candidates are listed in."""

import pytest
from sim_support import RunSim, app, scenario


def three_writers(candidates: list[str]) -> dict[str, object]:
    """Three jobs write 10 GB at the same times, three times, on one SSD buffer: sharing it
    (fair-share) stalls every job for the whole window, one at a time (priority) only the later
    ones, so priority's stall is less than half fair-share's."""
    jobs = [app(n, [(5.0, 10e9), (20.0, 10e9), (20.0, 10e9)]) for n in ("a", "b", "c")]
    return scenario(
        jobs,
        buffers={"count": 1, "device": "ssd", "capacity": 200e9},
        scheduler={
            "max_colocated": 3,
            "auto": {"objective": "stall", "candidates": candidates},
        },
    )


@pytest.mark.parametrize(
    "candidates", [["fair-share", "priority"], ["priority", "fair-share"]]
)
def test_auto_does_as_well_as_the_policy_that_clearly_wins(
    run_sim: RunSim, candidates: list[str]
) -> None:
    doc = three_writers(candidates)
    stall = {
        policy: run_sim(doc, policy)["metrics"]["avg_stall"]
        for policy in ("fair-share", "priority", "auto")
    }
    assert stall["priority"] < 0.5 * stall["fair-share"], stall
    assert stall["auto"] == pytest.approx(stall["priority"], rel=0.01), stall
