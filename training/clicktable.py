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


def write_table(table: ClickTable, path) -> None:
    """Write the table as Parquet (zstd) or CSV, one row per pair."""
    import duckdb
    from pathlib import Path

    path = Path(path)
    pairs = {
        "query": table.queries[table.pair_query],
        "category_id": table.categories[table.pair_category],
        "clicks": table.clicks,
        "impressions": table.impressions,
        "ctr": table.ctr,
        "query_impressions": table.query_impressions[table.pair_query],
    }
    relation = duckdb.connect().sql("select * from pairs")
    if path.suffix == ".csv":
        relation.write_csv(str(path))
    else:
        relation.write_parquet(str(path), compression="zstd")
