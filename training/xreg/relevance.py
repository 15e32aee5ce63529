"""Relevance weights of (query, category) pairs for XReg (§4.2).

The relevance of a pair is the query's click share: the pair's clicks over the query's
searches (its impressions; where the log has none, its total clicks), so that within a query
categories rank by their clicks. It is not the pair's own click-through rate: impressions are
counted per query (:mod:`qcat.training.clicklogs.clicklog`), and a pair's own rate would let 15 clicks of 25
searches on one day outrank 145 of 1,400 of the same query. XReg normalizes relevance weights
to [0, 1] by dividing by their maximum value, one global maximum: §4.2 says "all the
relevance weights are normalized ... by dividing by its maximum value" and notes that
click-through rates are already probabilities, so this only rescales when no pair reaches 1.
We do not normalize per query: that would turn a query whose best category draws 5% of its
searches into one whose best category is certainly relevant.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from qcat.training.clicklogs.clicktable import ClickTable


def pair_relevance(table: ClickTable) -> np.ndarray:
    """Every pair's share of its query's searches, divided by the largest share of the table."""
    demand = table.query_impressions[table.pair_query]
    ctr = np.minimum(table.clicks / np.maximum(demand, 1e-12), 1.0)
    top = ctr.max() if len(ctr) else 1.0
    return ctr / top if top > 0 else ctr


def relevance_matrix(table: ClickTable, columns: np.ndarray | None = None) -> sp.csr_matrix:
    """``(queries, labels)`` relevance; ``columns`` maps each category index of the table to
    a label column (-1: dropped), default the identity."""
    values = pair_relevance(table)
    cols = table.pair_category.astype(np.int64) if columns is None else columns[table.pair_category]
    keep = cols >= 0
    width = len(table.categories) if columns is None else int(columns.max()) + 1
    matrix = sp.csr_matrix((values[keep], (table.pair_query[keep], cols[keep])), shape=(len(table.queries), width))
    matrix.sum_duplicates()
    matrix.sort_indices()
    return matrix
