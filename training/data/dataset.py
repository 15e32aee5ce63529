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
