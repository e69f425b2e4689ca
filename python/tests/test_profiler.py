"""`harmonia profile`: shapes and files on a small run (a test asserts behaviour, not speed)."""

import tomllib
from pathlib import Path

from support import assert_png
from typer.testing import CliRunner

from harmonia.cli.main import app
from harmonia.profiler import Point, Profile, ProfileSettings
from harmonia.scenario import load_scenario, normalize

SMALL = ["--max-streams", "4", "--request-size", "64 KiB", "--size-per-stream", "256 KiB"]


def test_profile_writes_a_device_model_the_scenarios_accept(tmp_path: Path) -> None:
    target = tmp_path / "device"
    target.mkdir()
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["profile", str(target), "--name", "local", "--out", str(out), *SMALL]
    )
    assert result.exit_code == 0, result.output
    for op in ("write", "read"):
        for k in (1, 2, 4):
            assert f"{op} k={k}:" in result.output
    assert list(target.iterdir()) == [], "the profile's files are removed"
    assert_png(out / "local.png")
    device = tomllib.loads((out / "local.toml").read_text())["devices"]["local"]
    assert [k for k, _ in device["curve"]] == [1, 2, 4]
    assert max(f for _, f in device["curve"]) == 1.0
    assert device["write_bw"] > 0 and device["read_bw"] > 0

    # The model plugs into a scenario as a buffer device.
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        (out / "local.toml").read_text()
        + """
[scenario]
name = "measured"
[platform]
network = "switch"
link_bw = "10 Gb/s"
compute_nodes = 2
[buffers]
count = 2
device = "local"
capacity = "10 GB"
[pfs]
servers = 1
device = "hdd"
[[apps]]
name = "a"
workload = "synthetic"
[apps.synthetic]
class = "balanced"
phases = 2
phase_size = "1 GB"
"""
    )
    normalized = normalize(load_scenario(scenario))
    assert normalized["devices"]["local"]["curve"] == device["curve"]


def test_profile_rejects_bad_arguments(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["profile", str(tmp_path / "nope"), *SMALL])
    assert missing.exit_code == 2 and "not a directory" in missing.output
    bad_size = runner.invoke(app, ["profile", str(tmp_path), "--request-size", "lots"])
    assert bad_size.exit_code == 2 and "--request-size" in bad_size.output
    bad_op = runner.invoke(app, ["profile", str(tmp_path), "--op", "append"])
    assert bad_op.exit_code == 2 and "--op" in bad_op.output
    unaligned = runner.invoke(app, ["profile", str(tmp_path), "--request-size", "1000 B"])
    assert unaligned.exit_code == 2 and "page size" in unaligned.output


def test_metrics_follow_equations_one_and_two() -> None:
    settings = ProfileSettings(Path("."), [1, 2, 4], 4096, 4096)
    # Aggregate 100, 150, 120 MB/s for 1, 2, 4 streams.
    points = [Point("write", k, 1.0, bw) for k, bw in [(1, 100), (2, 150), (4, 120)]]
    profile = Profile(settings, points, direct_io=True)
    assert profile.curve("write") == [(1, 100 / 150), (2, 1.0), (4, 120 / 150)]
    assert profile.concurrency() == 2
    # MSCA(k) = k / c * (peak - bw(k)) / peak; I_f(k) = k * bw(1) / bw(k).
    assert profile.msca("write")[2] == (4, 4 / 2 * (1 - 120 / 150))
    assert profile.interference("write") == [(1, 1.0), (2, 2 * 100 / 150), (4, 4 * 100 / 120)]
