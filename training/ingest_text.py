"""CSV, TSV and JSONL decoded and split in Python, line by line, so that every row that cannot
be decoded or split is named by its line number (the DuckDB engine's reader)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field

import numpy as np

from qcat.errors import InputError
from training.ingest_engine import COLUMNS, REQUIRED, check_header


@dataclass
class _RawRows:
    """Rows as read: string columns (None where absent) plus data row numbers; rows that
    could not be decoded or split keep their reason in ``bad``."""

    names: tuple[str, ...] = COLUMNS  # the columns kept (a click log's, or a catalog's)
    row: list[int] = field(default_factory=list)
    columns: dict[str, list] = field(default_factory=dict)
    bad: list[str | None] = field(default_factory=list)
    bad_value: list[str | None] = field(default_factory=list)

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
        self.bad[-1], self.bad_value[-1] = reason, text[:80]

    def arrays(self) -> dict[str, np.ndarray]:
        arrays = {"row": np.asarray(self.row, dtype=np.int64)}
        arrays.update({c: np.asarray(v, dtype=object) for c, v in self.columns.items()})
        arrays.update(bad=np.asarray(self.bad, dtype=object), bad_value=np.asarray(self.bad_value, dtype=object))
        return arrays


def _decoded_lines(raw: bytes, rows: _RawRows, first_data_line: int):
    """Yield (line_number, text) for each line that decodes as UTF-8; record the others."""
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            if number >= first_data_line:
                rows.add_bad(number, "bad_encoding", line.decode("utf-8", "replace"))
                continue
            raise InputError(f"line {number} (the header) is not valid UTF-8") from None
        yield number, text.removesuffix("\r")


def read_delimited(raw: bytes, delimiter: str, columns: tuple[str, ...] = COLUMNS,
                   required: tuple[str, ...] = REQUIRED) -> _RawRows:
    rows = _RawRows(columns)
    lines = _decoded_lines(raw.removeprefix(b"\xef\xbb\xbf"), rows, first_data_line=2)
    numbered, texts = [], []

    def text_lines():
        for number, text in lines:
            numbered.append(number)
            texts.append(text)
            yield text + "\n"  # with its end, so a quoted field may hold a newline

    reader = csv.reader(text_lines(), delimiter=delimiter)
    header = next(reader, None)
    if header is None:
        return rows
    header = [h.strip().lower() for h in header]
    check_header(header, required)
    while True:
        first_line = reader.line_num  # lines read before this record: it starts on the next
        try:
            record = next(reader, None)
        except csv.Error:  # e.g. a bare carriage return inside an unquoted field
            rows.add_bad(numbered[first_line], "malformed_row", texts[first_line])
            continue
        if record is None:
            break
        number = numbered[first_line]
        if not record or (len(record) == 1 and not record[0].strip()):
            continue
        if len(record) != len(header):
            rows.add_bad(number, "malformed_row", delimiter.join(record))
            continue
        rows.add(number, dict(zip(header, record)))
    return rows


def read_jsonl(raw: bytes, columns: tuple[str, ...] = COLUMNS, required: tuple[str, ...] = REQUIRED) -> _RawRows:
    rows = _RawRows(columns)
    seen_columns: set[str] = set()
    for number, text in _decoded_lines(raw, rows, first_data_line=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            rows.add_bad(number, "malformed_row", text)
            continue
        if not isinstance(record, dict):
            rows.add_bad(number, "malformed_row", text)
            continue
        seen_columns.update(record)
        rows.add(number, {k.lower(): v for k, v in record.items()})
    if any(reason is None for reason in rows.bad):
        check_header([c.lower() for c in seen_columns], required)
    return rows
