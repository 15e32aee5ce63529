"""Catalog ingestion for training (``qcat train --catalog FILE``): listings read, validated and
resolved to leaf categories with the click log's machinery.

A catalog is CSV, TSV, Parquet or JSONL (optionally gzipped; the format from the name, as for
logs) with the columns ``listing_id``, ``title``, ``category`` or ``category_path`` (a taxonomy
id or a `` > ``-joined path) and optionally ``brand`` and ``popularity``. The file is read by
the log's reader (:class:`qcat.training.clicklogs.ingest_duckdb.DuckDBEngine`: every row that cannot be decoded
or split is named by its line), categories resolve through the log's category map and its
internal-node rule (``other``, ``refuse`` or ``keep``: the same leaves as for logs), and every
row that cannot be used is counted per reason with examples, never dropped silently.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcat.errors import InputError
from qcat.inputs.paths import check_file
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import normalize
from qcat.training.clicklogs.clicklog import (
    INTERNAL_NODE_RULES,
    MAX_EXAMPLES,
    _category_map,
    detect_format,
    format_internal,
    format_skipped,
    refuse_internal,
)

COLUMNS = ("listing_id", "title", "category", "category_path", "brand", "popularity")
REQUIRED = ("listing_id", "title", ("category", "category_path"))

REASONS = {
    "bad_encoding": "not valid UTF-8",
    "too_long": "line is too long",
    "malformed_row": "malformed row (wrong number of fields, a quote not closed on its line, a stray carriage "
                     "return, or invalid JSON)",
    "empty_listing_id": "listing_id is empty",
    "duplicate_listing_id": "listing_id repeats an earlier row's (the first is used)",
    "empty_title": "title is empty after normalization",
    "unknown_category": "category is not in the taxonomy",
    "ambiguous_category": "category path belongs to several taxonomy ids",
    "bad_popularity": "popularity is not a finite number",
}


@dataclass(frozen=True)
class Listings:
    """Usable listings as parallel arrays: normalized title and brand, leaf category id."""

    listing_id: np.ndarray  # object
    title: np.ndarray  # object, normalized (tokens joined by single spaces)
    brand: np.ndarray  # object, normalized ("" when absent)
    category: np.ndarray  # object, taxonomy ids
    popularity: np.ndarray  # float64, NaN when absent

    def __len__(self) -> int:
        return len(self.listing_id)

    def subset(self, keep: np.ndarray) -> "Listings":
        return Listings(**{name: getattr(self, name)[keep] for name in self.__dataclass_fields__})


@dataclass
class CatalogReport:
    """What catalog ingestion read, used and skipped (per reason, with examples)."""

    path: str
    lines: int | None = None  # physical lines of a CSV/TSV/JSONL file (None: Parquet)
    header_lines: int = 0
    blank_lines: int = 0
    rows_read: int = 0
    rows_used: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[tuple[int | None, str]]] = field(default_factory=dict)
    internal_nodes: str = "other"
    internal: dict[str, tuple[int, float, str]] = field(default_factory=dict)

    def skip(self, reason: str, row: int, value: str) -> None:
        self.skipped[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append((row, value[:200]))

    def check_lines(self) -> None:
        """The invariant, as for click logs: lines in the file = header + blank lines + listings used
        + rows skipped (per reason). A violation is a bug in qcat, never a user's error."""
        if self.rows_read != self.rows_used + sum(self.skipped.values()) or (
                self.lines is not None and self.lines != self.header_lines + self.blank_lines + self.rows_read):
            raise AssertionError(f"catalog {self.path}: {self.lines} lines but {self.header_lines} header + "
                                 f"{self.blank_lines} blank + {self.rows_read} rows")

    def format(self) -> str:
        where = ("" if self.lines is None else
                 f"{self.lines:,} lines ({self.header_lines} header, {self.blank_lines:,} blank), ")
        lines = [f"catalog {self.path}: {where}{self.rows_read:,} rows read, {self.rows_used:,} listings used, "
                 f"{sum(self.skipped.values()):,} skipped"]
        return "\n".join(lines + format_skipped(self.skipped, self.examples, REASONS)
                         + format_internal(self.internal, self.internal_nodes))

    def as_dict(self) -> dict:
        """For the manifest: the counts, no examples."""
        return {"rows_read": self.rows_read, "rows_used": self.rows_used, "skipped": dict(self.skipped),
                "internal_rows": sum(r for r, _, _ in self.internal.values())}


def ingest_catalog(path: str | Path, taxonomy: Taxonomy, *, internal_nodes: str = "other",
                   fmt: str | None = None) -> tuple[Listings, CatalogReport, Taxonomy]:
    """Read a catalog and resolve its categories; returns the usable listings, the report and the
    taxonomy their categories belong to (with any Other leaves the ``other`` rule added)."""
    from qcat.training.clicklogs.ingest_duckdb import DuckDBEngine

    if internal_nodes not in INTERNAL_NODE_RULES:
        raise InputError(f"--internal-nodes {internal_nodes!r}: expected one of {', '.join(INTERNAL_NODE_RULES)}")
    path = Path(path)
    if path.is_dir():
        raise InputError(f"--catalog {path}: is a directory; give the catalog file (CSV, TSV, Parquet or JSONL)")
    check_file(path, "--catalog")
    fmt = fmt or detect_format(path, "catalog")
    engine = DuckDBEngine()
    try:
        engine.read(str(path), fmt, COLUMNS, REQUIRED)
        rows = engine.columns("select * from raw order by row")
        categories = engine.distinct("category") + engine.distinct("category_path")
    except InputError as exc:
        raise InputError(f"catalog {path}: {exc}") from None
    finally:
        engine.close()
    report = CatalogReport(path=str(path), internal_nodes=internal_nodes, lines=engine.lines,
                           header_lines=engine.header_lines, blank_lines=engine.blank_lines)
    category_map, taxonomy = _category_map(sorted(set(c for c in categories if c is not None)), taxonomy, internal_nodes)
    resolved = dict(zip(category_map["raw"], zip(category_map["named_id"], category_map["category_id"],
                                                 category_map["ambiguous"], category_map["internal"])))
    kept: dict[str, list] = {name: [] for name in Listings.__dataclass_fields__}
    seen_ids: set[str] = set()
    for i, row in enumerate(rows["row"].tolist()):
        row = int(row)
        report.rows_read += 1
        if rows["bad"][i] is not None:
            report.skip(rows["bad"][i], row, rows["bad_value"][i] or "")
            continue
        listing_id = (rows["listing_id"][i] or "").strip()
        title = normalize(rows["title"][i] or "")
        raw_category = rows["category"][i] if rows["category"][i] not in (None, "") else rows["category_path"][i]
        named, counted_as, ambiguous, internal = resolved.get(raw_category, (None, None, False, False))
        popularity = _popularity(rows["popularity"][i])
        if not listing_id:
            report.skip("empty_listing_id", row, rows["title"][i] or "")
        elif listing_id in seen_ids:
            report.skip("duplicate_listing_id", row, listing_id)
        elif not title:
            report.skip("empty_title", row, rows["title"][i] or "")
        elif ambiguous:
            report.skip("ambiguous_category", row, raw_category or "")
        elif counted_as is None:
            report.skip("unknown_category", row, raw_category or "")
        elif popularity is None:
            report.skip("bad_popularity", row, rows["popularity"][i] or "")
        else:
            seen_ids.add(listing_id)
            if internal:
                count, _, _ = report.internal.get(named, (0, 0.0, counted_as))
                report.internal[named] = (count + 1, 0.0, counted_as)
            for name, value in (("listing_id", listing_id), ("title", title),
                                ("brand", normalize(rows["brand"][i] or "")), ("category", counted_as),
                                ("popularity", popularity)):
                kept[name].append(value)
    report.rows_used = len(kept["listing_id"])
    report.check_lines()
    if report.internal and internal_nodes == "refuse":
        refuse_internal(report.internal, taxonomy)
    if not report.rows_used:
        raise InputError(f"catalog {path}: no usable listing ({report.rows_read:,} rows read)\n{report.format()}")
    listings = Listings(**{name: np.asarray(values, dtype=np.float64 if name == "popularity" else object)
                           for name, values in kept.items()})
    return listings, report, taxonomy


def _popularity(text: str | None) -> float | None:
    """NaN when absent, the number when it is finite (a relative score: any sign), else None (bad)."""
    if text is None or not str(text).strip():
        return math.nan
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
