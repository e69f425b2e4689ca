"""What `cmake --install` lays out (docs/deploy.md), checked in a staging root: the programs,
library, helpers, Slurm scripts, site file and units where a site expects them; the units pass
`systemd-analyze verify`, and each unit's own command line starts its daemon; the Python front
end, installed as a wheel, finds the installed programs. (The packages on a booted Debian 12:
`make package-test`, tests/packaging.)"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from bbio_support import BUILD

REPO = Path(__file__).parents[2]
UNITS = ("harmonia-schedd.service", "harmonia-bbd@.service")


def cache_value(name: str) -> str:
    for line in (BUILD / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split("=", 1)[1]
    raise AssertionError(f"{name} not in {BUILD}/CMakeCache.txt")


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The install tree, under a staging root (DESTDIR); returns the root."""
    root = tmp_path_factory.mktemp("destdir")
    done = subprocess.run(
        ["cmake", "--install", str(BUILD)], capture_output=True, text=True, check=False,
        env={**os.environ, "DESTDIR": str(root)}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root


def prefix(root: Path) -> Path:
    return root / cache_value("CMAKE_INSTALL_PREFIX").lstrip("/")


def test_the_layout_is_what_a_site_expects(staged: Path) -> None:
    top = prefix(staged)
    libdir = cache_value("CMAKE_INSTALL_LIBDIR")
    for program in ("harmonia-schedd", "harmonia-bbd", "harmonia-schedctl", "harmonia-bbctl",
                    "harmonia-recover", "harmonia-describe", "harmonia-sim"):  # fmt: skip
        assert os.access(top / "bin" / program, os.X_OK), program
    assert os.access(top / "libexec" / "harmonia" / "harmonia-agentd", os.X_OK)
    assert (top / libdir / "libharmonia.so").is_file()
    assert (top / "include" / "harmonia" / "bbio.h").is_file()
    slurm = top / "share" / "harmonia" / "slurm"
    for name in ("burst_buffer.lua", "job_submit.lua", "harmonia_bb.lua"):
        shipped = REPO / "python" / "harmonia" / "data" / "slurm" / name
        assert (slurm / name).read_bytes() == shipped.read_bytes(), name
    assert os.access(slurm / "harmonia-node-agent.sh", os.X_OK)
    site = REPO / "examples" / "site" / "harmonia.toml"
    installed_site = next(staged.rglob("etc/harmonia/harmonia.toml"))
    assert installed_site.read_bytes() == site.read_bytes()
    assert (top / "share" / "harmonia" / "examples" / "bbd-example.env").is_file()
    assert (top / "share" / "harmonia" / "grafana" / "harmonia.json").is_file()
    assert (top / "share" / "doc" / "harmonia" / "deploy.md").is_file()
    units = top / "lib" / "systemd" / "system"
    assert sorted(p.name for p in units.iterdir()) == sorted(UNITS)
    assert (top / "lib" / "sysusers.d" / "harmonia.conf").read_text().startswith("#")


def staged_unit(staged: Path, name: str, out: Path) -> Path:
    """The installed unit with its paths moved into the staging root."""
    text = (prefix(staged) / "lib" / "systemd" / "system" / name).read_text()
    installed = "/" + cache_value("CMAKE_INSTALL_PREFIX").strip("/")
    text = text.replace(f"{installed}/", f"{prefix(staged)}/")
    sysconfdir = next(staged.rglob("etc/harmonia")).parent
    text = re.sub(r"(?<![\w/])/(usr/local/)?etc/", f"{sysconfdir}/", text)
    unit = out / name
    unit.write_text(text)
    return unit


def exec_start(unit: Path) -> list[str]:
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.split("=", 1)[1])


def test_the_units_verify(staged: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed (Debian: systemd)")
    for name in UNITS:
        unit = staged_unit(staged, name, tmp_path)
        target = unit.with_name(name.replace("@", "@test")) if "@" in name else unit
        if target != unit:
            unit.rename(target)
        done = subprocess.run(
            [analyze, "verify", "--man=no", str(target)], capture_output=True, text=True,
            check=False, timeout=60,
        )  # fmt: skip
        problems = [line for line in done.stderr.splitlines()
                    if "sysinit.target" not in line and line.strip()]  # fmt: skip
        assert done.returncode == 0 and not problems, done.stderr
        # Sandboxed as far as the daemon allows: systemd's own exposure score (0 best, 10 worst).
        security = subprocess.run(
            [analyze, "security", "--offline=true", str(target)], capture_output=True,
            text=True, check=False, timeout=60,
        )  # fmt: skip
        score = re.search(r"Overall exposure level for \S+: ([\d.]+)", security.stdout)
        assert score is not None, security.stdout[-2000:]
        assert float(score.group(1)) <= (2.5 if "schedd" in name else 5.0), (
            security.stdout
        )


def wait_for_line(process: subprocess.Popen[str], prefix: str) -> str:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith(prefix):
            return line.strip().split("=", 1)[1]
    raise AssertionError(
        f"no {prefix} line; stderr: {process.stderr.read() if process.stderr else ''}"
    )


def test_each_units_command_line_starts_its_daemon(
    staged: Path, tmp_path: Path
) -> None:
    """The exact ExecStart of each unit, with the installed site file and what an environment
    file would give: the scheduler listens and a node registers with it; SIGTERM (systemctl
    stop) ends both cleanly."""
    schedd_command = exec_start(
        staged_unit(staged, "harmonia-schedd.service", tmp_path)
    )
    node_command = exec_start(staged_unit(staged, "harmonia-bbd@.service", tmp_path))
    assert schedd_command[1:3] == ["--config", schedd_command[2]]
    assert Path(schedd_command[2]).name == "harmonia.toml"
    socket_path = tmp_path / "schedd.sock"
    (tmp_path / "device").mkdir()
    (tmp_path / "pfs").mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HARMONIA_")}
    scheduler = subprocess.Popen(
        schedd_command, env={**clean, "HARMONIA_SCHEDD_SOCKET": str(socket_path),
                             "HARMONIA_POLICY_BUFFERS": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    node = None
    try:
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            assert scheduler.poll() is None and time.monotonic() < deadline, (
                scheduler.stderr
            )
            time.sleep(0.05)
        node = subprocess.Popen(
            node_command,
            env={**clean, "HARMONIA_BBD_DEVICE": str(tmp_path / "device"),
                 "HARMONIA_BBD_PFS": str(tmp_path / "pfs"), "HARMONIA_BBD_LISTEN": "127.0.0.1:0",
                 "HARMONIA_BBD_SCHEDD": f"unix:{socket_path}"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        port = int(wait_for_line(node, "port="))
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        ctl = prefix(staged) / "bin" / "harmonia-schedctl"
        deadline = time.monotonic() + 10
        while True:
            status = subprocess.run(
                [str(ctl), "--address", str(socket_path), "status", "--compact"],
                capture_output=True, text=True, check=True, timeout=10,
            ).stdout  # fmt: skip
            if '"connected":true' in status.replace(" ", ""):
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
    finally:
        for process in (node, scheduler):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
    assert scheduler.wait(timeout=10) == 0
    assert node is not None and node.wait(timeout=10) in (0, -signal.SIGTERM)
    assert not socket_path.exists()


FIND_THREE = """
import harmonia, json
from harmonia.simulator import find_tool
names = ("harmonia-schedd", "libharmonia.so", "harmonia-agentd")
print(json.dumps([harmonia.__file__] + [str(find_tool(n, "HARMONIA_UNSET", "none")) for n in names]))
"""


def test_the_wheel_finds_the_installed_programs(staged: Path, tmp_path: Path) -> None:
    """The front end built as a wheel and installed into an environment of its own (its
    dependencies from this one's), outside the source tree: with the installed bin/ on the
    PATH it finds the programs there, and libharmonia and harmonia-agentd where
    harmonia-describe says they are."""
    wheels, source = tmp_path / "wheels", tmp_path / "source"
    # Built from a copy: a build writes into the tree it builds.
    shutil.copytree(REPO / "python", source, ignore=shutil.ignore_patterns(
        "tests", "build", "*.egg-info", "__pycache__"))  # fmt: skip
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(wheels), str(source)], capture_output=True, text=True, check=False,
        timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    wheel = next(wheels.glob("harmonia-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    site = Path(sysconfig.get_paths(vars={"base": str(venv)})["purelib"])
    site.mkdir(parents=True, exist_ok=True)
    # The dependencies: this environment's packages, after the wheel's own (its harmonia).
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--target", str(site), str(wheel)], check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    bindir = prefix(staged) / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARMONIA_")}
    env["PATH"] = f"{bindir}:{env['PATH']}"
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", FIND_THREE],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    module, schedd, library, agentd = json.loads(found.stdout)
    assert Path(module).is_relative_to(site), module
    assert Path(schedd) == bindir / "harmonia-schedd"
    assert (
        Path(library)
        == prefix(staged) / cache_value("CMAKE_INSTALL_LIBDIR") / "libharmonia.so"
    )
    assert Path(agentd) == prefix(staged) / "libexec" / "harmonia" / "harmonia-agentd"
