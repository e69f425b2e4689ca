"""harmonia-schedd's accounting (docs/accounting.md): a job started with HARMONIA_IO_QOS shows in
the records the daemon rewrites each second, and `harmonia report` lists them; bad pricing
options are refused by name."""

import json
import subprocess
import sys
import time
from pathlib import Path

from schedd_support import SCHEDD, finish, running_daemon, start_writer, wait_until


def records(prefix: Path) -> list[dict[str, object]]:
    try:
        loaded: list[dict[str, object]] = json.loads(Path(f"{prefix}.json").read_text())
    except (OSError, ValueError):
        return []
    return loaded


def test_the_daemon_accounts_a_job_in_its_class(tmp_path: Path) -> None:
    address = tmp_path / "schedd.sock"
    prefix = tmp_path / "acct"
    pricing = [
        "--node-hour-rate",
        "2",
        "--io-class",
        "normal:1:1",
        "--io-class",
        "cheap:3:0.4",
    ]
    with running_daemon(
        address, "--buffers", "1", "--accounting", str(prefix), *pricing
    ):
        job = start_writer(
            address,
            "acct-job",
            tmp_path / "out",
            chunks=2,
            pause=0,
            hold=3,
            HARMONIA_IO_QOS="cheap",
        )
        assert wait_until(
            lambda: any(r["JobID"] == "acct-job" for r in records(prefix))
        )
        (record,) = [r for r in records(prefix) if r["JobID"] == "acct-job"]
        assert record["QOS"] == "cheap" and record["UsageFactor"] == 0.4
        assert record["State"] == "RUNNING" and record["End"] is None
        # Unix time: the daemon's monotonic clock is not shown.
        assert abs(float(record["Submit"]) - time.time()) < 60  # type: ignore[arg-type]
        listed = subprocess.run(
            [str(Path(sys.executable).with_name("harmonia")), "report", f"{prefix}.json"],
            capture_output=True, text=True, check=False, env={"COLUMNS": "200", "PATH": ""},
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert "acct-job" in listed.stdout and "cheap" in listed.stdout
        finish(job)
        assert wait_until(
            lambda: (
                [r["State"] for r in records(prefix) if r["JobID"] == "acct-job"]
                == ["COMPLETED"]
            )
        )
    header = Path(f"{prefix}.csv").read_text().splitlines()[0]
    assert header.startswith("JobID,JobName,User,Account,QOS,Submit,Start,End,Elapsed")


def test_bad_pricing_options_are_refused_by_name(tmp_path: Path) -> None:
    for args, named in (
        (["--buffers", "1", "--io-class", "cheap:x:0.4"], "--io-class cheap:x:0.4"),
        (
            ["--buffers", "1", "--io-class", "cheap:0.5:0.4"],
            "slowdown must be a number >= 1",
        ),
        (
            ["--accounting", str(tmp_path / "a")],
            "--accounting (schedd.record, schedd.accounting) need buffer nodes",
        ),
    ):
        done = subprocess.run(
            [str(SCHEDD), "--socket", str(tmp_path / "s.sock"), *args],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert named in done.stderr
    assert not (tmp_path / "a.json").exists()
