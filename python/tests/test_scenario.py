"""Scenario validation and normalization (harmonia.scenario) and policy names."""

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from support import BASE_SCENARIO, EXAMPLES, SYNTHETIC_APP

from harmonia.policies import POLICIES, parse_policies
from harmonia.scenario import ScenarioError, builtin_devices, load_scenario, normalize

# Burst-buffer scenarios only: examples/site/ holds daemon site files (tested in
# tests/runtime/test_schedd.py), examples/network network scenarios (harmonia netsim, tested in
# test_netsim.py), examples/forwarding forwarding scenarios (test_fwdsim.py), examples/testbed
# the test bed of network namespaces (scripts/testbed.py, tests/runtime/test_testbed.py).
NOT_SCENARIOS = {"bad", "site", "network", "forwarding", "testbed"}
GOOD_EXAMPLES = sorted(p for p in EXAMPLES.rglob("*.toml") if not NOT_SCENARIOS & set(p.parts))


@pytest.mark.parametrize("path", GOOD_EXAMPLES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_validates(path: Path) -> None:
    normalized = normalize(load_scenario(path))
    assert normalized["apps"]


def test_the_examples_are_there() -> None:
    names = {str(p.relative_to(EXAMPLES)) for p in GOOD_EXAMPLES}
    assert {
        "fig5-example.toml",
        "vpic-draining.toml",
        "section-v/balanced-2.toml",
        "section-v/balanced-4.toml",
        "section-v/balanced-8.toml",
        "section-v/compute-intensive-8.toml",
        "section-v/data-intensive-8.toml",
        "section-v/only-io-8.toml",
    } | {f"hacc-flush-{t}.toml" for t in (100, 75, 50, 0)} <= names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("unknown-key", "apps[0].synthetic.phase_sise: unknown key"),
        ("negative-size", 'apps[0].synthetic.phase_size: must be > 0, got "-1 GB"'),
        ("capacity-too-small", "apps[0].synthetic.phase_size: a phase of 16 GB does not fit"),
        ("unknown-device", 'buffers.device: unknown device "floppy"'),
        ("unknown-class", "apps[0].synthetic.class: Input should be"),
        ("toml-syntax", "invalid TOML: Invalid value (at line 4"),
    ],
)
def test_every_bad_example_names_the_key(name: str, expected: str) -> None:
    path = EXAMPLES / "bad" / f"{name}.toml"
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert any(line.startswith(f"{path}: {expected}") for line in caught.value.lines), caught.value


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="nothing.toml: cannot read"):
        load_scenario(tmp_path / "nothing.toml")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("count = 2\n", 'count = "2"\n', 'buffers.count: Input should be a valid integer, got "2"'),
        ("count = 2\n", "count = 0\n", "buffers.count: Input should be greater than or equal to 1"),
        ('capacity = "100 GB"', "capacity = true", "buffers.capacity: expected a size"),
        (
            'capacity = "100 GB"',
            'capacity = "100 GB"\nflush_threshold = 1.5',
            "buffers.flush_threshold",
        ),
        (
            'capacity = "100 GB"',
            'capacity = "100 GB"\nbackup_flushers = 2',
            "buffers.backup_flushers: must be < buffers.count (2), got 2",
        ),
        (
            'network = "switch"',
            'network = "torus"',
            "platform.network: Input should be 'switch' or 'fat-tree'",
        ),
        (
            'network = "switch"',
            'network = "fat-tree"',
            "platform: [platform.fat_tree] must be given exactly when",
        ),
        (
            'link_bw = "10 Gb/s"',
            'link_bw = "0 Gb/s"',
            'platform.link_bw: must be > 0, got "0 Gb/s"',
        ),
        (
            "compute_nodes = 16",
            "compute_nodes = 0",
            "platform.compute_nodes: Input should be greater",
        ),
        ('name = "small"', 'name = "has space"', "scenario.name: String should match pattern"),
        ("seed = 7", 'seed = 7\nauthor = "me"', "scenario.author: unknown key"),
        ("[pfs]\nservers = 2\n", "[pfs]\n", "pfs.servers: missing required key"),
        ('device = "hdd"', 'device = "tape"', 'pfs.device: unknown device "tape"'),
    ],
)
def test_invalid_values_name_the_key(
    write_toml: Callable[[str], Path], old: str, new: str, expected: str
) -> None:
    text = BASE_SCENARIO + SYNTHETIC_APP
    assert old in text
    path = write_toml(text.replace(old, new, 1))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert any(line.startswith(f"{path}: {expected}") for line in caught.value.lines), caught.value


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "[scheduler]\nmin_buffers = 3\n",
            "scheduler.min_buffers: must be <= buffers.count (2), got 3",
        ),
        ("[scheduler]\nif_limit = 1\n", "scheduler.if_limit: Input should be greater than 1"),
        ('[scheduler.priority]\ntie = "random"\n', "scheduler.priority.tie: Input should be"),
        ('[scheduler.auto]\nobjective = "fastest"\n', "scheduler.auto.objective: Input should be"),
        (
            '[scheduler.auto]\ncandidates = ["priority", "set-10"]\n',
            "scheduler.auto.candidates[1]: unknown name 'set-10'",
        ),
        (
            '[scheduler.auto]\ncandidates = ["priority", "datawarp"]\n',
            "scheduler.auto.candidates: datawarp cannot be chosen per window",
        ),
        (
            '[devices.ssd]\nwrite_bw = "1 GB/s"\nread_bw = "1 GB/s"\nconcurrency = 2\n',
            "devices.ssd: give exactly one of interference_slope or curve",
        ),
        (
            '[devices.x]\nwrite_bw = "1 GB/s"\nread_bw = "1 GB/s"\nconcurrency = 2\n'
            "curve = [[2, 1.0], [4, 0.5]]\n",
            "devices.x.curve: the first point must be for n = 1",
        ),
        (
            '[devices.x]\nwrite_bw = "1 GB/s"\nread_bw = "1 GB/s"\nconcurrency = 2\n'
            "curve = [[1, 1.0], [1, 0.5]]\n",
            "devices.x.curve: n must be strictly increasing, got [1, 1]",
        ),
        (
            '[devices.x]\nwrite_bw = "1 GB/s"\nread_bw = "1 GB/s"\nconcurrency = 2\n'
            "curve = [[1, 1.0], [2, 1.5]]\n",
            "devices.x.curve[1][1]: Input should be less than or equal to 1",
        ),
    ],
)
def test_invalid_tables_name_the_key(
    write_toml: Callable[[str], Path], extra: str, expected: str
) -> None:
    path = write_toml(BASE_SCENARIO + extra + SYNTHETIC_APP)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert any(line.startswith(f"{path}: {expected}") for line in caught.value.lines), caught.value


@pytest.mark.parametrize(
    ("app", "expected"),
    [
        (
            '[[apps]]\nname = "a"\nworkload = "periodic"\n[apps.synthetic]\nclass = "balanced"\n'
            'phases = 1\nphase_size = "1 GB"\n',
            'apps[0]: workload = "periodic" needs [apps.periodic] and no other'
            " workload table, found [apps.synthetic]",
        ),
        (
            '[[apps]]\nname = "a"\nworkload = "explicit"\n',
            'apps[0]: workload = "explicit" needs [[apps.phases]] and no other workload table,'
            " found none",
        ),
        (
            '[[apps]]\nname = "a"\nworkload = "explicit"\n[[apps.phases]]\nsize = "1 GB"\n',
            "apps[0].phases[0].compute: missing required key",
        ),
        (
            '[[apps]]\nname = "a"\nworkload = "explicit"\n[[apps.phases]]\ncompute = "-2 s"\n'
            'size = "1 GB"\n',
            'apps[0].phases[0].compute: must be >= 0, got "-2 s"',
        ),
        (
            '[[apps]]\nname = "a"\nranks = 1000\nworkload = "periodic"\n'
            '[apps.periodic]\nsteps = 2\nbytes_per_rank = "1 GB"\ncompute = "1 s"\n',
            "apps[0].periodic.bytes_per_rank: a phase of 1 TB does not fit",
        ),
        (
            '[[apps]]\nname = "a"\ninstances = 5\nnodes = 4\nworkload = "explicit"\n'
            '[[apps.phases]]\ncompute = 0\nsize = "1 GB"\n',
            "platform.compute_nodes: the applications need 20 nodes",
        ),
        (
            '[[apps]]\nname = "a"\nworkload = "explicit"\n[[apps.phases]]\ncompute = 0\n'
            'size = "1 GB"\nsource_phase = 0\n',
            "apps[0].phases[0].source_phase: only a read phase has a source",
        ),
        (
            '[[apps]]\nname = "a"\nworkload = "explicit"\n[[apps.phases]]\ncompute = 0\n'
            'size = "1 GB"\nop = "read"\n[[apps.phases]]\ncompute = 0\nsize = "1 GB"\n'
            'op = "read"\nsource_phase = 0\n',
            "apps[0].phases[1].source_phase: must be the index of an earlier write phase",
        ),
        (SYNTHETIC_APP + SYNTHETIC_APP, 'apps[1].name: duplicate application name "bench"'),
        ("", "apps: missing required key"),
    ],
)
def test_invalid_apps_name_the_key(
    write_toml: Callable[[str], Path], app: str, expected: str
) -> None:
    path = write_toml(BASE_SCENARIO + app)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert any(line.startswith(f"{path}: {expected}") for line in caught.value.lines), caught.value


def test_every_problem_is_reported(write_toml: Callable[[str], Path]) -> None:
    text = (BASE_SCENARIO + SYNTHETIC_APP).replace("count = 2", "count = -1")
    text = text.replace('class = "balanced"', 'class = "heavy"')
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write_toml(text))
    assert len(caught.value.lines) == 2


def test_a_long_list_of_problems_is_cut_short_in_the_message(
    write_toml: Callable[[str], Path],
) -> None:
    """A trace of thousands of bad jobs gets a message a terminal can show: the first problems
    and how many more; every one is still in `lines`."""
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write_toml(BASE_SCENARIO + SYNTHETIC_APP * 51))
    problems = caught.value.lines
    assert sum("duplicate application name" in line for line in problems) == 50
    message = str(caught.value).splitlines()
    assert message == [
        *problems[: ScenarioError.MAX_ERROR_LINES],
        f"... and {len(problems) - ScenarioError.MAX_ERROR_LINES} more problems",
    ]


NORMALIZE_APPS = """
[[apps]]
name = "bench"
instances = 3
ranks = 64
nodes = 2
arrival = "10 s"
arrival_interval = "0.5 min"
priority = 2
workload = "synthetic"
[apps.synthetic]
class = "data-intensive"
phases = 4
phase_size = "8 GB"

[[apps]]
name = "vpic"
ranks = 4
hint = "cached"
workload = "periodic"
[apps.periodic]
steps = 3
bytes_per_rank = "1 GiB"
compute = "2 min"

[[apps]]
name = "reader"
priority = 1
workload = "explicit"
[[apps.phases]]
compute = "250 ms"
size = "512 MiB"
op = "read"
priority = 9
[[apps.phases]]
compute = 3
size = 1000
"""


def test_normalize_expands_instances_and_phases(write_toml: Callable[[str], Path]) -> None:
    normalized = normalize(load_scenario(write_toml(BASE_SCENARIO + NORMALIZE_APPS)))
    apps = normalized["apps"]
    assert [app["name"] for app in apps] == ["bench-0", "bench-1", "bench-2", "vpic", "reader"]
    assert [app["arrival"] for app in apps] == [10.0, 40.0, 70.0, 0.0, 0.0]
    assert [len(app["phases"]) for app in apps] == [4, 4, 4, 3, 2]
    assert apps[3]["hint"] == "cached" and apps[0]["hint"] == "flushable"
    assert apps[0]["ranks"] == 64 and apps[0]["nodes"] == 2 and apps[0]["priority"] == 2

    # Time slice: 8 GB on 2 SSD buffers at 500 MB/s each = 8 s; data-intensive computes 0.25 of it.
    assert apps[1]["phases"][0] == {"compute": 2.0, "size": 8 * 10**9, "op": "write", "priority": 2}
    assert apps[3]["phases"][2] == {
        "compute": 120.0,
        "size": 4 * 2**30,
        "op": "write",
        "priority": 0,
    }
    assert apps[4]["phases"] == [
        {"compute": 0.25, "size": 512 * 2**20, "op": "read", "priority": 9},
        {"compute": 3.0, "size": 1000, "op": "write", "priority": 1},
    ]


def test_normalize_resolves_units_devices_and_defaults(write_toml: Callable[[str], Path]) -> None:
    normalized = normalize(load_scenario(write_toml(BASE_SCENARIO + SYNTHETIC_APP)))
    assert normalized["name"] == "small" and normalized["seed"] == 7
    assert normalized["platform"] == {
        "network": "switch",
        "link_bw": 1.25e9,
        "link_latency": 0.0,
        "compute_nodes": 16,
    }
    assert normalized["buffers"] == {
        "count": 2,
        "device": "ssd",
        "capacity": 10**11,
        "flush_threshold": 0.0,
        "backup_flushers": 0,
    }
    assert normalized["pfs"] == {"servers": 2, "device": "hdd"}
    # max_colocated is left out so the core derives it from if_limit.
    assert normalized["scheduler"] == {"if_limit": 5.0, "min_buffers": 1, "priority_tie": "share"}
    assert normalized["devices"] == {
        "ssd": {"write_bw": 5e8, "read_bw": 5.5e8, "concurrency": 2, "interference_slope": 0.9557},
        "hdd": {
            "write_bw": 9.5e7,
            "read_bw": 1.15e8,
            "concurrency": 1,
            "interference_slope": 1.5571,
        },
    }
    # Balanced: compute = 1 time slice = 8 GB / (2 x 500 MB/s).
    assert normalized["apps"][0]["phases"][0]["compute"] == 8.0


def test_normalize_custom_devices_fat_tree_and_scheduler(write_toml: Callable[[str], Path]) -> None:
    text = (
        BASE_SCENARIO.replace('network = "switch"', 'network = "fat-tree"')
        .replace('device = "ssd"', 'device = "my-nvme"')
        .replace('device = "hdd"', 'device = "ssd"')
    )
    text += """
[platform.fat_tree]
levels = 2
down = [4, 6]
up = [1, 2]
link_count = [1, 1]

[devices.my-nvme]
write_bw = "2 GB/s"
read_bw = "3 GB/s"
concurrency = 4
curve = [[1, 1.0], [2, 0.9], [8, 0.5]]

[devices.ssd]
write_bw = 1e9
read_bw = 1e9
concurrency = 1
interference_slope = 0

[scheduler]
max_colocated = 2
max_running_apps = 3
min_buffers = 2
[scheduler.priority]
tie = "fcfs"
[scheduler.auto]
objective = "makespan"
candidates = ["priority", "fair-share"]
"""
    normalized = normalize(load_scenario(write_toml(text + SYNTHETIC_APP)))
    assert normalized["platform"]["fat_tree"] == {
        "levels": 2,
        "down": [4, 6],
        "up": [1, 2],
        "link_count": [1, 1],
    }
    assert normalized["devices"] == {
        "my-nvme": {
            "write_bw": 2e9,
            "read_bw": 3e9,
            "concurrency": 4,
            "curve": [[1, 1.0], [2, 0.9], [8, 0.5]],
        },
        "ssd": {"write_bw": 1e9, "read_bw": 1e9, "concurrency": 1, "interference_slope": 0.0},
    }
    assert normalized["scheduler"] == {
        "if_limit": 5.0,
        "min_buffers": 2,
        "priority_tie": "fcfs",
        "auto": {"objective": "makespan", "candidates": ["priority", "fair-share"]},
        "max_colocated": 2,
        "max_running_apps": 3,
    }
    # The time slice uses the custom buffer device: 8 GB / (2 x 2 GB/s) = 2 s.
    assert normalized["apps"][0]["phases"][0]["compute"] == 2.0


@pytest.mark.parametrize(
    ("device", "if_at_8", "write_mb", "read_mb", "concurrency"),
    [
        ("ram", 1.45, 59000, 65000, 8),
        ("nvme", 5.24, 1900, 2800, 4),
        ("ssd", 7.69, 500, 550, 2),
        ("hdd-fast", 10.52, 185, 215, 1),
        ("hdd", 11.90, 95, 115, 1),
    ],
)
def test_builtin_devices_follow_the_paper(
    device: str, if_at_8: float, write_mb: int, read_mb: int, concurrency: int
) -> None:
    model = builtin_devices()[device]
    assert (model.write_bw, model.read_bw) == (write_mb * 1e6, read_mb * 1e6)
    assert model.concurrency == concurrency
    assert model.interference_slope is not None
    assert math.isclose(1 + 7 * model.interference_slope, if_at_8, abs_tol=5e-4)


def test_parse_policies() -> None:
    assert parse_policies("all") == list(POLICIES)
    assert parse_policies("fairness, datawarp,fairness") == ["fairness", "datawarp"]
    with pytest.raises(ValueError, match='unknown policy "fifo"'):
        parse_policies("datawarp,fifo")
    with pytest.raises(ValueError, match="no policy given"):
        parse_policies(" , ")


def test_fat_tree_too_small_for_the_hosts(write_toml: Callable[[str], Path]) -> None:
    text = BASE_SCENARIO.replace('network = "switch"', 'network = "fat-tree"')
    text += """
[platform.fat_tree]
levels = 2
down = [2, 4]
up = [1, 2]
link_count = [1, 1]
"""
    with pytest.raises(ScenarioError) as error:
        load_scenario(write_toml(text + SYNTHETIC_APP))
    assert "platform.fat_tree.down: the tree has 8 leaves (the product of down), the scenario" in (
        str(error.value)
    )


def test_reservation_options_are_validated_and_normalized(
    write_toml: Callable[[str], Path],
) -> None:
    base = BASE_SCENARIO + "[scheduler]\nextend_reservations = true\nlend_write_only = true\n"
    app = SYNTHETIC_APP.replace("[[apps]]\n", '[[apps]]\nreservation = "5 GB"\nwrite_only = true\n')
    normalized = normalize(load_scenario(write_toml(base + app)))
    assert normalized["scheduler"]["extend_reservations"] is True
    assert normalized["scheduler"]["lend_write_only"] is True
    assert normalized["apps"][0]["reservation"] == 5_000_000_000
    assert normalized["apps"][0]["write_only"] is True
    # Off by default: absent from the normalized scenario, as before these options existed.
    plain = normalize(load_scenario(write_toml(BASE_SCENARIO + SYNTHETIC_APP)))
    assert "extend_reservations" not in plain["scheduler"]
    assert "reservation" not in plain["apps"][0]
    with pytest.raises(ScenarioError, match="scheduler.lend_write_only"):
        load_scenario(write_toml(BASE_SCENARIO + '[scheduler]\nlend_write_only = "yes"\n'))
    with pytest.raises(ScenarioError, match=r"apps\[0\].reservation"):
        load_scenario(write_toml(BASE_SCENARIO + app.replace('"5 GB"', '"0 GB"')))
