"""`harmonia reproduce` over several seeds: the seed list and the mean-and-range cells."""

import pytest
from typer.testing import CliRunner

from harmonia.cli import EXIT_INVALID
from harmonia.cli.main import app
from harmonia.experiments.reproduce import parse_seeds, spread


def test_seed_lists_and_ranges() -> None:
    assert parse_seeds("1-10") == list(range(1, 11))
    assert parse_seeds("3") == [3]
    assert parse_seeds("1,2,5, 7-8,2") == [1, 2, 5, 7, 8]


@pytest.mark.parametrize("text", ["", "a", "5-1", "1-", "-3", "1;2", "0-5000"])
def test_bad_seed_lists_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_seeds(text)


def test_bad_seeds_option_names_itself_and_runs_nothing(tmp_path: object) -> None:
    out = f"{tmp_path}/never"
    result = CliRunner().invoke(app, ["reproduce", "harmonia", "--seeds", "9-2", "--out", out])
    assert result.exit_code == EXIT_INVALID
    assert "--seeds 9-2" in result.output


def test_spread_gives_the_mean_and_the_range() -> None:
    assert spread([10.0, 20.0, 30.0], unit="s") == "20 (10 to 30) s"
    assert spread([1.04, 1.06], digits=1) == "1.1 (1.0 to 1.1)"
    assert spread([5.0, 5.0]) == "5", "no range when every seed agrees"
