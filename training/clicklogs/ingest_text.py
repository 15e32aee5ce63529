"""CSV, TSV and JSONL decoded and split in Python, one physical line at a time, so that every
line of the file is accounted for and every row that cannot be decoded or split is named by its
line number (the DuckDB engine's reader).

The invariant: lines in the file = header lines + rows read + blank lines, and every row read is
used or skipped under one reason. A quoted field never runs across lines: a line whose quote is
not closed on it is a malformed row, and the next line is read as a row again, so one stray
quote cannot swallow the rows after it. A line longer than :data:`qcat.text.lines.MAX_LINE_BYTES`
is a row that is too long, not parsed at all. Lines, cells and the header come from the input layer
(:mod:`qcat.inputs`: its line rules, :func:`~qcat.inputs.split_cells` and the one header rule);
what a click-log row means is checked after, in SQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from qcat.errors import InputError, shown
from qcat.inputs import raw_lines, split_cells
from qcat.text.lines import MAX_LINE_BYTES
from qcat.training.clicklogs.ingest_engine import COLUMNS, REQUIRED, check_header


@dataclass
class _RawRows:
    """Rows as read: string columns (None where absent) plus data row numbers; rows that
    could not be decoded or split keep their reason in ``bad``. ``lines`` counts the file's
    physical lines, ``header_lines`` and ``blank_lines`` those that are not rows."""

    names: tuple[str, ...] = COLUMNS  # the columns kept (a click log's, or a catalog's)
    row: list[int] = field(default_factory=list)
    columns: dict[str, list] = field(default_factory=dict)
    bad: list[str | None] = field(default_factory=list)
    bad_value: list[str | None] = field(default_factory=list)
    lines: int = 0
    header_lines: int = 0
    blank_lines: int = 0
    present: frozenset[str] = frozenset()  # the columns the file has (JSONL: names some record gives a value)

    def __post_init__(self) -> None:
        self.columns = self.columns or {c: [] for c in self.names}

    def add(self, row: int, record: dict) -> None:
        self.row.append(row)
        for column in self.names:
            value = record.get(column)
            self.columns[column].append(None if value is None else str(value))
        self.bad.append(None)
        self.bad_value.append(None)

    def add_bad(self, row: int, reason: str, text: str) -> None:
        self.add(row, {})
        self.bad[-1], self.bad_value[-1] = reason, text[:200]

    def check_lines(self) -> None:
        """Every physical line is the header, a row (used or skipped) or blank; anything else is
        a bug in this reader, never a row lost without a word."""
        if self.lines != self.header_lines + len(self.row) + self.blank_lines:
            raise AssertionError(f"{self.lines} lines read but {self.header_lines} header + {len(self.row)} rows + "
                                 f"{self.blank_lines} blank accounted for")

    def arrays(self) -> dict[str, np.ndarray]:
        arrays = {"row": np.asarray(self.row, dtype=np.int64)}
        arrays.update({c: np.asarray(v, dtype=object) for c, v in self.columns.items()})
        arrays.update(bad=np.asarray(self.bad, dtype=object), bad_value=np.asarray(self.bad_value, dtype=object))
        return arrays


def _decoded_lines(raw: bytes, rows: _RawRows, first_data_line: int):
    """Yield (line_number, text) for each physical line that the input layer can read (UTF-8, not
    too long, byte order mark dropped: :func:`qcat.inputs.raw_lines`); record the others as bad rows."""
    for number, text, why, line in raw_lines(raw):
        rows.lines += 1
        if text is None:
            too_long = len(line) > MAX_LINE_BYTES
            if number < first_data_line:
                raise InputError(f"line {number} (the header) is {why.removeprefix('line ')}{'' if too_long else '; save the file as UTF-8'}")
            if too_long:
                rows.add_bad(number, "too_long", f"{len(line):,} bytes, limit {MAX_LINE_BYTES:,}: "
                             + line[:60].decode("utf-8", "replace"))
            else:
                rows.add_bad(number, "bad_encoding", line.decode("utf-8", "replace"))
            continue
        yield number, text


def read_delimited(raw: bytes, delimiter: str, columns: tuple[str, ...] = COLUMNS,
                   required: tuple[str, ...] = REQUIRED) -> _RawRows:
    rows = _RawRows(columns)
    header = None
    for number, text in _decoded_lines(raw, rows, first_data_line=2):
        if header is None:
            rows.header_lines = 1
            fields = split_cells(text, delimiter, literal_quotes=False)
            if fields is None:
                cr = ("; its lines end in a carriage return alone (CR): save it with LF or CRLF line ends"
                      if "\r" in text else "")
                raise InputError(f"line 1 (the header) is not well-formed {'TSV' if delimiter == chr(9) else 'CSV'}: "
                                 f"{shown(text)}{cr}")
            written = [h.strip() for h in fields]
            check_header(written, required)
            header = [h.lower() for h in written]
            rows.present = frozenset(header)
            continue
        if not text.strip():
            rows.blank_lines += 1
            continue
        record = split_cells(text, delimiter, literal_quotes=False)
        if record is None or len(record) != len(header):
            rows.add_bad(number, "malformed_row", text)
            continue
        rows.add(number, dict(zip(header, record)))
    rows.check_lines()
    return rows


class _Pairs(list):
    """A JSON object as its (name, value) pairs in file order, names repeated as written."""


def _json_object(text: str) -> dict | None:
    """A JSONL line's record with its names in lower case; None when the line is not a JSON object
    or names a field twice (``"query"`` twice, or ``"query"`` and ``"Query"``: which counts would
    be a guess). Raises JSONDecodeError or RecursionError for a line that is not JSON."""
    value = json.loads(text, object_pairs_hook=_Pairs)
    if not isinstance(value, _Pairs):
        return None
    names = [name.lower() for name, _ in value]
    if len(set(names)) != len(names):
        return None
    return {name: item for name, (_, item) in zip(names, value)}


def read_jsonl(raw: bytes, columns: tuple[str, ...] = COLUMNS, required: tuple[str, ...] = REQUIRED) -> _RawRows:
    rows = _RawRows(columns)
    seen_columns: set[str] = set()
    for number, text in _decoded_lines(raw, rows, first_data_line=1):
        if not text.strip():
            rows.blank_lines += 1
            continue
        try:
            record = _json_object(text)
        except (json.JSONDecodeError, RecursionError):
            record = None
        if record is None:
            rows.add_bad(number, "malformed_row", text)
            continue
        seen_columns.update(name for name, value in record.items() if value is not None)
        if record.get("query") is not None and not isinstance(record["query"], str):
            rows.add_bad(number, "query_not_text", text)  # a list or a number is no query anyone typed
            continue
        rows.add(number, record)
    if any(reason is None for reason in rows.bad):
        check_header(sorted(seen_columns), required)
    rows.present = frozenset(seen_columns)
    rows.check_lines()
    return rows
