"""Mixes drawn from the shared Darshan logs (harmonia.workloads, docs/workloads.md).

Expected applications come from pydarshan read here (ranks and POSIX bytes of each log), not from
the importer the generator uses.
"""

import math
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from harmonia.bakeoff import experiment as bakeoff
from harmonia.darshan_import import SHARED_LOGS, DarshanImportError
from harmonia.scenario import normalize
from harmonia.workloads import GB, MixSpec, darshan_apps, mix_document, synthetic_mix

needs_logs = pytest.mark.skipif(
    not SHARED_LOGS.is_dir(), reason=f"the shared Darshan logs are not at {SHARED_LOGS}"
)


@cache
def log_facts() -> dict[int, int]:
    """Ranks -> POSIX bytes written plus read, per shared log (the five have distinct ranks)."""
    import darshan  # type: ignore[import-untyped]

    facts = {}
    for path in sorted(SHARED_LOGS.glob("*.darshan")):
        with darshan.DarshanReport(str(path), read_all=False) as report:
            report.mod_read_all_records("POSIX")
            counters = report.records["POSIX"].to_df()["counters"]
            moved = counters["POSIX_BYTES_WRITTEN"].sum() + counters["POSIX_BYTES_READ"].sum()
            facts[int(report.metadata["job"]["nprocs"])] = int(moved)
    assert len(facts) == 5
    return facts


def spec(**changes: object) -> MixSpec:
    return MixSpec(name="darshan", darshan=SHARED_LOGS, **changes)  # type: ignore[arg-type]


@needs_logs
def test_every_job_is_a_log_application_at_its_own_bytes() -> None:
    document = mix_document(spec(jobs=60), 3)
    facts = log_facts()
    drawn = Counter()
    for app in document["apps"]:
        ranks = app["ranks"]
        assert ranks in facts, app["name"]
        assert sum(p["size"] for p in app["phases"]) == facts[ranks]  # darshan_scale (1, 1)
        assert app["nodes"] == math.ceil(ranks / 32)
        drawn[ranks] += 1
    # Uniform over the five logs: each drawn 12 times on average out of 60; all five appear.
    assert set(drawn) == set(facts) and max(drawn.values()) < 30


@needs_logs
def test_the_scale_multiplies_bytes_and_compute_and_keeps_the_phases() -> None:
    pool = {app.ranks: app for app in darshan_apps(SHARED_LOGS)}
    scales = []
    for app in mix_document(spec(jobs=80, darshan_scale=(1.0, 16.0)), 5)["apps"]:
        source = pool[app["ranks"]]
        assert [p["op"] for p in app["phases"]] == [op for op, _, _ in source.phases]
        pairs = list(zip(app["phases"], source.phases, strict=True))
        # One factor per job: read it off the largest phase, where rounding to bytes is least.
        largest, (_, size, _) = max(pairs, key=lambda pair: pair[1][1])
        scale = largest["size"] / size
        for phase, (_, size, compute) in pairs:
            assert abs(phase["size"] - size * scale) <= 1
            assert float(phase["compute"].split()[0]) == pytest.approx(compute * scale, abs=2e-6)
        scales.append(scale)
    assert 1.0 <= min(scales) and max(scales) <= 16.0
    # Log-uniform: log2 of the scale is uniform on 0-4, so its median is near 2, not near 8.
    assert 1.4 < float(np.median(np.log2(scales))) < 2.6


@needs_logs
def test_the_same_seed_gives_the_same_mix() -> None:
    mix = spec(jobs=10, darshan_scale=(1.0, 4.0))
    assert mix_document(mix, 7) == mix_document(mix, 7)
    assert mix_document(mix, 7)["apps"] != mix_document(mix, 8)["apps"]


@needs_logs
def test_a_darshan_mix_is_a_valid_scenario() -> None:
    normalized = normalize(synthetic_mix(spec(jobs=8, mean_interarrival=5.0), 1))
    assert len(normalized["apps"]) == 8
    arrivals = [app["arrival"] for app in normalized["apps"]]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0
    assert any(p["op"] == "read" for app in normalized["apps"] for p in app["phases"])


def test_a_directory_without_logs_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"{tmp_path}: no Darshan log"):
        mix_document(MixSpec(name="d", darshan=tmp_path), 1)
    with pytest.raises(ValueError, match="not a directory of Darshan logs"):
        mix_document(MixSpec(name="d", darshan=tmp_path / "absent"), 1)


@needs_logs
def test_a_corrupt_log_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "good.darshan").write_bytes(
        (SHARED_LOGS / "ior-posix_16p_aurora.darshan").read_bytes()
    )
    cut = tmp_path / "cut.darshan"
    cut.write_bytes((SHARED_LOGS / "mpi-io-test_32p_dxt.darshan").read_bytes()[:20000])
    with pytest.raises(DarshanImportError, match=f"^{cut}: "):
        mix_document(MixSpec(name="d", darshan=tmp_path), 1)


@needs_logs
def test_a_scale_whose_phases_do_not_fit_is_refused() -> None:
    # VPIC's largest phase is 8.49 GB: at 100x it exceeds 4 x 200 GB of buffers.
    with pytest.raises(ValueError, match="mix darshan: a phase of .* does not fit"):
        mix_document(spec(darshan_scale=(1.0, 100.0)), 1)


def test_invalid_darshan_specs_name_the_mix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mix d: darshan_scale must be 0 < low <= high"):
        MixSpec(name="d", darshan=tmp_path, darshan_scale=(2.0, 1.0))
    with pytest.raises(ValueError, match="mix d: trace and darshan exclude each other"):
        MixSpec(name="d", darshan=tmp_path, trace=tmp_path / "x.swf")


def test_the_bakeoff_leaves_out_a_darshan_mix_without_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = MixSpec(name="gone", darshan=tmp_path / "absent", darshan_scale=(1.0, 2.0))
    monkeypatch.setattr(bakeoff, "MIXES", (MixSpec(name="mixed", jobs=3), gone))
    grid = bakeoff.make_grid(False, (1, 2))
    assert [m.name for m in grid.mixes] == ["mixed"]
    assert bakeoff.mixes_left_out(grid) == [
        f"mix gone left out: no Darshan logs at {tmp_path / 'absent'}"
    ]


@needs_logs
def test_the_bakeoff_has_a_darshan_mix() -> None:
    names = [m.name for m in bakeoff.make_grid(False, None).mixes]
    assert "darshan" in names and "burst" not in names
    darshan = next(m for m in bakeoff.MIXES if m.name == "darshan")
    assert darshan.darshan == SHARED_LOGS
    phases = [p["size"] for a in mix_document(darshan, 1)["apps"] for p in a["phases"]]
    assert max(phases) <= 4 * 8.5 * GB


@needs_logs
def test_reproduce_bakeoff_names_a_corrupt_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from harmonia.cli.main import app
    from harmonia.simulator import SimulatorNotFound, find_simulator

    try:
        find_simulator()
    except SimulatorNotFound:
        pytest.skip("harmonia-sim is not built")
    logs = tmp_path / "logs"
    logs.mkdir()
    cut = logs / "cut.darshan"
    cut.write_bytes((SHARED_LOGS / "mpi-io-test_32p_dxt.darshan").read_bytes()[:20000])
    monkeypatch.setattr(bakeoff, "MIXES", (MixSpec(name="site", darshan=logs),))
    out = tmp_path / "out"
    arguments = ["reproduce", "bakeoff", "--seeds", "1,2", "--out", str(out)]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 2, result.output
    assert f"mix: {cut}: " in result.output
    assert not list(out.glob("runs/*/seed-*/*.json"))  # nothing simulated, no half results
