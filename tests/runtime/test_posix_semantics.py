"""POSIX semantics under libharmonia, call by call and with everyday programs: every sequence
runs without the library, with RAM staging, with SSD (log) staging and through buffer nodes, and
must give the same results, bytes and metadata (docs/staging-library.md, "Semantics")."""

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from bbio_support import BUILD, preload, run_driver
from modes_support import ALL_MODES, Modes, run, tree_snapshot

PROGRAMS = Path(__file__).with_name("posix_programs.py")
MPIIO = BUILD / "tests" / "runtime" / "mpiio_writer"


def scenario(name: str, directory: Path, env: dict[str, str]) -> dict[str, object]:
    return json.loads(run([sys.executable, str(PROGRAMS), name, str(directory)], env))


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize(
    "name",
    ["mmap-same-descriptor", "mmap-other-descriptor", "second-descriptor", "reused-numbers",
     "reopen-with-truncate", "metadata", "copies", "close-range", "high-descriptor", "hdf5",
     "two-appenders", "append-after-truncate", "dirfd-calls", "subprocess-then-read-own",
     "spawned-readers"],
)  # fmt: skip
def test_sequence_gives_what_plain_io_gives(modes: Modes, mode: str, name: str) -> None:
    if name == "hdf5":
        pytest.importorskip(
            "h5py", reason="h5py is not installed (python[dev] installs it)"
        )
    plain = scenario(name, modes.directory("plain"), {})
    staged = scenario(name, modes.directory(mode), modes.env(mode))
    assert staged == plain
    if name == "metadata":
        assert plain["futimens-mtime"] == 1_500_000_000_987_654_321, (
            "the times set stay"
        )
    if name == "reused-numbers":
        assert plain["same-number"], "mkstemp took the number fclose freed"
        assert plain["closedir"][0] and plain["pclose"][0], (
            "and those closedir, pclose freed"
        )
    if name == "close-range":
        assert plain["first"] != plain["second"]
    if name == "spawned-readers":
        assert plain["popen"] == "input for popen\n"


def stat_sizes(directory: Path, env: dict[str, str]) -> tuple[dict[str, int], int, str]:
    """The sizes the program's six stat calls report, the size on disk meanwhile (seen from
    here), and the file's digest after the close."""
    program = subprocess.Popen([sys.executable, str(PROGRAMS), "stat-sizes", str(directory)],
                               env={**os.environ, **env}, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert program.stdin is not None and program.stdout is not None
    sizes = json.loads(program.stdout.readline())["sizes"]
    on_disk = (directory / "sized").stat().st_size
    out, _ = program.communicate("go\n", timeout=60)
    assert program.returncode == 0
    return sizes, on_disk, json.loads(out)["file"]


@pytest.mark.parametrize("mode", ["ram", "disk"])
def test_stat_shows_the_written_size_while_the_bytes_stay_staged(
    modes: Modes, mode: str
) -> None:
    plain_sizes, plain_on_disk, plain_file = stat_sizes(modes.directory("plain"), {})
    sizes, on_disk, file = stat_sizes(modes.directory(mode), modes.env(mode))
    written = (1 << 20) + 123
    assert set(plain_sizes.values()) == {written} and plain_on_disk == written
    assert sizes == plain_sizes
    assert on_disk == 0, "stat did not flush: the bytes were still staged"
    assert file == plain_file


def driver_commands(
    mode: str, directory: Path, env: dict[str, str], commands: list[str]
) -> str:
    target = directory / "driven.bin"
    lines = run_driver(target, commands, env).lines
    return json.dumps(lines) + target.read_bytes().hex()


@pytest.mark.parametrize("mode", ALL_MODES)
def test_dup2_onto_stdout_keeps_the_order_of_stdio_and_write(
    modes: Modes, mode: str
) -> None:
    # stdout's FILE writes with libc's internal write, past any interposer: after dup2 onto it
    # the file must leave staging, or printf's bytes land before (under) the staged ones.
    commands = ["open", "wct", "write", "4000", "1", "stdout-mix", "3000", "write", "100", "2",
                "close"]  # fmt: skip
    plain = driver_commands("plain", modes.directory("plain"), {}, commands)
    staged = driver_commands(mode, modes.directory(mode), modes.env(mode), commands)
    assert staged == plain


@pytest.mark.parametrize("mode", ALL_MODES)
def test_freopen_of_a_staged_stream(modes: Modes, mode: str) -> None:
    commands = ["fopen", "w", "fwrite", "5000", "3", "freopen", "a", "fwrite", "700", "4",
                "fclose"]  # fmt: skip
    plain = driver_commands("plain", modes.directory("plain"), {}, commands)
    staged = driver_commands(mode, modes.directory(mode), modes.env(mode), commands)
    assert staged == plain


def to_the_second(
    snapshot: dict[str, tuple[object, ...]],
) -> dict[str, tuple[object, ...]]:
    """Files' times to the second (archives round them), links by their target only."""
    out: dict[str, tuple[object, ...]] = {}
    for key, entry in snapshot.items():
        if entry[0] == "file":
            out[key] = (*entry[:3], int(entry[3]) // 1_000_000_000)  # type: ignore[call-overload]
        else:
            out[key] = entry[:2]
    return out


def make_tree(root: Path) -> None:
    """Files of many sizes, modes and past times, in nested directories, and a symlink."""
    for k in range(40):
        sub = root / f"d{k % 4}" / f"e{k % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"f{k}.dat"
        path.write_bytes(
            bytes((k * 7 + i) % 256 for i in range(min(k * 9973, 300_000)))
        )
        path.chmod([0o644, 0o600, 0o755, 0o640, 0o4755][k % 5])
        os.utime(path, ns=(1_400_000_000_000_000_000 + k * 1_000_000_123,) * 2)
    (root / "d0" / "link").symlink_to("e0/f0.dat")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_tar_extract_keeps_bytes_modes_and_times(modes: Modes, mode: str) -> None:
    source = modes.directory("source")
    make_tree(source)
    archive = modes.tmp_path / "tree.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(source, arcname=".")
    # The archive keeps times to the microsecond: compare with what tar gives without the library.
    plain = modes.directory("plain")
    run(["tar", "-xpf", str(archive), "-C", str(plain)], {})
    target = modes.directory(mode)
    run(["tar", "-xpf", str(archive), "-C", str(target)], modes.env(mode))
    assert tree_snapshot(target) == tree_snapshot(plain)
    assert to_the_second(tree_snapshot(target)) == to_the_second(tree_snapshot(source))


@pytest.mark.parametrize("mode", ALL_MODES)
def test_cp_archive_keeps_bytes_modes_and_times(modes: Modes, mode: str) -> None:
    source = modes.directory("source")
    make_tree(source)
    target = modes.directory(mode) / "copy"
    run(["cp", "-a", str(source), str(target)], modes.env(mode))
    assert tree_snapshot(target) == tree_snapshot(source)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_rsync_archive_is_quiet_and_keeps_the_tree(modes: Modes, mode: str) -> None:
    # rsync's receiver writes each file through a descriptor relative to a directory descriptor
    # and sets its times with utimensat(dirfd, name, ...).
    if not shutil.which("rsync"):
        pytest.skip("rsync is not installed (scripts/install-deps.sh installs it)")
    source = modes.directory("source")
    make_tree(source)
    plain = modes.directory("plain") / "copy"
    run(["rsync", "-a", f"{source}/", str(plain)], {})
    target = modes.directory(mode) / "copy"
    run(["rsync", "-a", f"{source}/", str(target)], modes.env(mode))
    # rsync leaves a symbolic link the time it made it.
    without_link_times = [
        {key: entry[:2] if entry[0] == "link" else entry for key, entry in tree.items()}
        for tree in (tree_snapshot(target), tree_snapshot(plain))
    ]
    assert without_link_times[0] == without_link_times[1]


SQL = """
PRAGMA journal_mode={journal};
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL, blob BLOB);
BEGIN;
{inserts}
COMMIT;
UPDATE t SET value = value * 2 WHERE id % 3 = 0;
DELETE FROM t WHERE id % 7 = 0;
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(value), sum(length(blob)) FROM t;
PRAGMA integrity_check;
"""


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_sqlite3_gives_the_same_database(modes: Modes, mode: str, journal: str) -> None:
    if not shutil.which("sqlite3"):
        pytest.skip("sqlite3 is not installed (scripts/install-deps.sh installs it)")
    inserts = "\n".join(
        f"INSERT INTO t(name, value, blob) VALUES ('n{k}', {k * 1.5}, randomblob(0));"
        f"UPDATE t SET blob = zeroblob({k * 37 % 5000}) WHERE id = {k + 1};"
        for k in range(1500)
    )
    script = SQL.format(journal=journal, inserts=inserts)
    results = {}
    for label in ("plain", mode):
        database = modes.directory(label, journal) / "test.db"
        out = run(["sqlite3", str(database)], modes.env(label) if label != "plain" else {},
                  stdin=script)  # fmt: skip
        dump = run(["sqlite3", str(database), ".dump"], {})
        results[label] = (out, dump)
    assert results[mode] == results["plain"]
    assert results["plain"][0].strip().endswith("ok")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_mpiio_shared_file_gives_the_same_bytes(modes: Modes, mode: str) -> None:
    # Four ranks write interleaved blocks of one file collectively, sync, and read it all back.
    mpirun = shutil.which("mpirun")
    if not mpirun or not MPIIO.is_file():
        pytest.skip("MPI is not installed or mpiio_writer is not built")
    results = {}
    for label in ("plain", mode):
        target = modes.directory(label, "mpiio") / "shared.dat"
        command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4"]
        for key, value in (modes.env(label) if label != "plain" else {}).items():
            command += ["-x", f"{key}={value}"]
        out = run([*command, str(MPIIO), str(target), "16", "65536"], {})
        results[label] = (out.strip(), target.read_bytes(), oct(target.stat().st_mode))
    assert results["plain"][0] == "ok"
    assert results[mode] == results["plain"]


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("engine", ["psync", "mmap", "posixaio"])
def test_fio_verifies_its_data_in_every_mode(
    modes: Modes, mode: str, engine: str
) -> None:
    # psync goes through the write calls; mmap and posixaio go around them (plain I/O first).
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    directory = modes.directory(mode)
    done = subprocess.run(
        ["fio", "--name=staged", f"--directory={directory}", "--rw=randwrite", "--bs=16k",
         "--size=8m", f"--ioengine={engine}", "--verify=crc32c", "--do_verify=1",
         "--output-format=terse", "--terse-version=3", "--verify_state_save=0"],
        capture_output=True, text=True, env={**os.environ, **modes.env(mode)}, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fields = done.stdout.strip().split(";")
    assert fields[4] == "0", f"fio reported error {fields[4]}"
    assert int(fields[5]) > 0, "verification read the data back"


def test_debug_reports_what_is_not_handled(tmp_path: Path) -> None:
    done = subprocess.run(["true"], env={**os.environ, **preload(HARMONIA_DEBUG="1")},
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert (
        "libharmonia: debug: calls that bypass staging unseen: io_uring" in done.stderr
    )
    assert "mmap" in done.stderr
    quiet = subprocess.run(["true"], env={**os.environ, **preload()}, capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert quiet.stderr == ""
