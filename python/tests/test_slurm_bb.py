"""The burst-buffer directives as harmonia_bb.lua reads them (in slurmctld, for job_submit.lua
and burst_buffer.lua's synchronous hooks), DataWarp's #DW lines translated, the hooks' job
environment and bbstat's answer when nodes do not answer, all without Slurm: the Lua runs in
Debian's lua5.1 interpreter, the one Slurm links. The real cluster: tests/runtime/test_slurm.py."""

import json
import os
import shutil
import socket
import subprocess
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from harmonia.slurm import SlurmCluster, SlurmClusterError, SlurmSettings
from harmonia.slurm_bb import Hooks, Request, _unlink_beneath

CONFIG: dict[str, Any] = {
    "capacity": 1 << 30, "buffers": 4, "pool": "harmonia", "mode": "harmonia",
    "jobs": "/pfs/.harmonia-jobs", "pfs": "/pfs", "libharmonia": "/lib/x.so",
    "schedd": "/run/s.sock", "state": "/state", "python": "/usr/bin/python3",
}  # fmt: skip
DATAWARP = {**CONFIG, "mode": "datawarp"}
LIBRARY = resources.files("harmonia").joinpath("data/slurm/harmonia_bb.lua")
# Reads {"script", "config"} on stdin, runs what job_submit.lua and then job_process and paths
# run, and prints the outcome as JSON.
DRIVER = """
local harmonia = dofile(os.getenv("HARMONIA_BB_LUA"))
local cjson = require("cjson")
local input = cjson.decode(io.read("*a"))
local ok, result = harmonia.try(function()
    local translated = harmonia.check_submission(input.script, input.config)
    local request = harmonia.parse(translated or input.script, input.config)
    local env = {}
    for _, pair in ipairs(harmonia.job_env(input.config, "17", request)) do
        env[pair[1]] = pair[2]
    end
    return {translated = translated or false, request = harmonia.request_json(request),
            env = env, pools = harmonia.pools(input.config)}
end)
io.write(cjson.encode(ok and result or {refused = result}))
"""


def _why_no_lua() -> str:
    if shutil.which("lua5.1") is None:
        return "lua5.1 is not installed (Debian: lua5.1; scripts/install-deps.sh)"
    probe = subprocess.run(["lua5.1", "-e", 'require("cjson"); require("posix.sys.stat")'],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if probe.returncode != 0:
        return "lua-cjson or lua-posix is not installed (scripts/install-deps.sh)"
    return ""


needs_lua = pytest.mark.skipif(bool(_why_no_lua()), reason=_why_no_lua() or "-")


def submit(script: str, config: dict[str, Any] = CONFIG) -> dict[str, Any]:
    """What harmonia_bb.lua makes of `script`: {"refused": message} or the translated script,
    the request, the job's environment and the pools."""
    with resources.as_file(LIBRARY) as library:
        done = subprocess.run(
            ["lua5.1", "-e", DRIVER], env={**os.environ, "HARMONIA_BB_LUA": str(library)},
            input=json.dumps({"script": script, "config": config}),
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
    out: dict[str, Any] = json.loads(done.stdout)
    if "request" in out:
        out["request"] = Request.from_json(out["request"])
    return out


def refusal(lines: str, config: dict[str, Any] = CONFIG) -> str:
    out = submit("#!/bin/bash\n#SBATCH -n 1\n" + lines + "\nrun\n", config)
    assert "refused" in out, f"accepted: {out}"
    message: str = out["refused"]
    return message


@needs_lua
@pytest.mark.parametrize(
    ("size", "expected"),
    [("1048576", 1 << 20), ("512K", 512 << 10), ("3M", 3 << 20), ("2g", 2 << 30),
     ("1GiB", 1 << 30), ("1T", 1 << 40), ("2GB", 2 * 10**9), ("5kb", 5000), ("1P", 1 << 50),
     ("8191T", 8191 << 40)],
)  # fmt: skip
def test_sizes_read_as_slurm_reads_capacity(size: str, expected: int) -> None:
    """Slurm's suffix_mult: K..P and KiB..PiB binary, KB..PB decimal; exact up to 8 PiB."""
    out = submit(f"#BB_LUA jobdw io={size}\nrun\n", {**CONFIG, "buffers": 1 << 20})
    assert out["request"].io == expected


@needs_lua
@pytest.mark.parametrize(
    ("size", "message"),
    [("1.5G", "is not a size"), ("G", "is not a size"), ("1X", "unknown unit X"),
     ("1 G", "expected key=value"), ("-1M", "must not be negative"), ("0", "more than 0 bytes"),
     ("16777217T", "too large"), ("99999999999999999999999", "too large"), ("8P", "too large")],
)  # fmt: skip
def test_sizes_slurm_would_misread_are_refused(size: str, message: str) -> None:
    """Slurm reads 16777217T as 1T (it wraps past 2^64) and 1X as 1 byte: refused here."""
    assert message in refusal(f"#BB_LUA jobdw io={size}")


@needs_lua
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
    out = submit(script)
    assert out["translated"] is False  # nothing to translate
    request = out["request"]
    assert (request.capacity, request.priority, request.hint) == (2 << 30, -7, "cached")
    assert request.ntasks == 4 and request.pool == "harmonia"
    assert [(s.source, s.destination, s.type) for s in request.stage_in] == [
        (str(source), "$HARMONIA_BB/a/in.dat", "file"),
        (str(tmp_path / "inputs"), "$HARMONIA_BB/d", "directory"),
    ]
    assert [(s.source, s.type) for s in request.stage_out] == [("$HARMONIA_BB/out", "directory")]
    assert json.loads(out["pools"]) == {
        "pools": [{"id": "harmonia", "quantity": 4096, "granularity": 1 << 20}]
    }


@needs_lua
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
        ("#BB_LUA jobdw io=1G access=private", CONFIG, "access=private: only striped"),
        ("#BB_LUA jobdw io=1G io=2G", CONFIG, "io given twice"),
        ("#BB_LUA jobdw io", CONFIG, "'io': expected key=value"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA jobdw io=1G", CONFIG, "a second jobdw"),
        ("#BB_LUA persistent name=x", CONFIG, "unknown directive 'persistent'"),
        ("#BB_LUA", CONFIG, "expected jobdw, stage_in or stage_out"),
        ("#BB_LUAjobdw io=1G", CONFIG, "expected a space after #BB_LUA"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=rel destination=$HARMONIA_BB/x",
         CONFIG, "source=rel: must be an absolute path"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=/nonexistent destination=$HARMONIA_BB/x",
         CONFIG, "source=/nonexistent: no such file or directory"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=/ destination=$HARMONIA_BB/x",
         CONFIG, "source=/: is a directory (add type=directory)"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=/etc/hostname "
         "destination=$HARMONIA_BB/x type=directory", CONFIG, "is a file, not a directory"),
        ("#BB_LUA jobdw io=1G\n#BB_LUA stage_in source=/dev/null destination=$HARMONIA_BB/x",
         CONFIG, "not a regular file or directory"),
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
    lines: str, config: dict[str, Any], message: str
) -> None:
    said = refusal(lines, config)
    assert message in said
    assert said.startswith("line ") or "need a" in said


@needs_lua
def test_a_continued_line_is_read_as_slurm_joins_it() -> None:
    out = submit("#BB_LUA jobdw pool=harmonia \\\n#BB_LUA capacity=1G priority=3\nrun\n")
    assert (out["request"].capacity, out["request"].priority) == (1 << 30, 3)


@needs_lua
def test_datawarp_scripts_of_the_usual_shapes_are_translated(tmp_path: Path) -> None:
    """#DW lines become #BB_LUA lines on the same line numbers, $DW_JOB_STRIPED is the job's
    buffer space, and the job's environment names it as DataWarp's does."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "mesh.dat").write_bytes(b"m")
    lines = [
        "#!/bin/bash",
        "#SBATCH -n 2",
        "#DW jobdw type=scratch access_mode=striped capacity=2GiB",
        f"#DW stage_in type=directory source={inputs} destination=$DW_JOB_STRIPED/inputs",
        f"#DW stage_in type=file source={inputs}/mesh.dat destination=$DW_JOB_STRIPED/mesh.dat",
        f"#DW stage_out type=file source=$DW_JOB_STRIPED/out.dat destination={tmp_path}/out.dat",
        "srun ./app $DW_JOB_STRIPED",
    ]
    out = submit("\n".join(lines) + "\n")
    translated = out["translated"].split("\n")
    assert translated[:2] == lines[:2] and translated[6:] == lines[6:]
    assert translated[2] == "#BB_LUA jobdw pool=harmonia capacity=2GiB access=striped"
    assert translated[3] == (
        f"#BB_LUA stage_in source={inputs} destination=$HARMONIA_BB/inputs type=directory"
    )
    assert translated[5] == (
        f"#BB_LUA stage_out source=$HARMONIA_BB/out.dat destination={tmp_path}/out.dat type=file"
    )
    request = out["request"]
    assert request.capacity == 2 << 30 and request.pool == "harmonia"
    assert [s.destination for s in request.stage_in] == [
        "$HARMONIA_BB/inputs", "$HARMONIA_BB/mesh.dat"
    ]  # fmt: skip
    assert out["env"]["DW_JOB_STRIPED"] == out["env"]["HARMONIA_BB"] == "/pfs/.harmonia-jobs/17"
    assert out["env"]["HARMONIA_BYTES_PER_PROCESS"] == str(1 << 30)


@needs_lua
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("#DW jobdw type=scratch access_mode=striped", "capacity=SIZE is required"),
        ("#DW jobdw type=scratch access_mode=striped capacity=0",
         "#DW jobdw type=scratch access_mode=striped capacity=0: capacity=0: must be more than 0"),
        ("#DW jobdw capacity=1G pool=wlm_pool", "pool=wlm_pool: the only pool is harmonia"),
        ("#DW jobdw capacity=1G type=cache", "type=cache: only type=scratch"),
        ("#DW jobdw capacity=1G access_mode=private", "access=private: only striped"),
        ("#DW jobdw capacity=1G access_mode=striped,private", "access=striped,private: only"),
        ("#DW jobdw capacity=1G max_mds=yes", "unknown key 'max_mds'"),
        ("#DW jobdw capacity=1G\n#DW stage_in type=list source=/etc/hostname "
         "destination=$DW_JOB_STRIPED/x", "type=list is not offered"),
        ("#DW jobdw capacity=1G\n#DW stage_in source=/etc/hostname "
         "destination=$DW_JOB_PRIVATE/x", "private (per compute node) buffers are not offered"),
        ("#DW persistentdw name=project", "persistent buffers are not offered"),
        ("#DW swap 10GiB", "swap space on the buffers is not offered"),
        ("#DW jobdw capacity=99999999999999999999G", "too large"),
    ],
)  # fmt: skip
def test_datawarp_lines_not_offered_are_refused_by_name(line: str, message: str) -> None:
    said = refusal(line)
    assert message in said and said.startswith("line ")


@needs_lua
def test_untranslated_datawarp_lines_are_refused_in_job_process() -> None:
    """burst_buffer.lua alone (no job_submit.lua) would run the job without its #DW buffer."""
    with resources.as_file(LIBRARY) as library:
        done = subprocess.run(
            ["lua5.1", "-e", "local h = dofile(os.getenv('HARMONIA_BB_LUA')); "
             "print(select(2, h.try(h.parse, '#BB_LUA jobdw io=1G\\n#DW jobdw capacity=1G\\n', "
             "{capacity=2^30, buffers=1, pool='harmonia', mode='harmonia'})))"],
            env={**os.environ, "HARMONIA_BB_LUA": str(library)},
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
    assert "#DW directives need Harmonia's job_submit.lua" in done.stdout


@needs_lua
def test_the_job_environment_divides_the_declared_output_by_its_tasks() -> None:
    env = submit("#!/bin/bash\n#SBATCH --ntasks=4\n#BB_LUA jobdw io=64M priority=5\nrun\n")["env"]
    assert env["HARMONIA_BB"] == "/pfs/.harmonia-jobs/17"
    assert env["HARMONIA_STAGE_INCLUDE"] == env["HARMONIA_BB"]
    assert env["HARMONIA_BYTES_PER_PROCESS"] == str(16 << 20)
    assert env["HARMONIA_PRIORITY"] == "5" and env["LD_PRELOAD"] == "/lib/x.so"
    assert env["HARMONIA_SCHEDD"] == "/run/s.sock" and env["HARMONIA_BUFFER_ROOT"] == "/pfs"
    assert "HARMONIA_JOB" not in env  # libharmonia takes the key from SLURM_JOB_ID
    # No node agent unless asked: the job's own HARMONIA_NODE_AGENT is left alone.
    assert "HARMONIA_NODE_AGENT" not in env
    asked = submit("#!/bin/bash\n#BB_LUA jobdw io=64M node_agent=yes\nrun\n")
    assert asked["env"]["HARMONIA_NODE_AGENT"] == "1" and asked["request"].node_agent


def test_real_size_is_the_reservation_in_datawarp_mode_and_staged_bytes_otherwise(
    tmp_path: Path,
) -> None:
    state = '{"job": "3", "request": {"capacity": 1048576}, "staged_in": 4096}'
    (tmp_path / "3.json").write_text(state)
    assert Hooks({**DATAWARP, "state": str(tmp_path)}).real_size("3") == "1048576"
    assert Hooks({**CONFIG, "state": str(tmp_path)}).real_size("3") == "4096"


def test_bbstat_names_each_nodes_state_within_its_deadline(tmp_path: Path) -> None:
    """harmonia-bbctl stand-ins: nodes that answer (one draining, one that harmonia-schedd
    does not see connected), one that refuses the connection, one that never answers; bbstat
    waits for none of them past its deadline and says which is which."""
    tools = tmp_path / "tools"
    tools.mkdir()
    bbctl = tools / "bbctl"
    bbctl.write_text(
        "#!/bin/sh\n"
        'case "$2" in\n'
        '  *:1|*:5) echo \'{"capacity":"1000","used":"10","files":1,"draining":false,'
        '"drained_bytes":"5","received_bytes":"15"}\' ;;\n'
        '  *:4) echo \'{"capacity":"1000","used":"0","files":0,"draining":true,'
        '"drained_bytes":"0","received_bytes":"0"}\' ;;\n'
        '  *:2) echo "harmonia-bbctl: --node $2: cannot connect: Connection refused" >&2\n'
        "       exit 1 ;;\n"
        "  *) exec sleep 30 ;;\n"
        "esac\n"
    )
    schedctl = tools / "schedctl"
    schedctl.write_text(
        "#!/bin/sh\n"
        'echo \'{"policy": "max-bandwidth", "jobs": [{"job": "slurm-7", "processes": 2, '
        '"phases": 1}], "buffers": [{"address": "127.0.0.1:1", "connected": true}, '
        '{"address": "127.0.0.1:4", "connected": true}, '
        '{"address": "127.0.0.1:5", "connected": false}]}\'\n'
    )
    for tool in (bbctl, schedctl):
        tool.chmod(0o755)
    ports = tmp_path / "buffers"
    ports.mkdir()
    for k in range(5):
        (ports / f"bb{k}.port").write_text(f"{k + 1}\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "7.json").write_text(json.dumps({
        "job": "7", "uid": os.getuid(), "stage": "running", "staged_in": 4096,
        "request": {"capacity": 1 << 20, "io": 0},
    }))  # fmt: skip
    hooks = Hooks({**CONFIG, "state": str(state), "node_ports_dir": str(ports),
                   "bbctl": str(bbctl), "schedctl": str(schedctl)})  # fmt: skip
    started = time.monotonic()
    report = hooks.gather_status(0.5)
    assert time.monotonic() - started < 1.5
    states = {n["node"]: (n["state"], n["reason"]) for n in report["nodes"]}
    assert states["bb0"] == ("up", "")
    assert states["bb1"] == ("dead", "Connection refused")
    assert states["bb2"] == ("down", "no answer within 0.5 s")
    assert states["bb3"] == ("draining", "")
    assert states["bb4"] == ("down", "not connected to harmonia-schedd")
    assert report["jobs"][0]["processes"] == 2 and report["jobs"][0]["staged_in"] == 4096
    text = hooks.status()
    assert "Harmonia pool harmonia" in text and "no answer within 0.5 s" in text
    assert json.loads(hooks.status("json"))["nodes"][1]["state"] == "dead"


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
