"""harmonia-fwdsim and `harmonia fwdsim`: every request served once, TWINS' effect at the data
servers, determinism, interference with two applications, and bad input."""

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.forwarding.model import load_forwarding, normalize, run_one
from harmonia.simulator import BUILD_TREE

EXAMPLES = Path(__file__).parents[2] / "examples" / "forwarding"
FWDSIM = BUILD_TREE / "src" / "fwdsim" / "harmonia-fwdsim"
pytestmark = pytest.mark.skipif(not FWDSIM.is_file(), reason="harmonia-fwdsim is not built")


def strided(scheduler: str, clients: int = 16, requests: int = 16, stripe: int = 131072) -> dict:  # type: ignore[type-arg]
    f = load_forwarding(EXAMPLES / "strided-read.toml").model_copy(update={"stripe": stripe})
    apps = [f.apps[0].model_copy(update={"clients": clients, "requests": requests})]
    return normalize(f, scheduler, apps)


@pytest.mark.parametrize("scheduler", ["fifo", "to", "to-agg", "hbrr", "sjf", "mlf", "aioli",
                                       "sw", "twins", "none"])  # fmt: skip
def test_every_request_is_served_exactly_once(scheduler: str) -> None:
    result = run_one(strided(scheduler))
    assert result["requests"] == result["completed"] == 16 * 16
    assert result["apps"][0]["bytes"] == 16 * 16 * 32768
    if scheduler != "none":
        # Dispatches cover the requests exactly: their bytes add up to the data.
        assert result["dispatches"] * result["mean_dispatch_bytes"] == pytest.approx(
            16 * 16 * 32768
        )


def test_twins_keeps_each_node_on_one_server() -> None:
    # 32 KiB stripes: the 4 clients of a node read from 4 different servers at every step.
    fifo, twins = run_one(strided("fifo", stripe=32768)), run_one(strided("twins", stripe=32768))
    assert max(fifo["node_max_servers"]) == 4
    # TWINS issues to one server per window; a request issued late in a window may still be in
    # service when the next window's first one starts, so a node has at most two at once.
    assert max(twins["node_max_servers"]) <= 2


def test_twins_aggregates_and_lowers_server_concurrency() -> None:
    # The example: 8 clients per node, whose neighbouring 32 KiB requests share a 128 KiB stripe.
    # (With 4 clients per node and 16 requests each, the windows cost more than they gain.)
    fifo, twins = run_one(strided("fifo", 32, 64)), run_one(strided("twins", 32, 64))
    assert twins["mean_dispatch_bytes"] > fifo["mean_dispatch_bytes"] == 32768
    twins_load = max(s["mean_concurrency_when_busy"] for s in twins["servers"])
    fifo_load = max(s["mean_concurrency_when_busy"] for s in fifo["servers"])
    assert twins_load < fifo_load
    assert twins["makespan"] < fifo["makespan"]


def test_results_are_deterministic(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps(strided("twins")))
    outputs = [
        subprocess.run(
            [str(FWDSIM), "--config", str(config)], capture_output=True, check=True
        ).stdout
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1]


def test_cli_two_applications_with_interference(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["fwdsim", str(EXAMPLES / "two-apps.toml"), "--out", str(tmp_path)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "summary.json").read_text())["rows"]
    assert [r["scheduler"] for r in rows] == ["fifo", "to-agg", "twins", "none"]
    for row in rows:
        for entry in row["apps"].values():
            assert entry["interference"] >= 0.99, "sharing never speeds an application up"
    for plot in ("bandwidth.png", "concurrency.png"):
        assert (tmp_path / plot).stat().st_size > 10_000


def test_bad_scenarios_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[forwarding]\nname = "x"\nservers = 0\nnodes = 2\nschedulers = ["fifo", "magic"]\n'
        '[[forwarding.apps]]\nname = "A"\nclients = 1\npattern = "diagonal"\nop = "write"\n'
        'request = "1 KiB"\nrequests = 1\n'
    )
    result = CliRunner().invoke(app, ["fwdsim", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    for key in ("forwarding.servers", "forwarding.schedulers[1]", "forwarding.apps[0].pattern"):
        assert f"{bad}: {key}:" in result.output
    assert not (tmp_path / "out").exists()
    option = tmp_path / "option.toml"
    option.write_text((EXAMPLES / "contiguous-write.toml").read_text().replace(
        '"twins.window_us" = "4000"', '"twins.window_us" = "soon"'))  # fmt: skip
    failed = CliRunner().invoke(app, ["fwdsim", str(option), "--out", str(tmp_path / "o2")])
    assert failed.exit_code == 1 and "twins.window_us" in failed.output
