"""Parse the sizes, bandwidths and durations written in scenario files into SI base units.

Sizes become whole bytes, bandwidths bytes per second, durations seconds. Strings carry a unit
(``"16 GB"``, ``"10 Gb/s"``, ``"2.5 min"``); plain numbers are already in the base unit.
"""

import math
import re
from decimal import Decimal

_SIZE_UNITS: dict[str, Decimal] = {
    "B": Decimal(1),
    "kB": Decimal(10) ** 3,
    "KB": Decimal(10) ** 3,
    "MB": Decimal(10) ** 6,
    "GB": Decimal(10) ** 9,
    "TB": Decimal(10) ** 12,
    "PB": Decimal(10) ** 15,
    "KiB": Decimal(2) ** 10,
    "MiB": Decimal(2) ** 20,
    "GiB": Decimal(2) ** 30,
    "TiB": Decimal(2) ** 40,
    "PiB": Decimal(2) ** 50,
}
# One-letter binary multiples, as dd, IOR and Slurm write them (and the C++ tools read them).
_SHORT_SIZE_UNITS: dict[str, Decimal] = {
    "K": Decimal(2) ** 10,
    "M": Decimal(2) ** 20,
    "G": Decimal(2) ** 30,
    "T": Decimal(2) ** 40,
    "P": Decimal(2) ** 50,
}
_ALL_SIZE_UNITS = {**_SIZE_UNITS, **_SHORT_SIZE_UNITS}
_BIT_RATE_UNITS: dict[str, Decimal] = {
    "b/s": Decimal(1) / 8,
    "kb/s": Decimal(10) ** 3 / 8,
    "Kb/s": Decimal(10) ** 3 / 8,
    "Mb/s": Decimal(10) ** 6 / 8,
    "Gb/s": Decimal(10) ** 9 / 8,
    "Tb/s": Decimal(10) ** 12 / 8,
}
_BANDWIDTH_UNITS: dict[str, Decimal] = {
    **{f"{unit}/s": factor for unit, factor in _SIZE_UNITS.items()},
    **_BIT_RATE_UNITS,
}
_DURATION_UNITS: dict[str, Decimal] = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "min": Decimal(60),
    "h": Decimal(3600),
}

_QUANTITY = re.compile(
    r"\s*(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[A-Za-z/]*)\s*"
)


def _parse(value: object, units: dict[str, Decimal], what: str, example: str) -> Decimal:
    # bool is an int subclass, but `true` is never a meaningful quantity.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f'expected a {what} like "{example}" or a number, got {value!r}')
    if isinstance(value, str):
        match = _QUANTITY.fullmatch(value)
        if match is None:
            raise ValueError(
                f'cannot parse {what} "{value}": expected a number and a unit, like "{example}"'
            )
        unit = match["unit"]
        if unit not in units:
            reason = f'unknown unit "{unit}"' if unit else "missing unit"
            raise ValueError(
                f'cannot parse {what} "{value}": {reason} (known units: {", ".join(units)})'
            )
        quantity = Decimal(match["number"]) * units[unit]
    else:
        quantity = Decimal(value) if math.isfinite(value) else Decimal("NaN")
    if not math.isfinite(quantity):
        shown = f'"{value}"' if isinstance(value, str) else repr(value)
        raise ValueError(f"{what} {shown} is not a finite number")
    return quantity


def parse_size(value: object) -> int:
    """Parse a size (``"16 GB"``, ``"200 GiB"``, ``"512MiB"``, ``"64M"`` or a number of bytes).

    GB is 10^9 bytes, GiB and G are 2^30: the grammar of src/common/size.hpp, checked against the
    same vectors (tests/data/sizes.json). A string needs its unit: write bytes as a number.

    Raises ValueError naming the value when it cannot be parsed. The sign is kept: callers decide
    which values are allowed.
    """
    return int(_parse(value, _ALL_SIZE_UNITS, "size", "16 GB").to_integral_value())


def parse_bandwidth(value: object) -> float:
    """Parse a bandwidth (``"500 MB/s"``, ``"10 Gb/s"``, or a number of bytes/s) into bytes/s.

    Lower-case ``b`` means bits, so ``"10 Gb/s"`` is 1.25e9 bytes/s.
    """
    return float(_parse(value, _BANDWIDTH_UNITS, "bandwidth", "500 MB/s"))


def parse_duration(value: object) -> float:
    """Parse a duration (``"8 s"``, ``"2.5 min"``, ``"1 h"``, ``"250 ms"``, or seconds) into s."""
    return float(_parse(value, _DURATION_UNITS, "duration", "8 s"))


def format_size(size: float) -> str:
    """Render a byte count for people, with an SI unit and four significant digits."""
    unit = "B"
    for candidate in ("kB", "MB", "GB", "TB", "PB"):
        if abs(size) >= _SIZE_UNITS[candidate]:
            unit = candidate
    return f"{size / float(_SIZE_UNITS[unit]):.4g} {unit}"
