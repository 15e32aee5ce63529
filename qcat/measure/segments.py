"""Query segments: head/torso/tail by impression share (eBay §4.2.2) and query length."""

from __future__ import annotations

import numpy as np

SEGMENTS = ("head", "torso", "tail")
DEFAULT_SHARES = (0.3, 0.3, 0.4)
LENGTH_BINS = ("1", "2", "3", "4", "5+")


def segment_by_impressions(query_impressions: np.ndarray, shares: tuple[float, ...] = DEFAULT_SHARES) -> np.ndarray:
    """Head/torso/tail segment of each query (int8: 0 = head, 1 = torso, 2 = tail).

    Queries are sorted by impressions, descending (ties: lower index first). A query belongs
    to the segment in which its cumulative impression share *starts*: with ``before`` the
    share of all impressions held by the queries ahead of it, the query is in segment ``s``
    when ``bounds[s-1] <= before < bounds[s]``, ``bounds`` being the cumulative ``shares``.
    So the most searched query is always head, and a query straddling a boundary belongs
    to the earlier segment. A start that equals a boundary up to rounding (1e-9) counts as
    past it.

    Parameters
    ----------
    query_impressions : array of non-negative numbers, one per query
    shares : the segments' shares of all impressions, summing to 1
    """
    impressions = np.asarray(query_impressions, dtype=np.float64)
    if len(shares) > 127 or not np.isclose(sum(shares), 1.0) or min(shares) < 0:
        raise ValueError(f"segment shares must be non-negative and sum to 1, got {shares}")
    if np.any(~np.isfinite(impressions)) or np.any(impressions < 0):
        raise ValueError("query impressions must be finite and non-negative")
    segment = np.empty(len(impressions), dtype=np.int8)
    if len(impressions) == 0:
        return segment
    order = np.lexsort((np.arange(len(impressions)), -impressions))
    total = impressions.sum()
    sorted_impressions = impressions[order]
    before = (np.cumsum(sorted_impressions) - sorted_impressions) / (total if total > 0 else 1.0)
    bounds = np.cumsum(shares)[:-1] - 1e-9
    segment[order] = np.searchsorted(bounds, before, side="right")
    return segment


def segment_by_length(token_counts: np.ndarray, longest: int = 5) -> np.ndarray:
    """Length bin of each query (int8): ``n`` tokens gives bin ``n - 1``, and every query
    of ``longest`` tokens or more shares the last bin (named in ``LENGTH_BINS``)."""
    counts = np.asarray(token_counts)
    if counts.size and counts.min() < 1:
        raise ValueError("every query has at least one token")
    return (np.minimum(counts, longest) - 1).astype(np.int8)
