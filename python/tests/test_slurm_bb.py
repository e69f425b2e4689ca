"""The #BB_LUA directive parser and the hooks' environment, without Slurm (the real cluster is
tests/runtime/test_slurm.py)."""

import socket
from pathlib import Path

import pytest

from harmonia.slurm import SlurmCluster, SlurmClusterError, SlurmSettings
from harmonia.slurm_bb import HookError, Hooks, _unlink_beneath, parse_directives, parse_size

CONFIG = {"capacity": 1 << 30, "buffers": 4, "pool": "harmonia", "mode": "harmonia"}
DATAWARP = {**CONFIG, "mode": "datawarp"}


def test_sizes_read_as_slurm_reads_capacity() -> None:
    assert parse_size("1048576") == 1 << 20
    assert parse_size("512K") == 512 << 10
    assert parse_size("3M") == 3 << 20
    assert parse_size("2g") == 2 << 30
    assert parse_size("1GiB") == 1 << 30
    assert parse_size("1T") == 1 << 40
    for bad in ("", "1.5G", "G", "1X", "-1M", "1 G"):
        with pytest.raises(ValueError, match="is not a size"):
            parse_size(bad)


def test_a_full_request_is_read(tmp_path: Path) -> None:
    source = tmp_path / "in.dat"
    source.write_bytes(b"x")
    (tmp_path / "inputs").mkdir()
    script = (
        "#!/bin/bash\n#SBATCH -n 4\n"
        "#BB_LUA jobdw pool=harmonia capacity=2G priority=-7 hint=cached access=striped\n"
        f"#BB_LUA stage_in source={source} destination=$HARMONIA_BB/a/in.dat\n"
        f"#BB_LUA stage_in source={tmp_path / 'inputs'} destination=$HARMONIA_BB/d "
        "type=directory\n"
        f"#BB_LUA stage_out source=$HARMONIA_BB/out destination={tmp_path}/res type=directory\n"
        "srun app\n"
        "#BB_LUA jobdw colour=ignored-after-the-first-command\n"
    )
    request = parse_directives(script, CONFIG)
    assert (request.capacity, request.priority, request.hint) == (2 << 30, -7, "cached")
    assert request.ntasks == 4 and request.pool == "harmonia"
    assert [(s.source, s.destination, s.type) for s in request.stage_in] == [
        (str(source), "$HARMONIA_BB/a/in.dat", "file"),
        (str(tmp_path / "inputs"), "$HARMONIA_BB/d", "directory"),
    ]
    assert [(s.source, s.type) for s in request.stage_out] == [("$HARMONIA_BB/out", "directory")]


@pytest.mark.parametrize(
    ("lines", "config", "message"),
    [
        ("#BB_LUA jobdw pool=harmonia capacity=1G size=3", CONFIG, "unknown key 'size'"),
        ("#BB_LUA jobdw pool=harmonia capacity=0", CONFIG, "capacity=0: must be more than 0"),
        ("#BB_LUA jobdw pool=harmonia capacity=5G", CONFIG, "more than the 4294967296 bytes"),
        ("#BB_LUA jobdw pool=other capacity=1G", CONFIG, "pool=other: expected pool=harmonia"),
        ("#BB_LUA jobdw capacity=1G", CONFIG, "pool=(missing)"),
        ("#BB_LUA jobdw pool=harmonia io=1G", CONFIG, "pool= needs capacity=SIZE"),
        ("#BB_LUA jobdw io=1G", DATAWARP, "capacity=SIZE is required in DataWarp mode"),
        ("#BB_LUA jobdw io=1G priority=high", CONFIG, "priority=high: expected an integer"),
        ("#BB_LUA jobdw io=1G priority=2000000", CONFIG, "expected -1000000 to 1000000"),
        ("#BB_LUA jobdw io=1G hint=hot", CONFIG, "hint=hot: expected cached or flushable"),
        ("#BB_LUA jobdw io=1G node_agent=on", CONFIG, "node_agent=on: expected yes or no"),
        ("#BB_LUA jobdw io=1G io=2G", CONFIG, "io given twice"),
        ("#BB_LUA jobdw io", CONFIG, "'io': expected key=value"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA jobdw io=1G", CONFIG, "a second jobdw"),
        ("#BB_LUA persistent name=x", CONFIG, "unknown directive 'persistent'"),
        ("#BB_LUA", CONFIG, "expected jobdw, stage_in or stage_out"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=rel destination=$HARMONIA_BB/x",
         CONFIG, "source=rel: must be an absolute path"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=/ destination=$HARMONIA_BB/x",
         CONFIG, "source=/: no such file"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=/etc/hostname destination=/tmp/x",
         CONFIG, "must be inside the job's buffers"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=/etc/hostname "
         "destination=$HARMONIA_BB/../x", CONFIG, "needs a plain relative path"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_out source=$HARMONIA_BB/x "
         "destination=/nonexistent-dir/x", CONFIG, "its directory does not exist"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_out source=$HARMONIA_BB/x destination=/tmp/x "
         "type=link", CONFIG, "type=link: expected file or directory"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_out source=$HARMONIA_BB/$USER destination=/tmp/x",
         CONFIG, "variables are not expanded"),
        ("#BB_LUA stage_out source=$HARMONIA_BB/x destination=/tmp/x", CONFIG,
         "need a `#BB_LUA jobdw` line"),
    ],
)  # fmt: skip
def test_bad_directives_name_the_line_and_key(
    lines: str, config: dict[str, object], message: str
) -> None:
    script = "#!/bin/bash\n#SBATCH -n 1\n" + lines + "\nrun\n"
    with pytest.raises(HookError) as caught:
        parse_directives(script, config)
    assert message in str(caught.value)
    assert str(caught.value).startswith("line ") or "need a" in str(caught.value)


def test_the_job_environment_divides_the_declared_output_by_its_tasks(tmp_path: Path) -> None:
    config = {**CONFIG, "state": str(tmp_path), "pfs": str(tmp_path / "pfs"),
              "jobs": str(tmp_path / "pfs" / ".harmonia-jobs"), "libharmonia": "/lib/x.so",
              "schedd": "/run/s.sock"}  # fmt: skip
    hooks = Hooks(config)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --ntasks=4\n#BB_LUA jobdw io=64M priority=5\nrun\n")
    path_file = tmp_path / "paths"
    hooks.paths("17", str(script), str(path_file))
    env = dict(line.split("=", 1) for line in path_file.read_text().splitlines())
    assert env["HARMONIA_BB"] == str(tmp_path / "pfs" / ".harmonia-jobs" / "17")
    assert env["HARMONIA_STAGE_INCLUDE"] == env["HARMONIA_BB"]
    assert env["HARMONIA_BYTES_PER_PROCESS"] == str(16 << 20)
    assert env["HARMONIA_PRIORITY"] == "5" and env["LD_PRELOAD"] == "/lib/x.so"
    assert "HARMONIA_JOB" not in env  # libharmonia takes the key from SLURM_JOB_ID
    # No node agent unless asked: the job's own HARMONIA_NODE_AGENT is left alone.
    assert "HARMONIA_NODE_AGENT" not in env


def test_node_agent_yes_asks_the_task_prolog_for_an_agent(tmp_path: Path) -> None:
    config = {**CONFIG, "state": str(tmp_path), "pfs": str(tmp_path / "pfs"),
              "jobs": str(tmp_path / "pfs" / ".harmonia-jobs"), "libharmonia": "/lib/x.so",
              "schedd": "/run/s.sock"}  # fmt: skip
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#BB_LUA jobdw io=64M node_agent=yes\nrun\n")
    path_file = tmp_path / "paths"
    Hooks(config).paths("18", str(script), str(path_file))
    env = dict(line.split("=", 1) for line in path_file.read_text().splitlines())
    assert env["HARMONIA_NODE_AGENT"] == "1" and env["HARMONIA_SCHEDD"] == "/run/s.sock"
    no = parse_directives("#BB_LUA jobdw io=64M node_agent=no\nrun\n", CONFIG)
    assert not no.node_agent


def test_real_size_is_the_reservation_in_datawarp_mode_and_staged_bytes_otherwise(
    tmp_path: Path,
) -> None:
    state = '{"job": "3", "request": {"capacity": 1048576}, "staged_in": 4096}'
    (tmp_path / "3.json").write_text(state)
    assert (
        Hooks({**DATAWARP, "state": str(tmp_path), "pfs": "/p", "jobs": "/p/j"}).real_size("3")
        == "1048576"
    )
    assert (
        Hooks({**CONFIG, "state": str(tmp_path), "pfs": "/p", "jobs": "/p/j"}).real_size("3")
        == "4096"
    )


def test_cluster_up_refuses_a_foreign_directory_and_a_taken_port(tmp_path: Path) -> None:
    """Before anything starts or is written: the errors name the directory and the port."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(SlurmClusterError, match="not empty and not a Harmonia cluster's"):
        SlurmCluster(SlurmSettings(foreign)).up(lambda _line: None)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fresh = tmp_path / "fresh"
        with pytest.raises(SlurmClusterError, match=f"--controller-port {port}: port already"):
            SlurmCluster(SlurmSettings(fresh, controller_port=port)).up(lambda _line: None)
        assert not fresh.exists() or not any(fresh.iterdir())
    with pytest.raises(SlurmClusterError, match="exists and is not a directory"):
        SlurmCluster(SlurmSettings(foreign / "notes.txt")).up(lambda _line: None)


def test_teardown_removes_copies_without_following_links(tmp_path: Path) -> None:
    space, outside = tmp_path / "space", tmp_path / "outside"
    (space / "in").mkdir(parents=True)
    outside.mkdir()
    (space / "in" / "a.dat").write_bytes(b"copy")
    (outside / "b.dat").write_bytes(b"not the job's")
    (space / "swapped").symlink_to(outside)
    _unlink_beneath(space, "in/a.dat")
    _unlink_beneath(space, "swapped/b.dat")
    _unlink_beneath(space, "in/missing.dat")
    assert not (space / "in" / "a.dat").exists()
    assert (outside / "b.dat").read_bytes() == b"not the job's"
