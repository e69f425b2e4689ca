"""`harmonia reproduce buffers` on a small case: real jobs through buffer nodes under DataWarp
and a Harmonia policy, the simulator on the same measured platform, and the report."""

from pathlib import Path

from buffers_support import BBD, SIM, needs
from harmonia.buffers.experiment import DrainingCase, run_case, summary, write_outputs

pytestmark = needs(BBD, SIM)


def test_datawarp_makes_the_second_job_wait_in_the_real_run_and_in_simulation(
    tmp_path: Path,
) -> None:
    case = DrainingCase(ranks=2, steps=3, requests=1, compute=0.5,
                        policies=("datawarp", "max-bandwidth"), profile_bytes=8 << 20)  # fmt: skip
    lines: list[str] = []
    outcome = run_case(case, tmp_path / "out", tmp_path / "devices", lines.append)
    assert any(line.startswith("[2/2] max-bandwidth") for line in lines), (
        "progress per run"
    )
    rows = summary(outcome)
    # Only one instance fits: DataWarp admits the second job once the first is staged out, so
    # the second job's first phase (after one compute step) waits at least for the first job's
    # other compute steps; the Harmonia policy drains during the compute phases and runs both
    # at once.
    datawarp = next(r for r in outcome.real if r.policy == "datawarp")
    assert max(datawarp.waits) > (case.steps - 1) * case.compute
    assert rows["max-bandwidth"]["real_wait"] < 0.5 * rows["datawarp"]["real_wait"]
    assert (
        rows["datawarp"]["real_completion"]
        > 1.2 * rows["max-bandwidth"]["real_completion"]
    )
    assert (
        rows["datawarp"]["sim_completion"]
        > 1.2 * rows["max-bandwidth"]["sim_completion"]
    )
    assert all(r.buffered_share > 0.9 for r in outcome.real), (
        "the writes went to the nodes"
    )
    files = write_outputs(outcome, tmp_path / "out")
    assert [f.name for f in files] == ["report.md", "results.json", "buffers.png"]
    assert "| datawarp |" in files[0].read_text()
    assert not any((tmp_path / "devices").glob("nodes/*/*.bblog")), (
        "the devices are cleaned up"
    )
