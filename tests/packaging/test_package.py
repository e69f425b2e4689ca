"""The Debian packages on a clean Debian 12 with its own systemd (make package-test,
docs/deploy.md): a root made by debootstrap, the package installed there (apt resolves its
dependencies from Debian), systemd booted in it with systemd-nspawn; then the units are started,
used, killed, restarted and stopped for real. Slow (a debootstrap, a few minutes; the downloaded
packages are kept in /var/cache/harmonia-package-test), so not part of make test."""

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

REPO = Path(__file__).parents[2]
PACKAGES = Path(os.environ.get("PACKAGE_BUILD", REPO / "build-package")).absolute()
CACHE = Path("/var/cache/harmonia-package-test")
MIRROR = os.environ.get("HARMONIA_DEBIAN_MIRROR", "http://deb.debian.org/debian")

SITE = """
[schedd]
socket = "/run/harmonia/schedd.sock"
metrics = "127.0.0.1:9466"
[policy]
buffers = 1
capacity = "256M"
[bbd]
pfs = "/srv/pfs"
capacity = "256M"
schedd = "unix:/run/harmonia/schedd.sock"
"""
NODE_ENV = """HARMONIA_BBD_DEVICE=/var/lib/harmonia/bbd-a
HARMONIA_BBD_LISTEN=127.0.0.1:7080
HARMONIA_BBD_METRICS=127.0.0.1:9467
"""


def nspawn(root: Path, *args: str) -> list[str]:
    # Not registered with machined, in no scope of its own: this host need not run systemd.
    return [
        "systemd-nspawn",
        "-q",
        "--register=no",
        "--keep-unit",
        "-D",
        str(root),
        *args,
    ]


class Container:
    """A booted Debian 12: commands run in it with nsenter, as root."""

    def __init__(self, root: Path, log: Path) -> None:
        self.log = log.open("w")
        self.process = subprocess.Popen(
            # Its own network (loopback alone): its ports cannot clash with this host's.
            nspawn(root, "--boot", "--console=passive", "--private-network"), stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        self.leader = 0
        while not self.leader:
            assert self.process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the container's systemd did not start"
            children = Path(
                f"/proc/{self.process.pid}/task/{self.process.pid}/children"
            )
            pids = children.read_text().split() if children.exists() else []
            if pids and Path(f"/proc/{pids[0]}/comm").read_text().strip() == "systemd":
                self.leader = int(pids[0])
            time.sleep(0.2)
        # Until systemd has set up its bus (nsenter may come before it), then until it booted.
        answer = self.run("systemctl", "is-system-running", "--wait", check=False)
        while not answer.stdout.strip():
            assert time.monotonic() < deadline, (answer.stderr, log.read_text()[-3000:])
            time.sleep(0.5)
            answer = self.run("systemctl", "is-system-running", "--wait", check=False)
        assert answer.stdout.strip() in ("running", "degraded"), answer.stdout

    def run(
        self, *command: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["nsenter", "-t", str(self.leader), "-a", *command], capture_output=True, text=True,
            check=False, timeout=timeout,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, (command, done.stdout, done.stderr)
        return done

    def write(self, path: str, text: str) -> None:
        self.run("sh", "-c", f"cat > {path} <<'EOF'\n{text}EOF\n")

    def unit(self, name: str, *properties: str) -> dict[str, str]:
        shown = self.run(
            "systemctl", "show", name, *(f"-p{p}" for p in properties)
        ).stdout
        return dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)

    def wait(
        self,
        what: str,
        check: Callable[[], bool],
        explain: Callable[[], str] = lambda: "",
        timeout: float = 20,
    ) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"{what}\n{explain()}"
            time.sleep(0.2)

    def scrape(self, port: int) -> dict[str, float]:
        """The endpoint's samples (no labels), parsed as OpenMetrics (bash's /dev/tcp: the
        container has no HTTP client)."""
        script = (f"exec 3<>/dev/tcp/127.0.0.1/{port}; "
                  "printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3")  # fmt: skip
        answer = self.run("bash", "-c", script).stdout
        # (text mode: the answer's CRLFs read as newlines)
        assert "\n\n" in answer, f"no HTTP answer on port {port}: {answer!r}"
        body = answer.split("\n\n", 1)[1]
        return {s.name: s.value for f in text_string_to_metric_families(body)
                for s in f.samples if not s.labels}  # fmt: skip

    def stop(self) -> None:
        if self.process.poll() is None:
            self.run("systemctl", "poweroff", check=False)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    if os.getuid() != 0:
        pytest.skip("debootstrap and systemd-nspawn need root")
    for tool in ("debootstrap", "systemd-nspawn", "nsenter"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (scripts/install-deps.sh installs it)")
    package = next(PACKAGES.glob("harmonia_*_amd64.deb"), None)
    if package is None:
        pytest.skip(f"no package in {PACKAGES}: make package")
    base = tmp_path_factory.mktemp("debian12")
    root = base / "root"
    (CACHE / "debs").mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        ["debootstrap", "--variant=minbase", "--include=systemd,systemd-sysv,dbus,procps",
         f"--cache-dir={CACHE / 'debs'}", "bookworm", str(root), MIRROR],
        capture_output=True, text=True, check=False, timeout=1200,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    # The package from its file, its dependencies (and the munge it recommends) from Debian.
    installed = subprocess.run(
        nspawn(root, f"--bind-ro={PACKAGES}:/packages", "sh", "-c",
               "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
               f"/packages/{package.name}"),
        capture_output=True, text=True, check=False, timeout=1200,
    )  # fmt: skip
    assert installed.returncode == 0, (
        installed.stdout[-3000:] + installed.stderr[-3000:]
    )
    booted = Container(root, base / "boot.log")
    try:
        yield booted
    finally:
        booted.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_the_package_installs_its_user_files_and_units(container: Container) -> None:
    assert container.run("id", "-u", "harmonia").stdout.strip().isdigit()
    assert container.run(
        "dpkg-query", "-W", "-f=${Status}", "harmonia"
    ).stdout.endswith("installed")
    conffiles = container.run("dpkg-query", "-W", "-f=${Conffiles}", "harmonia").stdout
    assert "/etc/harmonia/harmonia.toml" in conffiles
    for unit in ("harmonia-schedd.service", "harmonia-bbd@any.service"):
        assert container.unit(unit, "LoadState")["LoadState"] == "loaded"
    # Nothing started on install: the site file comes first.
    assert (
        container.unit("harmonia-schedd.service", "ActiveState")["ActiveState"]
        == "inactive"
    )
    shown = container.run("harmonia-schedd", "--show-config").stdout
    assert "# site file /etc/harmonia/harmonia.toml" in shown


def test_the_units_run_serve_a_user_survive_kills_and_stop(
    container: Container,
) -> None:
    container.write("/etc/harmonia/harmonia.toml", SITE)
    container.write("/etc/harmonia/bbd-a.env", NODE_ENV)
    container.run("mkdir", "-p", "/srv/pfs")
    container.run(
        "systemctl", "start", "harmonia-schedd.service", "harmonia-bbd@a.service"
    )
    scheduler = container.unit("harmonia-schedd.service", "ActiveState", "MainPID")
    assert scheduler["ActiveState"] == "active"
    owner = container.run(
        "ps", "-o", "user=", "-p", scheduler["MainPID"]
    ).stdout.strip()
    assert owner == "harmonia", "the scheduler runs as its own user"
    status = [
        "harmonia-schedctl",
        "--address",
        "/run/harmonia/schedd.sock",
        "status",
        "--compact",
    ]
    container.wait("the node did not register",
                   lambda: '"connected":true' in container.run(*status).stdout)  # fmt: skip

    # A user writes through the node and drains: the sandbox lets the node act as the user.
    container.run("useradd", "-m", "alice")
    container.run("install", "-d", "-o", "alice", "-m", "0755", "/srv/pfs/alice")
    container.run(
        "sh", "-c", "head -c 3000000 /dev/urandom > /tmp/data; chmod 644 /tmp/data"
    )
    bbctl = [
        "runuser",
        "-u",
        "alice",
        "--",
        "harmonia-bbctl",
        "--node",
        "127.0.0.1:7080",
    ]
    before = container.scrape(9467)
    container.run(*bbctl, "put", "alice/out.dat", "/tmp/data")
    held = container.scrape(9467)
    assert (
        held["harmonia_bbd_received_bytes_total"]
        - before["harmonia_bbd_received_bytes_total"]
        == 3e6
    )
    assert held["harmonia_bbd_used_bytes"] == 3e6
    container.run(*bbctl, "drain", "alice/out.dat")
    assert container.scrape(9467)["harmonia_bbd_used_bytes"] == 0
    container.run("cmp", "/tmp/data", "/srv/pfs/alice/out.dat")
    assert (
        container.run("stat", "-c", "%U", "/srv/pfs/alice/out.dat").stdout.strip()
        == "alice"
    )
    assert container.scrape(9466)["harmonia_schedd_requests_total"] > 0

    # Killed, each comes back (Restart=on-failure); the node recovers what it held.
    container.run(*bbctl, "put", "alice/kept.dat", "/tmp/data")
    for unit in ("harmonia-bbd@a.service", "harmonia-schedd.service"):
        old = container.unit(unit, "MainPID")["MainPID"]
        container.run("systemctl", "kill", "-s", "SIGKILL", unit)

        def restarted(unit: str = unit, old: str = old) -> bool:
            now = container.unit(unit, "ActiveState", "MainPID")
            return now["ActiveState"] == "active" and now["MainPID"] not in (old, "0")

        container.wait(f"{unit} was not restarted", restarted,
                       lambda u=unit: container.run("systemctl", "status", "--no-pager", "-n",
                                                    "20", u, check=False).stdout)  # fmt: skip
        assert int(container.unit(unit, "NRestarts")["NRestarts"]) >= 1
    container.wait("the restarted node did not register again",
                   lambda: '"connected":true' in container.run(*status, check=False).stdout)  # fmt: skip
    container.run(*bbctl, "drain", "alice/kept.dat")
    container.run("cmp", "/tmp/data", "/srv/pfs/alice/kept.dat")

    # Stopped cleanly (SIGTERM), their sockets gone.
    container.run(
        "systemctl", "stop", "harmonia-bbd@a.service", "harmonia-schedd.service"
    )
    for unit in ("harmonia-bbd@a.service", "harmonia-schedd.service"):
        shown = container.unit(unit, "ActiveState", "Result")
        assert shown == {"ActiveState": "inactive", "Result": "success"}, (unit, shown)
    assert (
        container.run("test", "-e", "/run/harmonia/schedd.sock", check=False).returncode
        != 0
    )


def test_a_bad_site_file_fails_the_unit_with_one_line_naming_it(
    container: Container,
) -> None:
    container.write("/etc/harmonia/harmonia.toml", SITE + '[auth]\nmode = "kerberos"\n')
    # Type=exec: the start succeeds once the program runs; the unit fails when it exits.
    container.run("systemctl", "start", "harmonia-schedd.service", check=False)
    container.wait("the unit did not fail", lambda: container.unit(
        "harmonia-schedd.service", "ActiveState")["ActiveState"] == "failed")  # fmt: skip
    journal = container.run("journalctl", "-u", "harmonia-schedd.service", "-o", "cat",
                            "--no-pager").stdout  # fmt: skip
    assert ('/etc/harmonia/harmonia.toml: auth.mode: expected one of peer, munge, got "kerberos"'
            in journal), journal[-2000:]  # fmt: skip
    # Not restarted over and over: a restart cannot mend the file.
    assert container.unit("harmonia-schedd.service", "NRestarts")["NRestarts"] == "0"
    container.write("/etc/harmonia/harmonia.toml", SITE)
    container.run("systemctl", "reset-failed", "harmonia-schedd.service")


def test_removing_the_package_stops_the_daemons(container: Container) -> None:
    container.run(
        "systemctl", "start", "harmonia-schedd.service", "harmonia-bbd@a.service"
    )
    container.run("apt-get", "remove", "-y", "-q", "harmonia")
    for unit in ("harmonia-schedd.service", "harmonia-bbd@a.service"):
        assert container.unit(unit, "ActiveState")["ActiveState"] == "inactive", unit
    assert (
        container.run("test", "-e", "/usr/bin/harmonia-schedd", check=False).returncode
        != 0
    )
    # A conffile stays until purged.
    assert (
        container.run(
            "test", "-e", "/etc/harmonia/harmonia.toml", check=False
        ).returncode
        == 0
    )
