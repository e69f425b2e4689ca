"""Experiments that run several scenarios and compare them with the papers."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_report(
    out: Path, report: str, data: dict[str, Any], figure: str, draw: Callable[[Path], None]
) -> list[Path]:
    """An experiment's outputs in `out`: report.md (`report`), results.json (`data`) and the
    figure `draw` makes at out/`figure`; their paths, the report first."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.md", out / "results.json", out / figure]
    written[0].write_text(report)
    written[1].write_text(json.dumps(data, indent=1) + "\n")
    draw(written[2])
    return written
