"""`#pragma harmonia` markers turned into libharmonia phase calls (Harmonia paper, section IV-A,
user-defined phase detection).

    #pragma harmonia io_begin(checkpoint, 1 << 30)  ->  harmonia_io_begin("checkpoint", 1 << 30);
    #pragma harmonia io_end                          ->  harmonia_io_end();

The name is an identifier or a string literal; the expected size is optional (any C expression).
`#line` directives keep the compiler's messages pointing at the original lines.
"""

import re
from dataclasses import dataclass

PRAGMA = re.compile(r"^(?P<indent>\s*)#\s*pragma\s+harmonia\s+(?P<rest>.*?)\s*$")
BEGIN = re.compile(
    r"^io_begin\s*\(\s*(?P<name>\"(?:[^\"\\]|\\.)*\"|[A-Za-z_][\w.-]*)\s*(?:,\s*(?P<size>.+?))?\s*\)$"
)
END = re.compile(r"^io_end(?:\s*\(\s*\))?$")
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".C")


class AnnotateError(Exception):
    """A `#pragma harmonia` line that is not one of the two markers."""


@dataclass(frozen=True)
class Annotated:
    text: str
    markers: int


def annotate(source: str, filename: str) -> Annotated:
    """The source with every marker replaced by its call; unchanged when it has none."""
    out: list[str] = []
    markers = 0
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        match = PRAGMA.match(line)
        if not match:
            out.append(line)
            continue
        rest, indent = match["rest"], match["indent"]
        if begin := BEGIN.match(rest):
            name = begin["name"] if begin["name"].startswith('"') else f'"{begin["name"]}"'
            out.append(f"{indent}harmonia_io_begin({name}, {begin['size'] or '0'});\n")
        elif END.match(rest):
            out.append(f"{indent}harmonia_io_end();\n")
        else:
            raise AnnotateError(
                f"{filename}:{number}: unknown marker '#pragma harmonia {rest}'"
                " (expected io_begin(NAME[, BYTES]) or io_end)"
            )
        markers += 1
    if markers == 0:
        return Annotated(source, 0)
    header = f'#include <harmonia/bbio.h>\n#line 1 "{filename}"\n'
    return Annotated(header + "".join(out), markers)
