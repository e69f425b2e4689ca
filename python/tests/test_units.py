"""Parsing sizes, bandwidths and durations (harmonia.units)."""

import json
import math
import re
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harmonia.units import format_size, parse_bandwidth, parse_duration, parse_size

SI = {"kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}
IEC = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
SECONDS_PER = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_subnormal=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16 GB", 16 * 10**9),
        ("200 GiB", 200 * 2**30),
        ("512MiB", 512 * 2**20),
        ("  2.5 GB ", 2_500_000_000),
        ("1e3 B", 1000),
        ("-1 GB", -(10**9)),
        (4096, 4096),
        (1.6e10, 16_000_000_000),
    ],
)
def test_parse_size(text: str | int | float, expected: int) -> None:
    assert parse_size(text) == expected


# The vectors src/common/size.hpp is tested against too (tests/common/test_size.cpp).
SIZE_VECTORS = json.loads(
    (Path(__file__).parents[2] / "tests" / "data" / "sizes.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("case", SIZE_VECTORS["cases"], ids=lambda case: repr(case["text"]))
def test_parse_size_reads_the_shared_vectors_as_cpp_does(case: dict[str, object]) -> None:
    if case["bytes"] is None:
        with pytest.raises(ValueError, match="cannot parse size|not a finite"):
            parse_size(case["text"])
    else:
        assert parse_size(case["text"]) == case["bytes"]


@pytest.mark.parametrize("case", SIZE_VECTORS["bare"], ids=lambda case: repr(case["text"]))
def test_a_size_string_without_its_unit_is_refused(case: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="missing unit"):
        parse_size(case["text"])


@pytest.mark.parametrize("case", SIZE_VECTORS["zero"], ids=lambda case: repr(case["text"]))
def test_zero_sizes_parse_to_zero_for_the_caller_to_refuse(case: dict[str, object]) -> None:
    assert parse_size(case["text"]) == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500 MB/s", 5e8),
        ("10 Gb/s", 1.25e9),
        ("1.25 GB/s", 1.25e9),
        ("100 MiB/s", 100 * 2**20),
        (3.5e8, 3.5e8),
    ],
)
def test_parse_bandwidth(text: str | float, expected: float) -> None:
    assert parse_bandwidth(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8 s", 8.0), ("2.5 min", 150.0), ("1 h", 3600.0), ("250 ms", 0.25), (12, 12.0)],
)
def test_parse_duration(text: str | float, expected: float) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (parse_size, "16", 'cannot parse size "16": missing unit'),
        (parse_size, "16 Gb", 'cannot parse size "16 Gb": unknown unit "Gb"'),
        (parse_size, "lots", 'cannot parse size "lots": expected a number and a unit'),
        (parse_size, True, "got True"),
        (parse_size, [16], "got [16]"),
        (parse_bandwidth, "500 MB", 'cannot parse bandwidth "500 MB": unknown unit "MB"'),
        (parse_duration, "3 days", 'cannot parse duration "3 days": unknown unit "days"'),
        (parse_duration, float("nan"), "not a finite number"),
        (parse_duration, "1e999 h", 'duration "1e999 h" is not a finite number'),
    ],
)
def test_parse_errors_name_the_value(parse: object, value: object, message: str) -> None:
    assert callable(parse)
    with pytest.raises(ValueError, match=re.escape(message)):
        parse(value)


@given(st.integers(min_value=-(10**18), max_value=10**18))
def test_bytes_round_trip(size: int) -> None:
    assert parse_size(size) == size
    assert parse_size(f"{size} B") == size
    assert parse_size(f"{size}B") == size


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted({**SI, **IEC}.items())))
def test_whole_units_are_exact(count: int, unit: tuple[str, int]) -> None:
    name, factor = unit
    assert parse_size(f"{count} {name}") == count * factor


@given(st.decimals(min_value=0, max_value=10**6, places=3), st.sampled_from(sorted(SI.items())))
def test_decimal_si_sizes_round_to_the_nearest_byte(count: Decimal, unit: tuple[str, int]) -> None:
    name, factor = unit
    assert parse_size(f"{count} {name}") == round(count * factor)


@given(st.integers(min_value=1, max_value=10**18))
def test_format_size_reads_back_within_its_precision(size: int) -> None:
    assert math.isclose(parse_size(format_size(size)), size, rel_tol=5e-4)


@given(finite)
def test_bandwidth_round_trip(rate: float) -> None:
    assert parse_bandwidth(rate) == rate
    assert parse_bandwidth(f"{rate!r} B/s") == rate
    assert math.isclose(parse_bandwidth(f"{rate!r} Gb/s"), rate * 1.25e8, rel_tol=1e-12)
    assert math.isclose(
        parse_bandwidth(f"{rate!r} MB/s"),
        parse_bandwidth(f"{rate!r} MiB/s") / 1.048576,
        rel_tol=1e-12,
    )


@given(finite, st.sampled_from(sorted(SECONDS_PER.items())))
def test_duration_round_trip(count: float, unit: tuple[str, float]) -> None:
    name, seconds = unit
    assert parse_duration(count) == count
    assert math.isclose(parse_duration(f"{count!r} {name}"), count * seconds, rel_tol=1e-12)
