"""The site file harmonia.toml (docs/configuration.md): the command line wins over the
environment, which wins over the file; every bad value is refused before anything starts, naming
the file and key, the variable or the option, and the reason; the docs' table is the daemons'
own declaration."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bbio_support import BUILD
from schedd_support import SCHEDD

BBD = BUILD / "src" / "bbd" / "harmonia-bbd"
REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "examples" / "site" / "harmonia.toml"
HARMONIA = Path(sys.executable).with_name("harmonia")


def clean_environment() -> dict[str, str]:
    """The test's environment without any HARMONIA_ setting of the daemons."""
    return {k: v for k, v in os.environ.items() if not k.startswith("HARMONIA_")}


def show(
    program: Path, *args: str, env: dict[str, str] | None = None
) -> dict[str, str]:
    """`program --show-config`: each key (table.key) with its value and source."""
    done = subprocess.run(
        [str(program), *args, "--show-config"], capture_output=True, text=True, check=False,
        env={**clean_environment(), **(env or {})}, timeout=20,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown, table = {}, ""
    for line in done.stdout.splitlines():
        if line.startswith("["):
            table = line.strip("[]")
        elif " = " in line:
            key, rest = line.split(" = ", 1)
            shown[f"{table}.{key}"] = rest
    return shown


def test_the_command_line_wins_over_the_environment_which_wins_over_the_file(
    tmp_path: Path,
) -> None:
    site = tmp_path / "harmonia.toml"
    site.write_text(
        '[schedd]\nstrategy = "2a"\ntick = 0.02\n[auth]\nadmin_uids = [450, 451]\n'
    )
    assert show(SCHEDD, "--config", str(site))["schedd.strategy"] == '"2a"  # site file'
    environment = {"HARMONIA_SCHEDD_STRATEGY": "1a", "HARMONIA_AUTH_ADMIN_UIDS": "7,8"}
    shown = show(SCHEDD, "--config", str(site), env=environment)
    assert shown["schedd.strategy"] == '"1a"  # environment'
    assert shown["auth.admin_uids"] == "[7, 8]  # environment"
    assert shown["schedd.tick"] == "0.02  # site file"
    assert shown["schedd.lease"] == "10  # default"
    shown = show(
        SCHEDD,
        "--config",
        str(site),
        "--strategy",
        "3b",
        "--admin-uid",
        "9",
        env=environment,
    )
    assert shown["schedd.strategy"] == '"3b"  # command line'
    assert shown["auth.admin_uids"] == "[9]  # command line"
    # HARMONIA_CONFIG names the file when --config does not; --config wins over it.
    assert (
        show(SCHEDD, env={"HARMONIA_CONFIG": str(site)})["schedd.tick"]
        == "0.02  # site file"
    )
    other = tmp_path / "other.toml"
    other.write_text("[schedd]\ntick = 0.5\n")
    shown = show(SCHEDD, "--config", str(other), env={"HARMONIA_CONFIG": str(site)})
    assert shown["schedd.tick"] == "0.5  # site file"


def test_the_example_serves_both_daemons(tmp_path: Path) -> None:
    scheduler = show(SCHEDD, "--config", str(EXAMPLE))
    assert scheduler["schedd.socket"] == '"/run/harmonia/schedd.sock"  # site file'
    assert scheduler["limits.max_output"] == '"256M"  # site file'
    assert "bbd.device" not in scheduler
    node = show(
        BBD, "--config", str(EXAMPLE), env={"HARMONIA_BBD_DEVICE": str(tmp_path)}
    )
    assert node["bbd.device"] == f'"{tmp_path}"  # environment'
    assert node["bbd.schedd"] == '"unix:/run/harmonia/schedd.sock"  # site file'
    assert "schedd.strategy" not in node


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[schedd]\nsockets = "x"\n',
            "schedd.sockets: unknown setting (known in [schedd]: socket,",
        ),
        (
            "[scheduler]\ntick = 1\n",
            "scheduler.tick: unknown setting (and no table [scheduler])",
        ),
        ("tick = 1\n", "tick: not a table"),
        ('[schedd]\ntick = "fast"\n', "schedd.tick: expected a number, got a string"),
        ("[schedd]\ntick = 20\n", "schedd.tick: must be from 0.001 to 10, got 20"),
        ("[schedd]\nsocket = 5\n", "schedd.socket: expected a string, got a number"),
        (
            '[schedd]\nstrategy = "4c"\n',
            "schedd.strategy: expected one of none, 1a, 1b, 2a, 2b,",
        ),
        (
            "[schedd]\npfs_servers = 1.5\n",
            'schedd.pfs_servers: expected a whole number, got "1.5"',
        ),
        (
            '[limits]\nmax_output = "1 KiB"\n',
            "limits.max_output: must be at least 1M, got 1 KiB",
        ),
        (
            '[policy]\ncapacity = "lots"\n',
            "policy.capacity: expected a size such as 4096, 64M",
        ),
        (
            "[policy]\nextend_reservations = 1\n",
            "policy.extend_reservations: expected true or false",
        ),
        (
            "[auth]\nadmin_uids = [5, -1]\n",
            "auth.admin_uids[1]: expected a user id from 0 to",
        ),
        ("[auth]\nadmin_uids = 5\n", None),  # one value for a list: a list of one
        ('[auth]\nmode = ["peer"]\n', "auth.mode: expected a string, got a list"),
        (
            '[policy]\nio_classes = ["fast:1"]\n',
            "policy.io_classes[0]: expected NAME:SLOWDOWN:",
        ),
        ("[bbd]\ncapacity = 12\n", "bbd.capacity: must be at least 4K, got 12"),
        (
            '[log]\nlevel = "loud"\n',
            "log.level: expected one of debug, info, warning, error",
        ),
        ("[schedd\ntick = 1\n", ":1:8: Error while parsing table header"),
    ],
)
def test_every_bad_value_in_the_file_is_refused_by_both_daemons(
    tmp_path: Path, text: str, expected: str | None
) -> None:
    site = tmp_path / "harmonia.toml"
    site.write_text(text)
    if expected is None:
        assert (
            show(SCHEDD, "--config", str(site))["auth.admin_uids"] == "[5]  # site file"
        )
        return
    socket = tmp_path / "s.sock"
    programs = [(SCHEDD, ["--socket", str(socket)])]
    # A node checks every key and value but the names the policy core registers (it links no
    # part of the scheduler): the scheduler checks those.
    if "schedd.strategy" not in expected:
        programs.append((BBD, ["--device", str(tmp_path), "--pfs", str(tmp_path),
                               "--listen", "127.0.0.1:0"]))  # fmt: skip
    for program, args in programs:
        done = subprocess.run(
            [str(program), "--config", str(site), *args], capture_output=True, text=True,
            check=False, env=clean_environment(), timeout=20,
        )  # fmt: skip
        assert done.returncode == 2, (program.name, done.stderr)
        assert f"{program.name}: {site}" in done.stderr and expected in done.stderr, (
            done.stderr
        )
        assert "port=" not in done.stdout  # nothing started
        assert not socket.exists()


@pytest.mark.parametrize(
    ("args", "environment", "expected"),
    [
        ([], {"HARMONIA_SCHEDD_TICK": "fast"}, 'HARMONIA_SCHEDD_TICK=fast: expected a number'),
        ([], {"HARMONIA_AUTH_ADMIN_UIDS": "1,x"}, 'HARMONIA_AUTH_ADMIN_UIDS=1,x: expected a user'),
        (["--tick", "20"], {}, "--tick 20: must be from 0.001 to 10, got 20"),
        (["--flush-order", "never"], {}, '--flush-order never: expected one of free, token,'),
        (["--config", "/nonexistent/harmonia.toml"], {},
         "/nonexistent/harmonia.toml: cannot read the site file: No such file or directory"),
        ([], {"HARMONIA_CONFIG": "/nonexistent/h.toml"}, "/nonexistent/h.toml: cannot read"),
        (["--record", "r.json"], {}, "--record and --accounting (schedd.record, "),
    ],
)  # fmt: skip
def test_bad_values_in_the_environment_and_on_the_command_line_are_named(
    tmp_path: Path, args: list[str], environment: dict[str, str], expected: str
) -> None:
    socket = tmp_path / "s.sock"
    done = subprocess.run(
        [str(SCHEDD), "--socket", str(socket), *args], capture_output=True, text=True,
        check=False, env={**clean_environment(), **environment}, timeout=20,
    )  # fmt: skip
    assert done.returncode == 2 and f"harmonia-schedd: {expected}" in done.stderr, (
        done.stderr
    )
    assert not socket.exists()


def test_a_node_without_its_directories_does_not_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BBD), "--pfs", str(tmp_path)], capture_output=True, text=True, check=False,
        env=clean_environment(), timeout=20,
    )  # fmt: skip
    assert done.returncode == 2
    assert "needs its device directory and the PFS directory" in done.stderr


def test_harmonia_schedd_checks_the_file_before_it_starts(tmp_path: Path) -> None:
    shown = subprocess.run(
        [str(HARMONIA), "schedd", "--config", str(EXAMPLE), "--print-command"],
        capture_output=True, text=True, check=False, env=clean_environment(),
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split()[1:] == ["--config", str(EXAMPLE)]
    bad = tmp_path / "bad.toml"
    bad.write_text('[schedd]\nstrategy = "4c"\nlease = -1\n[auth]\nmode = "kerberos"\n')
    refused = subprocess.run(
        [str(HARMONIA), "schedd", "--config", str(bad)], capture_output=True, text=True,
        check=False, env=clean_environment(),
    )  # fmt: skip
    assert refused.returncode == 2
    for key in ("schedd.strategy", "schedd.lease", "auth.mode"):
        assert f"{bad}: {key}:" in refused.stderr, refused.stderr


def test_the_docs_table_is_the_declaration() -> None:
    generated = subprocess.run(
        [str(HARMONIA), "describe", "--settings", "--markdown"], capture_output=True, text=True,
        check=True,
    ).stdout  # fmt: skip
    docs = (REPO / "docs" / "configuration.md").read_text()
    start = docs.index(
        "<!-- settings table: harmonia describe --settings --markdown -->\n"
    )
    table = docs[
        docs.index("\n", start) + 1 : docs.index("<!-- end of settings table -->")
    ]
    assert table == generated, (
        "docs/configuration.md: run harmonia describe --settings --markdown"
    )
    # Every declared setting of a daemon is one of its options, with its key in the help.
    for program in (SCHEDD, BBD):
        help_text = subprocess.run(
            [str(program), "--help"], capture_output=True, text=True, check=True
        ).stdout
        for line in generated.splitlines()[2:]:
            key, option, daemons = (cell.strip(" `") for cell in line.split("|")[1:4])
            option = option.split("`")[0]
            if daemons in ("both", "schedd" if program == SCHEDD else "bbd"):
                assert f"{option} " in help_text and f"[{key}, " in help_text, (
                    program,
                    key,
                )
