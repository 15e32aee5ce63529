"""The DuckDB ingestion engine: one process, row numbers exact.

Parquet is read by DuckDB itself, as a view (never copied). CSV, TSV and JSONL are decoded
and split in Python (:mod:`qcat.training.clicklogs.ingest_text`), so every unusable row is named by its line.
DuckDB runs with a memory limit and a spill directory, so a large log spills to disk
instead of exhausting memory.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np

from qcat.errors import InputError
from qcat.inputs import read_bytes
from qcat.inputs.paths import check_file
from qcat.text.lines import MAX_QUERY_BYTES, query_bytes
from qcat.training.clicklogs.ingest_engine import COLUMNS, REQUIRED, check_header
from qcat.training.clicklogs.ingest_sql import DUCKDB_MACROS
from qcat.training.clicklogs.ingest_text import read_delimited, read_jsonl

MEMORY_LIMIT_ENV = "QCAT_DUCKDB_MEMORY_LIMIT"
DEFAULT_MEMORY_LIMIT = "4GB"
MIN_MEMORY_LIMIT = 64 * 1000**2  # bytes: below this DuckDB cannot aggregate even a small log
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:(b|bytes?)|([kmgt])(i?)b?)\s*", re.IGNORECASE)


def memory_limit(value: str | None = None) -> str:
    """DuckDB's memory limit: ``value``, else ``$QCAT_DUCKDB_MEMORY_LIMIT``, else 4GB; a size
    such as 4GB, 512MB or 2GiB (KB/MB/GB/TB: powers of 1000, KiB/MiB/GiB/TiB: of 1024) of at
    least 64MB. Anything else is refused, naming the variable and the value."""
    source = f"${MEMORY_LIMIT_ENV}"
    if value is None:
        value = os.environ.get(MEMORY_LIMIT_ENV) or DEFAULT_MEMORY_LIMIT
    else:
        source = "the memory limit"
    match = _SIZE.fullmatch(value)
    if match is None:
        raise InputError(f"{source}={value!r} is not a size: give a number and a unit, e.g. 4GB, 512MB or 2GiB")
    number, plain, unit, binary = match.groups()
    power = 0 if plain else "kmgt".index(unit.lower()) + 1
    size = float(number) * (1024 if binary else 1000) ** power
    if size < MIN_MEMORY_LIMIT:
        raise InputError(f"{source}={value!r} is too small for DuckDB to aggregate a click log: give at least 64MB")
    return f"{int(size)}B" if plain else f"{number}{unit.upper()}{'i' if binary else ''}B"


class DuckDBEngine:
    name = "duckdb"
    row_numbers = True
    lines: int | None = None  # the file's physical lines, header and blank ones (None: Parquet)
    header_lines = 0
    blank_lines = 0
    present: frozenset[str] = frozenset()

    def __init__(self, memory_limit_: str | None = None):
        limit = memory_limit(memory_limit_)  # checked before anything is created
        self._spill = tempfile.TemporaryDirectory(prefix="qcat-duckdb-")
        self.con = duckdb.connect()
        self.con.execute(f"set memory_limit = '{_setting(limit)}'")
        self.con.execute(f"set temp_directory = '{_setting(self._spill.name)}'")
        self.con.execute("set preserve_insertion_order = false")
        self.con.execute(DUCKDB_MACROS)

    def read(self, path: str, fmt: str, columns: tuple[str, ...] = COLUMNS, required: tuple = REQUIRED) -> None:
        """``raw`` from a file of ``columns`` (default a click log's; a catalog's in
        :mod:`qcat.training.catalog.ingest`), refusing one without the ``required`` ones."""
        path = Path(path)
        if fmt == "parquet":
            check_file(path)
            self._view_parquet(path, columns, required)
            return
        _, raw, _ = read_bytes(path, None)  # the input layer's path, gzip and byte order mark rules
        rows = (read_jsonl(raw, columns, required) if fmt == "jsonl"
                else read_delimited(raw, "\t" if fmt == "tsv" else ",", columns, required))
        self.lines, self.header_lines, self.blank_lines = rows.lines, rows.header_lines, rows.blank_lines
        self.present = rows.present
        self.register("raw", rows.arrays())

    def _view_parquet(self, path: Path, columns: tuple[str, ...], required: tuple) -> None:
        """``raw`` as a view over the file: one scan per query, no copy of the log."""
        import pyarrow.parquet

        try:
            self.con.execute("describe select * from read_parquet(?)", [str(path)]).fetchall()
        except duckdb.Error as exc:
            raise InputError(f"cannot read Parquet: {str(exc).splitlines()[0]}") from None
        # The file's own names: DuckDB renames a second `category` or `Category` to `category_1`.
        written = pyarrow.parquet.read_schema(str(path)).names
        check_header(written, required)
        names = [name.lower() for name in written]
        self.present = frozenset(names)
        select = ", ".join(
            f'cast("{c}" as varchar) as "{c}"' if c in names else f'cast(null as varchar) as "{c}"' for c in columns
        )
        self.con.execute(
            f"create view raw as select cast(file_row_number + 1 as bigint) as row, {select}, "
            f"cast(null as varchar) as bad, cast(null as varchar) as bad_value "
            f"from read_parquet('{_setting(str(path))}', file_row_number = true)"
        )

    def map_queries(self, normalize: Callable[[str], str]) -> None:
        raw = [r[0] for r in self.con.execute("select distinct query from raw where query is not null").fetchall()]
        size = [query_bytes(q) for q in raw]
        self.register("query_map", {"raw": np.asarray(raw, dtype=object),
                                    "normalized": np.asarray([normalize(q) if n <= MAX_QUERY_BYTES else ""
                                                              for q, n in zip(raw, size)], dtype=object),
                                    "bytes": np.asarray(size, dtype=np.int64)})

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
