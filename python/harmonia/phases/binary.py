"""Binary-mode I/O phase detection (Harmonia paper, section IV-A, mode 3): which I/O entry points
an executable calls, read from its ELF symbol tables with pyelftools. A normally built program
names every libc, MPI-IO and HDF5 function it imports; a stripped one still has its dynamic
symbols, which is what the paper's "approximation" mode relies on (fopen/fclose, fwrite/fread)."""

from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

# I/O interfaces and the entry points that mark an I/O phase, by how data moves.
INTERFACES: dict[str, dict[str, set[str]]] = {
    "posix": {
        "open": {"open", "open64", "openat", "openat64", "creat", "creat64"},
        "write": {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "pwritev2"},
        "read": {"read", "pread", "pread64", "readv", "preadv", "preadv64", "preadv2"},
        "close": {"close"},
        "sync": {"fsync", "fdatasync", "sync_file_range"},
    },
    "stdio": {
        "open": {"fopen", "fopen64", "fdopen", "freopen", "freopen64"},
        "write": {"fwrite", "fputs", "fputc", "fprintf", "vfprintf", "putc", "fputs_unlocked",
                  "fwrite_unlocked"},
        "read": {"fread", "fgets", "fgetc", "getc", "fscanf", "fread_unlocked"},
        "close": {"fclose"},
        "sync": {"fflush"},
    },
    "mpi-io": {
        "open": {"MPI_File_open"},
        "write": {"MPI_File_write", "MPI_File_write_at", "MPI_File_write_all",
                  "MPI_File_write_at_all", "MPI_File_iwrite", "MPI_File_iwrite_at",
                  "MPI_File_write_ordered", "MPI_File_write_shared"},
        "read": {"MPI_File_read", "MPI_File_read_at", "MPI_File_read_all",
                 "MPI_File_read_at_all", "MPI_File_iread", "MPI_File_iread_at"},
        "close": {"MPI_File_close"},
        "sync": {"MPI_File_sync"},
    },
    "hdf5": {
        "open": {"H5Fopen", "H5Fcreate"},
        "write": {"H5Dwrite", "H5Awrite"},
        "read": {"H5Dread", "H5Aread"},
        "close": {"H5Fclose"},
        "sync": {"H5Fflush"},
    },
}  # fmt: skip


class BinaryError(Exception):
    """The file is missing or not an ELF executable or library."""


@dataclass
class BinaryReport:
    path: Path
    stripped: bool  # no .symtab: only dynamic symbols are known
    calls: dict[str, dict[str, list[str]]] = field(
        default_factory=dict
    )  # interface -> kind -> names

    @property
    def writes(self) -> bool:
        return any(kinds.get("write") for kinds in self.calls.values())

    @property
    def reads(self) -> bool:
        return any(kinds.get("read") for kinds in self.calls.values())

    def verdict(self) -> str:
        """What the paper's binary mode can say about this program's I/O phases."""
        if not self.calls:
            return "no I/O entry points: no I/O phases to detect"
        opens = any(k.get("open") for k in self.calls.values())
        closes = any(k.get("close") for k in self.calls.values())
        bounded = "open/close calls bound the phases" if opens and closes else "no open/close pair"
        io = " and ".join(
            x for x, present in (("writes", self.writes), ("reads", self.reads)) if present
        )
        mode = "approximate (stripped: dynamic symbols only)" if self.stripped else "symbols"
        return f"I/O phases expected: {io or 'metadata only'}; {bounded}; mode: {mode}"


def inspect(path: Path) -> BinaryReport:
    """Read the symbol tables of `path` and classify its I/O entry points."""
    try:
        with path.open("rb") as handle:
            elf = ELFFile(handle)
            names: set[str] = set()
            has_symtab = False
            for section in elf.iter_sections():
                if not isinstance(section, SymbolTableSection):
                    continue
                has_symtab |= section.name == ".symtab"
                for symbol in section.iter_symbols():
                    if symbol.name:
                        names.add(symbol.name.split("@")[0])
    except FileNotFoundError as error:
        raise BinaryError(f"{path}: no such file") from error
    except (ELFError, OSError) as error:
        raise BinaryError(f"{path}: not an ELF executable or library ({error})") from error
    report = BinaryReport(path, stripped=not has_symtab)
    for interface, kinds in INTERFACES.items():
        found = {kind: sorted(names & entry_points) for kind, entry_points in kinds.items()}
        found = {kind: calls for kind, calls in found.items() if calls}
        if found:
            report.calls[interface] = found
    return report
