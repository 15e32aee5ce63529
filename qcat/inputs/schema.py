"""What a file kind declares to the input layer: its columns (required or optional, each with a
type, a range and a meaning), its header directives (``# top_k: 3``), where comments may stand and
which delimiter its suffixes mean. :func:`parse_value` turns one cell into its typed value by
those rules, the same way for every file kind.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Sequence

from qcat.errors import shown

# The judging store keeps integers in SQLite's and PostgreSQL's signed 64-bit range.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

KINDS = ("text", "query", "int", "number", "choice")
_INTEGER = re.compile(r"[+-]?[0-9]+")

# Where a whole line starting with "#" is a comment:
COMMENTS_NONE = "none"  # nowhere: "#1 dad mug" is data
COMMENTS_BEFORE_HEADER = "before-header"  # only above the header line (directives live there)
COMMENTS_ANYWHERE = "anywhere"  # any line (a map a team edits by commenting lines out)


@dataclass(frozen=True)
class Column:
    """One column a file kind reads. ``kind``: ``text`` (stripped), ``query`` (stripped, at most
    4,000 bytes, matched on its normalized form), ``int`` (a whole number in ``low``..``high``),
    ``number`` (finite, in ``low``..``high``; no NaN or infinity) or ``choice`` (one of
    ``choices``, compared in lower case). An empty cell is an error in a required column and
    "not given" (None) in an optional one."""

    name: str
    kind: str = "text"
    required: bool = False
    meaning: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        if self.kind == "int":
            object.__setattr__(self, "low", INT64_MIN if self.low is None else self.low)
            object.__setattr__(self, "high", INT64_MAX if self.high is None else self.high)

    def describe(self) -> str:
        """The column as checks.md lists it: name, type and range, and what it means."""
        kind = {"int": "whole number", "number": "number", "choice": "one of " + ", ".join(self.choices),
                "query": "query", "text": "text"}[self.kind]
        bounds = _range(self) if self.kind in ("int", "number") else ""
        return f"`{self.name}` ({'required' if self.required else 'optional'}; {kind}{bounds})" + \
            (f": {self.meaning}" if self.meaning else "")


def _bound(value: float | None, default: str) -> str:
    if value is None or value in (INT64_MIN, INT64_MAX):
        return default
    return f"{value:g}"


@dataclass(frozen=True)
class Directive:
    """A ``# name: value`` line above the header, typed like a column (given once, or refused)."""

    name: str
    kind: str = "text"
    meaning: str = ""
    low: float | None = None
    high: float | None = None

    def as_column(self) -> Column:
        """The directive as a column named as written (``'# top_k:'``), so its errors read as the line does."""
        return Column(f"'# {self.name}:'", self.kind, True, self.meaning, self.low, self.high)


@dataclass(frozen=True)
class FileSchema:
    """A file kind: how the input layer reads it (:func:`qcat.inputs.table.read_table`).

    ``delimiters`` maps a suffix (``.tsv``) to its delimiter; a suffix it lacks gets ``delimiter``
    (None: one whole line is the one column, as a query per line). ``header``: ``required``
    (the first line that is not blank or a comment names the columns), ``optional`` (a header only
    when that line's first cell is the first column's name) or ``none`` (the columns in order).
    Columns are named case-insensitively and each once; columns the schema does not declare are
    for people and ignored."""

    kind: str  # what people call the file: "graded gold file"
    flag: str  # the flag that names it, for errors: "--gold"
    columns: tuple[Column, ...]
    delimiter: str | None = "\t"
    delimiters: dict[str, str | None] = field(default_factory=dict)
    header: str = "required"
    comments: str = COMMENTS_BEFORE_HEADER
    directives: tuple[Directive, ...] = ()
    literal_quotes: bool = False  # TSV: a field that is not a well-formed quoted field is read as written
    short_rows: bool = False  # a row may stop before the header's undeclared (people's) columns
    quoting: bool = True  # False: quotes are text, a line is split on its delimiter as written
    # A row whose query normalizes like an earlier one's is one query (counted as a merge).
    match_queries: bool = True

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.required)

    def delimiter_for(self, suffix: str) -> str | None:
        return self.delimiters.get(suffix.lower(), self.delimiter)


def describe_schema(schema: FileSchema) -> str:
    """A file kind's rules as one Markdown line of docs/guide/checks.md (tests/test_inputs.py keeps
    the page and the schemas in step)."""
    delimiters = {None: "a line is one value", "\t": "tab-separated", ",": "comma-separated"}
    layout = delimiters[schema.delimiter] + "".join(f", {delimiters[d]} for `{suffix}`"
                                                   for suffix, d in schema.delimiters.items() if d != schema.delimiter)
    header = {"required": "a header", "optional": f"a header if its first name is `{schema.columns[0].name}`",
              "none": "no header"}[schema.header]
    comments = {COMMENTS_NONE: "no comments (a `#`-led line is data)",
                COMMENTS_BEFORE_HEADER: "`#` lines above the header are comments",
                COMMENTS_ANYWHERE: "`#` lines are comments anywhere"}[schema.comments]
    extras = [f"directive `# {d.name}:` ({d.kind}{_range(d.as_column()) if d.kind != 'text' else ''}, once)"
              for d in schema.directives]
    if schema.literal_quotes or not schema.quoting:
        extras.append("a quote that does not form a quoted field is text" if schema.quoting else "quotes are text")
    if schema.short_rows:
        extras.append("further columns are for people")
    columns = "; ".join(c.describe() for c in schema.columns)
    return f"- **{schema.kind}** (`{schema.flag}`): {layout}; {header}; {comments}" + \
        "".join(f"; {e}" for e in extras) + f". Columns: {columns}."


def header_problem(names: Sequence[str], required: Sequence[str | tuple[str, ...]]) -> str | None:
    """Why a header cannot be read, or None: the one header rule of every file kind. ``names`` are
    the header's names as the file writes them; they compare in lower case. A name given twice
    (``grade`` and ``Grade``) is refused, quoting each copy as written (which copy counts would be a
    guess; unnamed columns from trailing delimiters may repeat), and every ``required`` name must be
    there (a tuple inside ``required`` is met by any one of its names: a catalog's ``category`` or
    ``category_path``)."""
    lowered = [name.lower() for name in names]
    repeated = sorted({name for name in lowered if name and lowered.count(name) > 1})
    if repeated:
        copies = "; ".join(" and ".join(shown(written) for written in names if written.lower() == name)
                           for name in repeated)
        return (f"the header names the column{'s' * (len(repeated) > 1)} {', '.join(shown(name) for name in repeated)} "
                f"twice (as {copies}; found: {shown(', '.join(names))}): which one counts would be a guess; remove or "
                "rename the copy")
    missing = [c if isinstance(c, str) else " or ".join(c) for c in required
               if not (c in lowered if isinstance(c, str) else any(name in lowered for name in c))]
    if missing:
        return (f"missing column(s) {', '.join(missing)} in the header "
                f"(found: {shown(', '.join(names)) if names else 'none'})")
    return None


def parse_value(column: Column, text: str) -> tuple[object, str | None]:
    """``(value, None)`` for a cell, or ``(None, why)``: the one place a cell becomes a value.
    An empty cell is ``(None, None)``: the caller decides whether that may be."""
    cell = text.strip()
    if cell == "":
        return None, None
    if column.kind in ("text", "query"):
        return cell, None
    if column.kind == "choice":
        lowered = cell.lower()
        if lowered not in column.choices:
            return None, f"{column.name} {shown(cell)} is not one of {', '.join(column.choices)}"
        return lowered, None
    wanted = f"{'a whole number' if column.kind == 'int' else 'a finite number'}{_range(column)}" \
        + (f" ({column.meaning})" if column.meaning else "")
    if column.kind == "int":
        if not _INTEGER.fullmatch(cell):
            return None, f"{column.name} {shown(cell)} is not {wanted}"
        value = int(cell)
    else:
        try:
            value = float(cell)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            return None, f"{column.name} {shown(cell)} is not {wanted}"
    if (column.low is not None and value < column.low) or (column.high is not None and value > column.high):
        return None, f"{column.name} {shown(cell)} is not {wanted}"
    return value, None


def _range(column: Column) -> str:
    if column.low in (None, INT64_MIN) and column.high in (None, INT64_MAX):
        return ""
    if column.high in (None, INT64_MAX):
        return f" of at least {_bound(column.low, '')}"
    if column.low in (None, INT64_MIN):
        return f" of at most {_bound(column.high, '')}"
    return f" in {_bound(column.low, '')}..{_bound(column.high, '')}"
