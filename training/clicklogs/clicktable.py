"""The aggregated click table every trainer reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClickTable:
    """Aggregated (normalized query, category) pairs.

    ``queries[q]`` is a normalized query and ``categories[c]`` a taxonomy id; pair ``i``
    links ``queries[pair_query[i]]`` with ``categories[pair_category[i]]``. Pairs are sorted
    by query, then by clicks (descending), then category. ``impressions`` is NaN where the
    log had none. ``query_impressions[q]`` is the query's demand: its largest pair
    impressions, or its total clicks where the log has no impressions.
    """

    queries: np.ndarray  # object array of str, unique
    categories: np.ndarray  # object array of taxonomy ids, unique
    pair_query: np.ndarray  # int32
    pair_category: np.ndarray  # int32
    clicks: np.ndarray  # float64
    impressions: np.ndarray  # float64, NaN where unknown
    query_impressions: np.ndarray  # float64, one per query

    @property
    def ctr(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.impressions > 0, self.clicks / self.impressions, np.nan)

    def __len__(self) -> int:
        return len(self.pair_query)

    def query_tokens_count(self) -> np.ndarray:
        """Number of tokens of each query."""
        return np.fromiter((q.count(" ") + 1 for q in self.queries), dtype=np.int32, count=len(self.queries))

    def categories_per_query(self) -> np.ndarray:
        return np.bincount(self.pair_query, minlength=len(self.queries))


TABLE_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".csv.gz": "csv", ".tsv": "tsv", ".tsv.gz": "tsv"}


def table_output(path):
    """``path`` as a Path, checked before any work is done: a known suffix, an existing parent
    directory, not a directory itself."""
    from pathlib import Path

    from qcat.errors import InputError

    path = Path(path)
    if _table_suffix(path) is None:
        raise InputError(f"--out {path}: cannot tell the table format from the name; use one of "
                         f"{', '.join(TABLE_SUFFIXES)}")
    if path.is_dir():
        raise InputError(f"--out {path} is a directory; give a file name such as {path / 'table.parquet'}")
    if not path.parent.is_dir():
        raise InputError(f"--out {path}: directory {path.parent} does not exist")
    return path


def _table_suffix(path) -> str | None:
    name = path.name.lower()
    return next((suffix for suffix in sorted(TABLE_SUFFIXES, key=len, reverse=True) if name.endswith(suffix)), None)


def write_table(table: ClickTable, path) -> None:
    """Write the table, one row per pair, in the format its suffix names (Parquet with zstd,
    CSV or TSV, optionally gzipped). The columns are those of a click log (``query``,
    ``category``, ``clicks``, ``impressions``) plus ``ctr`` and ``query_impressions``, so the
    table can be ingested again; unknown impressions are empty (null), not NaN."""
    import duckdb

    path = table_output(path)
    pairs = {
        "query": table.queries[table.pair_query],
        "category": table.categories[table.pair_category],
        "clicks": table.clicks,
        "impressions": table.impressions,
        "ctr": table.ctr,
        "query_impressions": table.query_impressions[table.pair_query],
    }
    relation = duckdb.connect().sql(
        "select query, category, clicks, nullif(impressions, 'NaN'::double) as impressions, "
        "nullif(ctr, 'NaN'::double) as ctr, query_impressions from pairs")
    suffix = _table_suffix(path)
    try:
        if TABLE_SUFFIXES[suffix] == "parquet":
            relation.write_parquet(str(path), compression="zstd")
        else:
            relation.write_csv(str(path), sep="\t" if TABLE_SUFFIXES[suffix] == "tsv" else ",",
                               compression="gzip" if suffix.endswith(".gz") else "none")
    except duckdb.IOException as exc:  # a full disk, a permission: an OSError for the caller to name
        raise OSError(str(exc).splitlines()[0]) from None
