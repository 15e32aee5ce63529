"""Datasets: a click table split by query into train, validation and test."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from qcat.taxonomy import Taxonomy
from qcat.training.clicklogs.clicktable import ClickTable

SPLITS = ("train", "validation", "test")


def split_queries(queries: np.ndarray, seed: int = 0, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> np.ndarray:
    """Assign each query to a split (0 train, 1 validation, 2 test) by a seeded hash of its
    text, so a query lands in the same split whatever else the log holds."""
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) < 0:
        raise ValueError(f"split fractions must be non-negative and sum to 1, got {fractions}")
    salt = f"qcat-split-{seed}:".encode()
    draws = np.fromiter(
        (int.from_bytes(hashlib.blake2b(salt + q.encode("utf-8"), digest_size=8).digest(), "big") for q in queries),
        dtype=np.uint64,
        count=len(queries),
    ) / np.float64(2**64)
    return np.searchsorted(np.cumsum(fractions)[:-1], draws, side="right").astype(np.int8)


def subset_queries(table: ClickTable, keep: np.ndarray) -> ClickTable:
    """The table restricted to the queries where ``keep`` is true (categories unchanged)."""
    new_index = np.cumsum(keep) - 1
    pair_keep = keep[table.pair_query]
    return replace(
        table,
        queries=table.queries[keep],
        pair_query=new_index[table.pair_query[pair_keep]].astype(np.int32),
        pair_category=table.pair_category[pair_keep],
        clicks=table.clicks[pair_keep],
        impressions=table.impressions[pair_keep],
        query_impressions=table.query_impressions[keep],
    )


MIN_SEARCHES = 10.0  # the searches a query new to a table counts at least (merge_pairs)


def merge_pairs(table: ClickTable, queries: np.ndarray, categories: np.ndarray, weights: np.ndarray) -> ClickTable:
    """``table`` with the weighted pairs added as clicks (the catalog's pairs,
    :mod:`qcat.training.catalog.source`; judged pairs, :mod:`qcat.training.data.judged`). A log
    pair keeps its impressions; a query's searches grow by its added weight (at least
    :data:`MIN_SEARCHES` for a query the table did not hold)."""
    all_queries = np.unique(np.concatenate([table.queries.astype(object), queries.astype(object)]))
    all_categories = np.unique(np.concatenate([table.categories.astype(object), categories.astype(object)]))
    width = max(len(all_categories), 1)
    log_query = np.searchsorted(all_queries, table.queries)
    log_category = np.searchsorted(all_categories, table.categories)
    new_query = np.searchsorted(all_queries, queries) if len(queries) else np.zeros(0, dtype=np.int64)
    new_category = np.searchsorted(all_categories, categories) if len(categories) else np.zeros(0, dtype=np.int64)
    keys = np.concatenate([log_query[table.pair_query].astype(np.int64) * width + log_category[table.pair_category],
                           new_query.astype(np.int64) * width + new_category])
    key, inverse = np.unique(keys, return_inverse=True)
    clicks = np.bincount(inverse, weights=np.concatenate([table.clicks, weights]), minlength=len(key))
    impressions = np.full(len(key), np.nan)
    np.fmax.at(impressions, inverse[:len(table)], table.impressions)
    pair_query, pair_category = np.divmod(key, width)
    demand = np.zeros(len(all_queries))
    demand[log_query] = table.query_impressions
    added = np.bincount(new_query, weights=weights, minlength=len(all_queries))
    new = demand == 0
    demand += added
    demand[new & (added > 0)] = np.maximum(demand[new & (added > 0)], MIN_SEARCHES)
    order = np.lexsort((pair_category, -clicks, pair_query))
    return ClickTable(queries=all_queries, categories=all_categories, pair_query=pair_query[order].astype(np.int32),
                      pair_category=pair_category[order].astype(np.int32), clicks=clicks[order],
                      impressions=impressions[order], query_impressions=demand)


def truth_matrix(table: ClickTable) -> sp.csr_matrix:
    """Ground truth ``(queries, categories)`` with click counts as values."""
    return sp.csr_matrix(
        (table.clicks, (table.pair_query, table.pair_category)),
        shape=(len(table.queries), len(table.categories)),
    )


@dataclass(frozen=True)
class Dataset:
    """Train/validation/test tables over one category index (``table.categories``)."""

    taxonomy: Taxonomy
    table: ClickTable
    split: np.ndarray  # int8 per query of ``table``
    seed: int = 0

    @classmethod
    def from_table(cls, table: ClickTable, taxonomy: Taxonomy, seed: int = 0) -> "Dataset":
        return cls(taxonomy, table, split_queries(table.queries, seed), seed)

    def part(self, name: str) -> ClickTable:
        return subset_queries(self.table, self.split == SPLITS.index(name))

    @property
    def train(self) -> ClickTable:
        return self.part("train")

    @property
    def validation(self) -> ClickTable:
        return self.part("validation")

    @property
    def test(self) -> ClickTable:
        return self.part("test")
