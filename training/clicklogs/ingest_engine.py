"""The protocol every click-log ingestion engine implements (DuckDB, Spark).

An engine reads a log into the relations :mod:`qcat.training.clicklogs.ingest_sql` describes and runs that
module's SQL; :func:`qcat.training.clicklogs.clicklog.ingest` holds the rules and drives any engine the same
way, so the engines differ only in how they read files and where the work runs.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

import numpy as np

from qcat.errors import InputError
from qcat.inputs import header_problem

COLUMNS = ("query", "category", "clicks", "impressions", "date")
REQUIRED = ("query", "category")
FORMATS = ("csv", "tsv", "parquet", "jsonl")


class IngestEngine(Protocol):
    """What :func:`qcat.training.clicklogs.clicklog.ingest` relies on."""

    name: str
    row_numbers: bool  # whether ``raw.row`` is the file's line (or Parquet row) number
    lines: int | None  # after ``read``: the file's physical lines, None where not known (Parquet, Spark)
    header_lines: int  # of those, the header's
    blank_lines: int  # and the blank ones (every other line is a row of ``raw``)
    present: frozenset[str]  # after ``read``: the columns the log has (JSONL: those some record gives a value)

    def read(self, path: str, fmt: str) -> None:
        """Make the ``raw`` relation from a click log; InputError if it cannot be read."""
        ...

    def map_queries(self, normalize: Callable[[str], str]) -> None:
        """Make ``query_map`` (raw -> normalized) over the distinct queries of ``raw``."""
        ...

    def distinct(self, column: str) -> list[str]:
        """The distinct non-null values of a ``raw`` column (for the few categories)."""
        ...

    def register(self, name: str, columns: dict[str, np.ndarray]) -> None:
        """Make a small relation from driver-side arrays."""
        ...

    def view(self, name: str, sql: str) -> None:
        """Name a query, computed where it is used."""
        ...

    def materialize(self, name: str, sql: str) -> None:
        """Name a query whose (small) result is computed once and kept."""
        ...

    def rows(self, sql: str) -> list[tuple]:
        ...

    def columns(self, sql: str) -> dict[str, np.ndarray]:
        """A result as arrays: text as object arrays, numbers as float64 with NaN for null."""
        ...

    def close(self) -> None:
        ...


def check_header(header: Sequence[str], required: Sequence[str] = REQUIRED) -> None:
    """Refuse a header by the input layer's one header rule (:func:`qcat.inputs.header_problem`): a
    column named twice, or a ``required`` one missing. ``header``: the names as the file writes them
    (an error quotes them so); they compare in lower case, as the readers read them."""
    problem = header_problem(list(header), required)
    if problem is not None:
        raise InputError(problem)
