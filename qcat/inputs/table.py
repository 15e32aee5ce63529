"""The one input layer: a user's table file read by the rules its kind declares
(:class:`qcat.inputs.schema.FileSchema`), the same way for every kind.

:func:`read_table` does, once for every reader: the path checked for what it is, gzip by suffix,
UTF-8 with a byte order mark dropped, one physical line at a time (:mod:`qcat.text.lines`: a quote left
open never swallows the lines after it), comments only where the kind allows them, directives
(``# top_k: 3``) typed and given once, one header naming each declared column once (in any case),
each cell parsed by its column's type and range, the 4,000-byte query limit, every query's
normalized form beside its text as written (and queries written several ways counted), and every
line accounted for (header, comment, blank, row used, row skipped under a reason), with errors of
one shape: ``FLAG FILE:LINE: why``. A reader keeps only what a row means.

:func:`text_lines` is the layer's lower half for the formats that are not tables (JSON Lines, TREC
runs, Google's taxonomy lines): the same path checks, gzip, byte order mark and line rules.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, NamedTuple

from qcat.errors import InputError, shown
from qcat.inputs.paths import file_problem
from qcat.inputs.schema import COMMENTS_ANYWHERE, COMMENTS_BEFORE_HEADER, FileSchema, header_problem, parse_value
from qcat.text.lines import MAX_LINE_BYTES, decoded_lines, query_too_long, split_line
from qcat.text.normalize import normalize

BOM = b"\xef\xbb\xbf"
NOT_WELL_FORMED = ("not well-formed (a field opens a quote that does not close on its line; quote a field with its "
                   "quotes doubled, as \"\"\"Sheriff\"\" toy car\")")
REFUSE, SKIP = "refuse", "skip"


@dataclass(frozen=True)
class Query:
    """A query as written (spaces at its ends stripped) and its normalized form, which matching uses."""

    text: str
    normalized: str


class Skipped(NamedTuple):
    """A row not used: its line, why (for people) and a reason key that groups alike rows:
    ``bad_encoding``, ``too_long``, ``malformed_row``, ``wrong_fields``, ``empty_<column>``,
    ``bad_<column>``, ``query_too_long`` or ``empty_query``."""

    line: int
    why: str
    reason: str


@dataclass(frozen=True)
class Row:
    """One data line: its number, each declared column's typed value (None: not given) and, for a
    kind with a query column, its query."""

    line: int
    values: dict[str, object]
    query: Query | None = None

    def __getitem__(self, name: str) -> object:
        return self.values[name]


@dataclass
class Table:
    """A file read by :func:`read_table`: its rows, directives and every line accounted for."""

    schema: FileSchema
    path: Path
    flag: str
    sha256: str = ""
    header: tuple[str, ...] = ()  # the header's names as read (lower case); () without one
    header_line: int | None = None
    directives: dict[str, object] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # the rows not used, in file order
    lines: int = 0
    blank: list[int] = field(default_factory=list)  # the blank lines' numbers
    comment_lines: int = 0
    forms: dict[str, list[str]] = field(default_factory=dict)  # normalized query -> its forms, first first

    @property
    def blank_lines(self) -> int:
        return len(self.blank)

    def where(self, line: int | None = None) -> str:
        """``FLAG FILE:LINE``: where an error points."""
        return (f"{self.flag} " if self.flag else "") + f"{self.path}" + ("" if line is None else f":{line}")

    @property
    def merged(self) -> dict[str, list[str]]:
        """Queries written several ways (``TV``, ``tv``): normalized form -> the forms, first first."""
        return {query: forms for query, forms in self.forms.items() if len(forms) > 1}

    def check_lines(self) -> None:
        """Every physical line is the header, a comment, a blank line, a row used or a row skipped;
        a violation is a bug in qcat, never a user's error."""
        accounted = (self.header_line is not None) + self.comment_lines + self.blank_lines + len(self.rows) \
            + len(self.skipped)
        if self.lines != accounted:
            raise AssertionError(f"{self.where()}: {self.lines} lines but {accounted} accounted for")


def read_bytes(path: str | Path, flag: str | None) -> tuple[Path, bytes, str]:
    """The checked path, its bytes (gunzipped for a ``.gz`` name, byte order mark dropped) and the
    sha256 of the file as stored. Errors start ``FLAG FILE: ``; with ``flag`` None the caller names
    the file itself."""
    where = "" if flag is None else f"{flag} {path}: ".lstrip()
    problem = file_problem(path)
    if problem is not None:
        raise InputError(f"{where}{problem}")
    path = Path(path)
    try:
        stored = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{where}cannot read it ({exc.strerror or exc.__class__.__name__})") from None
    raw = stored
    if path.suffix.lower() == ".gz":
        try:
            raw = gzip.decompress(stored)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{where}its name ends in .gz but it is not a valid gzip file ({exc})") from None
    return path, raw.removeprefix(BOM), hashlib.sha256(stored).hexdigest()


def text_lines(path: str | Path, flag: str) -> Iterator[tuple[int, str | None, str | None]]:
    """``(line number, text or None, why not)`` per physical line of a file: the layer's line rules
    (:mod:`qcat.text.lines`) after its path, gzip and byte order mark rules."""
    _, raw, _ = read_bytes(path, flag)
    for number, text, why, _ in decoded_lines(raw):
        yield number, text, why


def raw_lines(raw: bytes) -> Iterator[tuple[int, str | None, str | None, bytes]]:
    """``(line number, text or None, why not, the line's bytes)`` per physical line of bytes already
    read (a click log an engine read): the byte order mark dropped, then the layer's line rules."""
    yield from decoded_lines(raw.removeprefix(BOM))


def data_suffix(path: Path) -> str:
    """The suffix that says the format (``.tsv`` of ``gold.tsv.gz``)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def split_cells(text: str, delimiter: str | None, literal_quotes: bool, quoting: bool = True) -> list[str] | None:
    """A line's cells (None: not well-formed). With ``literal_quotes``, a line whose quotes do not
    form quoted fields is split as written (``"Sheriff" toy car`` is a query, not an open quote);
    without ``quoting``, every line is split as written."""
    if delimiter is None:
        return [text]
    if not quoting:
        return text.split(delimiter)
    cells = split_line(text, delimiter)
    if cells is None and literal_quotes:
        return text.split(delimiter)
    return cells


def read_table(path: str | Path, schema: FileSchema, flag: str | None = None, on_bad: str = REFUSE,
               allow_empty: bool = False) -> Table:
    """Read a table file of the kind ``schema`` declares. ``on_bad``: ``refuse`` (the first bad row
    is an :class:`InputError` naming its file and line) or ``skip`` (bad rows counted with their
    line and why in :attr:`Table.skipped`). A bad directive or header is always refused, and so is
    a file with no row (unless ``allow_empty``)."""
    flag = flag or schema.flag
    path, raw, sha256 = read_bytes(path, flag)
    return table_from_bytes(path, raw, sha256, schema, flag, on_bad, allow_empty)


def table_from_bytes(path: Path, raw: bytes, sha256: str, schema: FileSchema, flag: str, on_bad: str = REFUSE,
                     allow_empty: bool = False) -> Table:
    """:func:`read_table` on bytes :func:`read_bytes` gave already (a reader that had to look at
    them first, as a taxonomy's format is told from its first line)."""
    table = Table(schema, path, flag, sha256)
    reader = _Reader(table, schema.delimiter_for(data_suffix(path)), on_bad)
    for number, text, why, line in decoded_lines(raw):
        table.lines += 1
        reader.line(number, text, why, len(line) > MAX_LINE_BYTES)
    if schema.header == "required" and table.header_line is None:
        raise InputError(f"{table.where()}: no header line (want {_wanted(schema)})")
    table.check_lines()
    if not table.rows and not allow_empty:
        said = "" if not table.skipped else f"; {len(table.skipped):,} skipped, e.g. line {table.skipped[0].line}: " \
                                            f"{table.skipped[0].why}"
        raise InputError(f"{table.where()}: holds no row to use (a {schema.kind} file; want {_wanted(schema)}){said}")
    return table


def _wanted(schema: FileSchema) -> str:
    names = [c.name + ("" if c.required else " (optional)") for c in schema.columns]
    return f"the columns {', '.join(names)}"


class _Reader:
    """The state of one file being read: header seen, the column positions, directives given."""

    def __init__(self, table: Table, delimiter: str | None, on_bad: str):
        if on_bad not in (REFUSE, SKIP):
            raise ValueError(f"on_bad must be {REFUSE!r} or {SKIP!r}")
        self.table, self.schema, self.delimiter, self.on_bad = table, table.schema, delimiter, on_bad
        self.position: dict[str, int] | None = None if self.schema.header != "none" else \
            {c.name: i for i, c in enumerate(self.schema.columns)}
        self.width = 0 if self.position is None else len(self.schema.columns)

    def line(self, number: int, text: str | None, why: str | None, too_long: bool) -> None:
        table = self.table
        if text is None:
            if self.position is None:
                raise InputError(f"{table.where(number)}: {why}")
            return self.bad(number, why, "too_long" if too_long else "bad_encoding")
        if not text.strip():
            table.blank.append(number)
            return
        if text.startswith("#") and self.is_comment_place():
            table.comment_lines += 1
            self.directive(number, text)
            return
        cells = split_cells(text, self.delimiter, self.schema.literal_quotes, self.schema.quoting)
        if cells is None:
            if self.position is None:
                raise InputError(f"{table.where(number)}: the header is {NOT_WELL_FORMED}")
            return self.bad(number, NOT_WELL_FORMED, "malformed_row")
        if self.position is None:
            first = cells[0].strip().lower()
            if self.schema.header == "required" or first == self.schema.columns[0].name:
                return self.header(number, cells)
            self.position = {c.name: i for i, c in enumerate(self.schema.columns)}
            self.width = len(self.schema.columns)
        self.row(number, cells)

    def is_comment_place(self) -> bool:
        comments = self.schema.comments
        return comments == COMMENTS_ANYWHERE or (comments == COMMENTS_BEFORE_HEADER and self.table.header_line is None
                                                 and not self.table.rows)

    def directive(self, number: int, text: str) -> None:
        key, colon, value = text[1:].partition(":")
        declared = {d.name: d for d in self.schema.directives}
        name = key.strip().lower()
        if not colon or name not in declared:
            return
        table = self.table
        if name in table.directives:
            raise InputError(f"{table.where(number)}: '# {name}:' is given a second time (first on an earlier line); "
                             "give it once")
        directive = declared[name]
        parsed, problem = parse_value(directive.as_column(), value)
        if problem is None and parsed is None:
            problem = f"'# {name}:' has no value ({directive.meaning})"
        if problem is not None:
            raise InputError(f"{table.where(number)}: {problem}")
        table.directives[name] = parsed

    def header(self, number: int, cells: list[str]) -> None:
        table, schema = self.table, self.schema
        written = [cell.strip() for cell in cells]
        problem = header_problem(written, schema.required)
        names = [name.lower() for name in written]
        if problem is not None:
            raise InputError(f"{table.where(number)}: {problem}; want {_wanted(schema)}")
        table.header, table.header_line = tuple(names), number
        self.position = {c.name: names.index(c.name) for c in schema.columns if c.name in names}
        self.width = len(names)

    def bad(self, number: int, why: str, reason: str) -> None:
        if self.on_bad == REFUSE:
            raise InputError(f"{self.table.where(number)}: {why}")
        self.table.skipped.append(Skipped(number, why, reason))

    def fields_problem(self, count: int) -> str | None:
        """Why a row of ``count`` cells does not fit: under a header, the header's count (a kind
        with short rows may stop after its last declared column); without one, the columns in
        order (a kind with short rows may add people's columns after them)."""
        schema, width = self.schema, self.width
        if self.table.header_line is not None:
            needed = 1 + max(self.position.values()) if schema.short_rows else width
            return None if needed <= count <= width else f"{count} fields where the header names {width}"
        if count == width or (schema.short_rows and count > width):
            return None
        names = ", ".join(c.name for c in schema.columns) + (", ..." if schema.short_rows else "")
        return f"{count} field{'s' * (count != 1)}, want {width} ({names})"

    def row(self, number: int, cells: list[str]) -> None:
        schema = self.schema
        problem = self.fields_problem(len(cells))
        if problem is not None:
            return self.bad(number, problem, "wrong_fields")
        values: dict[str, object] = {}
        query = None
        for column in schema.columns:
            index = self.position.get(column.name)
            value, problem = (None, None) if index is None else parse_value(column, cells[index])
            reason = f"bad_{column.name}"
            if problem is None and value is None and column.required:
                problem, reason = f"an empty {column.name}", f"empty_{column.name}"
            if problem is None and column.kind == "query" and value is not None:
                query, problem, reason = _query(str(value))
            if problem is not None:
                return self.bad(number, problem, reason)
            values[column.name] = value
        if query is not None and schema.match_queries:
            forms = self.table.forms.setdefault(query.normalized, [])
            if query.text not in forms:
                forms.append(query.text)
        self.table.rows.append(Row(number, values, query))


def _query(text: str) -> tuple[Query | None, str | None, str]:
    too_long = query_too_long(text)
    if too_long:
        return None, f"the query is {too_long}", "query_too_long"
    normalized = normalize(text)
    if not normalized:
        return None, f"the query {shown(text)} is empty once normalized (no letter or digit)", "empty_query"
    return Query(text, normalized), None, ""
