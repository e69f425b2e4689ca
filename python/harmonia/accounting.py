"""Accounting records (docs/accounting.md): one per job, written by harmonia-sim and
harmonia-schedd in JSON and CSV with sacct's columns plus Harmonia's I/O and charge.

This module reads the JSON form and renders it as tables; the C++ writer
(src/common/accounting.cpp) is the only one that writes records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

# Columns of the per-job table: (record key, header, format). sacct's first, then Harmonia's.
JOB_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("JobID", "JobID", "{}"),
    ("JobName", "JobName", "{}"),
    ("User", "User", "{}"),
    ("QOS", "QOS", "{}"),
    ("State", "State", "{}"),
    ("NNodes", "NNodes", "{}"),
    ("Elapsed", "Elapsed", "{}"),
    ("WriteBytes", "written\nGB", "{:,.1f}"),
    ("ReadBytes", "read\nGB", "{:,.1f}"),
    ("IOTime", "I/O\ns", "{:,.1f}"),
    ("StallTime", "stall\ns", "{:,.1f}"),
    ("IOSlowdown", "slow-\ndown", "{:.2f}"),
    ("BilledNodeHours", "billed\nnode-h", "{:,.3f}"),
    ("Charge", "charge", "{:,.3f}"),
)
_GIGABYTE_KEYS = {"WriteBytes", "ReadBytes"}
REQUIRED_KEYS = {key for key, _, _ in JOB_COLUMNS} | {"BoundBroken", "UsageFactor", "ElapsedRaw"}


class AccountingError(Exception):
    """An accounting file that cannot be read; the message names it."""


def load_accounting(path: Path) -> list[dict[str, Any]]:
    """The records of an accounting JSON file (a list of objects with the documented keys)."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise AccountingError(f"{path}: cannot read accounting records: {error}") from error
    if not isinstance(records, list):
        raise AccountingError(f"{path}: not a list of accounting records")
    for index, record in enumerate(records):
        missing = REQUIRED_KEYS - set(record) if isinstance(record, dict) else REQUIRED_KEYS
        if missing:
            raise AccountingError(f"{path}: record {index}: missing {', '.join(sorted(missing))}")
    return records


def jobs_table(records: list[dict[str, Any]], title: str) -> Table:
    """One row per job, as `sacct --format` would list it, with Harmonia's columns after."""
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False)
    for key, header, _ in JOB_COLUMNS:
        text_column = key in {"JobName", "User", "QOS", "State"}
        table.add_column(header, justify="left" if text_column else "right")
    for record in records:
        cells = []
        for key, _, form in JOB_COLUMNS:
            value = record[key]
            if key in _GIGABYTE_KEYS:
                value = value / 1e9
            cells.append(form.format(value))
        if record["BoundBroken"]:
            cells[-1] += " (refund)"
        table.add_row(*cells)
    return table


@dataclass(frozen=True)
class QosSummary:
    qos: str
    jobs: int
    mean_elapsed: float
    mean_slowdown: float
    node_hours: float
    charge: float
    broken: int


def by_qos(records: list[dict[str, Any]]) -> list[QosSummary]:
    """Per I/O service class: jobs, mean elapsed and I/O slowdown, billed node-hours, charge, and
    how many had their bound broken (refunded)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(record["QOS"], []).append(record)
    return [
        QosSummary(
            qos=qos,
            jobs=len(group),
            mean_elapsed=sum(r["ElapsedRaw"] for r in group) / len(group),
            mean_slowdown=sum(r["IOSlowdown"] for r in group) / len(group),
            node_hours=sum(r["BilledNodeHours"] for r in group),
            charge=sum(r["Charge"] for r in group),
            broken=sum(1 for r in group if r["BoundBroken"]),
        )
        for qos, group in groups.items()
    ]


def charges_table(per_policy: dict[str, list[dict[str, Any]]]) -> Table:
    """One row per policy and I/O service class: what the jobs of that class paid."""
    table = Table(
        title="charges per I/O service class (accounting records)",
        box=box.SIMPLE_HEAD,
        padding=(0, 0, 0, 1),
        pad_edge=False,
    )
    for header in ("policy", "QOS", "jobs", "elapsed\ns", "I/O\nslowdown", "node-h", "charge"):
        table.add_column(header, justify="left" if header in {"policy", "QOS"} else "right")
    table.add_column("bound\nbroken", justify="right")
    for policy, records in per_policy.items():
        for row in by_qos(records):
            table.add_row(
                policy,
                row.qos,
                str(row.jobs),
                f"{row.mean_elapsed:,.1f}",
                f"{row.mean_slowdown:.2f}",
                f"{row.node_hours:,.3f}",
                f"{row.charge:,.3f}",
                str(row.broken),
            )
    return table
