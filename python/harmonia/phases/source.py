"""Source-mode I/O phase detection (Harmonia paper, section IV-A, mode 2): find the I/O-intensive
code blocks of C, C++ and Fortran programs with a real parser (tree-sitter grammars from PyPI),
and optionally mark them for libharmonia.

A block is an outermost loop that contains I/O calls. Its score weighs every I/O call in it by
kind (write 3, read 2, open/close/sync 1) and doubles it for each loop around the call, so a
write in a doubly nested loop counts 12 and a close in a loop 2 (docs/phase-detection.md).
"""

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter_c
import tree_sitter_cpp
import tree_sitter_fortran
from tree_sitter import Language, Node, Parser

from harmonia.phases.binary import INTERFACES

WEIGHTS = {"write": 3, "read": 2, "open": 1, "close": 1, "sync": 1}

# Calls by kind: the binary mode's entry points, plus netCDF and the Fortran bindings.
_CALLS: dict[str, str] = {
    name.lower(): kind
    for kinds in INTERFACES.values()
    for kind, names in kinds.items()
    for name in names
}
_CALL_PREFIXES = (
    ("nc_put_", "write"), ("nc_get_", "read"), ("ncmpi_put_", "write"), ("ncmpi_get_", "read"),
    ("nf90_put_", "write"), ("nf90_get_", "read"), ("h5dwrite", "write"), ("h5dread", "read"),
    ("mpi_file_write", "write"), ("mpi_file_read", "read"),
)  # fmt: skip
# Fortran I/O statements (tree-sitter-fortran node types).
_FORTRAN_STATEMENTS = {
    "write_statement": "write",
    "print_statement": "write",
    "read_statement": "read",
    "open_statement": "open",
    "close_statement": "close",
    "flush_statement": "sync",
}

LANGUAGES = {
    "c": (Language(tree_sitter_c.language()), (".c", ".h")),
    "cpp": (
        Language(tree_sitter_cpp.language()),
        (".cc", ".cpp", ".cxx", ".c++", ".C", ".hpp", ".hh", ".hxx"),
    ),
    "fortran": (
        Language(tree_sitter_fortran.language()),
        (".f", ".for", ".f90", ".f95", ".f03", ".f08", ".F", ".F90", ".F95", ".F03", ".F08"),
    ),
}
_LOOPS = {
    "c": {"for_statement", "while_statement", "do_statement"},
    "cpp": {"for_statement", "while_statement", "do_statement", "for_range_loop"},
    "fortran": {"do_loop"},
}
_FUNCTIONS = {"function_definition", "subroutine", "function", "program", "module_procedure"}


class SourceError(Exception):
    """The directory cannot be analysed or marked; the message names it."""


@dataclass(frozen=True)
class IoCall:
    name: str
    kind: str
    line: int
    depth: int  # loops around the call


@dataclass
class Block:
    path: Path  # relative to the analysed directory
    language: str
    function: str
    start_line: int
    end_line: int
    calls: list[IoCall] = field(default_factory=list)
    markable: bool = True  # a statement of its own lines: markers can go around it
    _start_byte: int = 0
    _end_byte: int = 0

    @property
    def score(self) -> int:
        return sum(WEIGHTS[c.kind] * 2**c.depth for c in self.calls)

    @property
    def name(self) -> str:
        return re.sub(r"[^\w.-]", "_", f"{self.function}_{self.path.stem}_{self.start_line}")


@dataclass
class SourceReport:
    directory: Path
    files: int = 0
    blocks: list[Block] = field(default_factory=list)
    unparsed: list[tuple[Path, str]] = field(default_factory=list)


def language_of(path: Path) -> str | None:
    for name, (_, suffixes) in LANGUAGES.items():
        if path.suffix in suffixes:
            return name
    return None


def _call_kind(name: str) -> str | None:
    lowered = name.lower()
    if lowered in _CALLS:
        return _CALLS[lowered]
    for prefix, kind in _CALL_PREFIXES:
        if lowered.startswith(prefix):
            return kind
    return None


def _callee(node: Node, source: bytes) -> str | None:
    """The name a C/C++ call or a Fortran `call` statement calls, without qualifiers."""
    target = node.child_by_field_name("function") if node.type == "call_expression" else None
    if target is None:
        target = next((c for c in node.named_children if c.type == "identifier"), None)
    if target is None or target.type not in ("identifier", "qualified_identifier"):
        return None
    text = source[target.start_byte : target.end_byte].decode(errors="replace")
    return text.split("::")[-1].strip() or None


def _io_kind(node: Node, language: str, source: bytes) -> tuple[str, str] | None:
    if language == "fortran":
        if node.type in _FORTRAN_STATEMENTS:
            return node.type.removesuffix("_statement").upper(), _FORTRAN_STATEMENTS[node.type]
        if node.type == "subroutine_call" and (name := _callee(node, source)):
            return (name, kind) if (kind := _call_kind(name)) else None
        return None
    if node.type == "call_expression" and (name := _callee(node, source)):
        return (name, kind) if (kind := _call_kind(name)) else None
    return None


def _function_name(node: Node | None, source: bytes) -> str:
    while node is not None and node.type not in _FUNCTIONS:
        node = node.parent
    if node is None:
        return "file"
    if node.type == "function_definition":  # C/C++: through pointer and reference declarators
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        name = declarator.child_by_field_name("declarator") if declarator else None
    else:  # Fortran: the name in the program, subroutine or function statement
        statement = next((c for c in node.named_children if c.type.endswith("_statement")), None)
        name = next(
            (c for c in (statement.named_children if statement else []) if c.type == "name"), None
        )
    if name is None:
        return node.type
    return source[name.start_byte : name.end_byte].decode(errors="replace")


def _alone_on_its_lines(node: Node, source: bytes, language: str) -> bool:
    """Whether markers can go on lines of their own before and after `node`: it starts and ends
    its lines, and (C/C++) it is a statement of a block, not the body of an unbraced if/for."""
    line_start = source.rfind(b"\n", 0, node.start_byte) + 1
    line_end = source.find(b"\n", node.end_byte)
    before = source[line_start : node.start_byte]
    after = source[node.end_byte : len(source) if line_end < 0 else line_end]
    if before.strip() or after.strip():
        return False
    if language == "fortran":
        return True
    parent = node.parent
    return parent is not None and parent.type in ("compound_statement", "translation_unit")


def _walk(node: Node) -> Iterator[Node]:
    yield node
    for child in node.children:
        yield from _walk(child)


def analyze_file(path: Path, relative: Path, language: str) -> list[Block]:
    """The I/O blocks of one file; raises SourceError when it cannot be read or parsed."""
    try:
        source = path.read_bytes()
    except OSError as error:
        raise SourceError(f"{path}: cannot read: {error.strerror}") from error
    tree = Parser(LANGUAGES[language][0]).parse(source)
    loops = _LOOPS[language]
    blocks: list[Block] = []

    def visit(node: Node, block: Block | None, depth: int) -> None:
        if node.type in loops:
            depth += 1
            if block is None:
                block = Block(
                    relative, language, _function_name(node, source),
                    node.start_point[0] + 1, node.end_point[0] + 1,
                    markable=_alone_on_its_lines(node, source, language),
                    _start_byte=node.start_byte, _end_byte=node.end_byte,
                )  # fmt: skip
                blocks.append(block)
        elif block is not None and (found := _io_kind(node, language, source)):
            block.calls.append(IoCall(found[0], found[1], node.start_point[0] + 1, depth))
        for child in node.children:
            visit(child, block, depth)

    visit(tree.root_node, None, 0)
    if tree.root_node.has_error and not any(b.calls for b in blocks):
        bad = next(n for n in _walk(tree.root_node) if n.type == "ERROR" or n.is_missing)
        raise SourceError(f"{path}:{bad.start_point[0] + 1}: cannot parse it as {language}")
    return [b for b in blocks if b.calls]


def analyze(directory: Path, min_score: int = 3) -> SourceReport:
    """Every C, C++ and Fortran file under `directory`; files that do not parse are listed in
    `unparsed` and skipped. Raises SourceError when `directory` is not a directory."""
    if not directory.is_dir():
        raise SourceError(f"{directory}: not a directory")
    report = SourceReport(directory)
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        language = language_of(path)
        if language is None:
            continue
        report.files += 1
        try:
            blocks = analyze_file(path, path.relative_to(directory), language)
        except SourceError as error:
            report.unparsed.append((path.relative_to(directory), str(error)))
            continue
        report.blocks += [b for b in blocks if b.score >= min_score]
    report.blocks.sort(key=lambda b: (-b.score, str(b.path), b.start_line))
    return report


def _markers(block: Block, indent: str) -> tuple[str, str]:
    if block.language == "fortran":
        return (
            f"{indent}call harmonia_io_begin('{block.name}')\n",
            f"{indent}call harmonia_io_end()\n",
        )
    return (
        f"{indent}#pragma harmonia io_begin({block.name})\n",
        f"{indent}#pragma harmonia io_end\n",
    )


def inject(report: SourceReport, out: Path) -> list[Block]:
    """Copies the analysed directory to `out` with phase markers around every markable block:
    `#pragma harmonia io_begin(NAME)` / `io_end` for C and C++ (turned into calls by `harmonia
    annotate`), `call harmonia_io_begin('NAME')` / `call harmonia_io_end()` for Fortran (link
    with -lharmonia). Returns the blocks marked. The input is never modified."""
    source_dir = report.directory.resolve()
    target = out.resolve()
    if target == source_dir or source_dir in target.parents:
        raise SourceError(f"{out}: must not be inside the analysed directory {report.directory}")
    if out.exists() and any(out.iterdir()):
        raise SourceError(f"{out}: exists and is not empty")
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(report.directory, staging, symlinks=True)
    marked: list[Block] = []
    by_file: dict[Path, list[Block]] = {}
    for block in report.blocks:
        if block.markable:
            by_file.setdefault(block.path, []).append(block)
    for relative, blocks in by_file.items():
        path = staging / relative
        data = path.read_bytes()
        # From the end, so earlier offsets stay valid.
        for block in sorted(blocks, key=lambda b: b._start_byte, reverse=True):
            line_start = data.rfind(b"\n", 0, block._start_byte) + 1
            line_end = data.find(b"\n", block._end_byte)
            after = len(data) if line_end < 0 else line_end + 1
            indent = data[line_start : block._start_byte].decode(errors="replace")
            begin, end = _markers(block, indent)
            tail = end.encode() if line_end >= 0 else b"\n" + end.encode()
            data = data[:line_start] + begin.encode() + data[line_start:after] + tail + data[after:]
            marked.append(block)
        path.write_bytes(data)
    if out.exists():
        out.rmdir()
    staging.rename(out)
    return sorted(marked, key=lambda b: (str(b.path), b.start_line))
