"""The phase-detection accuracy study: matching rules, and libharmonia's detector on bursts."""

import pytest

from harmonia.phases.experiment import match, run_all
from harmonia.simulator import BUILD_TREE


def test_match_is_one_to_one_within_the_tolerance() -> None:
    truth = [(0.0, 1.0), (2.0, 3.0)]
    assert match(truth, [(0.01, 0.99), (2.04, 3.0)], 0.05) == 2
    assert match(truth, [(0.0, 1.0), (0.0, 1.0)], 0.05) == 1, "one true phase matches once"
    assert match(truth, [(0.0, 3.0)], 0.05) == 0, "a merged phase matches neither"
    assert match(truth, [(0.1, 1.0)], 0.05) == 0


def test_runtime_detector_finds_bursts_when_the_threshold_fits() -> None:
    if not (BUILD_TREE / "src" / "runtime" / "bbio" / "libharmonia.so").is_file():
        pytest.skip("needs libharmonia")
    too_small, fitting, too_large = run_all(lambda _: None, quick=True)
    # 10 ms between writes inside a burst, 100-800 ms between bursts.
    assert too_small.detected > too_small.true_phases and too_small.precision < 0.5
    assert (fitting.precision, fitting.recall) == (1.0, 1.0), fitting
    assert too_large.detected < too_large.true_phases and too_large.recall < 1.0
