"""The DuckDB ingestion engine: one process, row numbers exact.

Parquet is read by DuckDB itself, as a view (never copied). CSV, TSV and JSONL are decoded
and split in Python, line by line, so that every unusable row is named by its line number.
DuckDB runs with a memory limit and a spill directory, so a large log spills to disk
instead of exhausting memory.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np

from qcat.errors import InputError
from training.ingest_engine import COLUMNS, check_header
from training.ingest_sql import DUCKDB_MACROS

DEFAULT_MEMORY_LIMIT = os.environ.get("QCAT_DUCKDB_MEMORY_LIMIT", "4GB")


class DuckDBEngine:
    name = "duckdb"
    row_numbers = True

    def __init__(self, memory_limit: str = DEFAULT_MEMORY_LIMIT):
        self._spill = tempfile.TemporaryDirectory(prefix="qcat-duckdb-")
        self.con = duckdb.connect()
        self.con.execute(f"set memory_limit = '{_setting(memory_limit)}'")
        self.con.execute(f"set temp_directory = '{_setting(self._spill.name)}'")
        self.con.execute("set preserve_insertion_order = false")
        self.con.execute(DUCKDB_MACROS)

    def read(self, path: str, fmt: str) -> None:
        path = Path(path)
        if fmt == "parquet":
            if not path.is_file():
                raise InputError(f"{path}: no such file")
            self._view_parquet(path)
            return
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from None
        if path.suffix == ".gz":
            import gzip
            import zlib

            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(f"{path}: its name ends in .gz but it is not a valid gzip file ({exc})") from None
        rows = _read_jsonl(raw) if fmt == "jsonl" else _read_delimited(raw, "\t" if fmt == "tsv" else ",")
        self.register("raw", rows.arrays())

    def _view_parquet(self, path: Path) -> None:
        """``raw`` as a view over the file: one scan per query, no copy of the log."""
        try:
            names = [r[0].lower() for r in self.con.execute("describe select * from read_parquet(?)", [str(path)]).fetchall()]
        except duckdb.Error as exc:
            raise InputError(f"cannot read Parquet: {str(exc).splitlines()[0]}") from None
        check_header(names)
        select = ", ".join(
            f'cast("{c}" as varchar) as "{c}"' if c in names else f'cast(null as varchar) as "{c}"' for c in COLUMNS
        )
        self.con.execute(
            f"create view raw as select cast(file_row_number + 1 as bigint) as row, {select}, "
            f"cast(null as varchar) as bad, cast(null as varchar) as bad_value "
            f"from read_parquet('{_setting(str(path))}', file_row_number = true)"
        )

    def map_queries(self, normalize: Callable[[str], str]) -> None:
        raw = [r[0] for r in self.con.execute("select distinct query from raw where query is not null").fetchall()]
        self.register("query_map", {"raw": np.asarray(raw, dtype=object),
                                    "normalized": np.asarray([normalize(q) for q in raw], dtype=object)})

    def distinct(self, column: str) -> list[str]:
        return [r[0] for r in self.con.execute(f'select distinct "{column}" from raw where "{column}" is not null').fetchall()]

    def register(self, name: str, columns: dict[str, np.ndarray]) -> None:
        self.con.register(f"_{name}_arrays", columns)
        self.con.execute(f"create temp table {name} as select * from _{name}_arrays")
        self.con.unregister(f"_{name}_arrays")

    def view(self, name: str, sql: str) -> None:
        self.con.execute(f"create temp view {name} as {sql}")

    def materialize(self, name: str, sql: str) -> None:
        self.con.execute(f"create temp table {name} as {sql}")

    def rows(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def columns(self, sql: str) -> dict[str, np.ndarray]:
        result = self.con.execute(sql).fetchnumpy()
        return {name: (np.ma.filled(np.ma.asarray(values).astype(np.float64), np.nan)
                       if np.asarray(values).dtype.kind in "fiu" else np.asarray(values, dtype=object))
                for name, values in result.items()}

    def close(self) -> None:
        self.con.close()
        self._spill.cleanup()


def _setting(text: str) -> str:
    if "'" in text:
        raise InputError(f"{text!r}: a quote is not allowed here")
    return text


# -- CSV, TSV and JSONL, decoded in Python with line numbers -------------------------------


@dataclass
class _RawRows:
    """Rows as read: string columns (None where absent) plus data row numbers; rows that
    could not be decoded or split keep their reason in ``bad``."""

    row: list[int] = field(default_factory=list)
    columns: dict[str, list] = field(default_factory=lambda: {c: [] for c in COLUMNS})
    bad: list[str | None] = field(default_factory=list)
    bad_value: list[str | None] = field(default_factory=list)

    def add(self, row: int, record: dict) -> None:
        self.row.append(row)
        for column in COLUMNS:
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


def _read_delimited(raw: bytes, delimiter: str) -> _RawRows:
    rows = _RawRows()
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
    check_header(header)
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


def _read_jsonl(raw: bytes) -> _RawRows:
    rows = _RawRows()
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
        check_header([c.lower() for c in seen_columns])
    return rows
