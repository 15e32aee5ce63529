"""Query-set statistics of an aggregated click table, as in eBay's Table 1 (§4.1).

Statistics are over the distinct normalized queries that keep at least one pair.
Percentiles use numpy's default (linear interpolation).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from qcat.measure.segments import SEGMENTS, segment_by_impressions
from qcat.text.normalize import normalize
from qcat.training.clicklogs.clicktable import ClickTable

MIN_CLICK_SHARE = 0.1  # a category "holds" a query's clicks from this share on


def table1_stats(table: ClickTable, brands: Iterable[str] | None = None,
                 shares: tuple[float, ...] = (0.3, 0.3, 0.4)) -> dict[str, float | int | None]:
    """Table-1 statistics of ``table``.

    Keys: ``n_queries``, ``n_pairs``, ``n_categories``; ``mean_query_length`` and
    ``p90_query_length`` (tokens); ``mean_categories_per_query`` and
    ``p90_categories_per_query``; ``mean_impressions_per_query`` and
    ``p90_impressions_per_query``; ``n_head``/``n_torso``/``n_tail`` and
    ``head_mean_length``/``torso_mean_length``/``tail_mean_length`` (segments by
    :func:`segment_by_impressions`); ``head_share_multi_category``: the share of head
    queries with at least two categories each holding at least 10% of the query's (kept)
    clicks; ``brand_only_queries`` (queries equal to a normalized name in ``brands``) and
    ``brand_only_multi_category`` (those with at least two categories), both None without
    ``brands``.
    """
    n_pairs_per_query = table.categories_per_query()
    kept = n_pairs_per_query > 0
    length = table.query_tokens_count()[kept].astype(np.float64)
    categories = n_pairs_per_query[kept].astype(np.float64)
    impressions = np.asarray(table.query_impressions, dtype=np.float64)[kept]
    segment = segment_by_impressions(np.nan_to_num(impressions), shares)

    query_clicks = np.bincount(table.pair_query, weights=table.clicks, minlength=len(table.queries))
    share = table.clicks / np.maximum(query_clicks[table.pair_query], 1e-12)
    holding = np.bincount(table.pair_query, weights=(share >= MIN_CLICK_SHARE), minlength=len(table.queries))[kept]
    head = segment == 0

    stats: dict[str, float | int | None] = {
        "n_queries": int(kept.sum()),
        "n_pairs": int(len(table)),
        "n_categories": int(len(np.unique(table.pair_category))),
        "mean_query_length": _mean(length),
        "p90_query_length": _p90(length),
        "mean_categories_per_query": _mean(categories),
        "p90_categories_per_query": _p90(categories),
        "mean_impressions_per_query": _mean(impressions),
        "p90_impressions_per_query": _p90(impressions),
    }
    for s, name in enumerate(SEGMENTS[: len(shares)]):
        stats[f"n_{name}"] = int((segment == s).sum())
        stats[f"{name}_mean_length"] = _mean(length[segment == s])
    stats["head_share_multi_category"] = _mean((holding[head] >= 2).astype(np.float64))
    stats["brand_only_queries"] = stats["brand_only_multi_category"] = None
    if brands is not None:
        names = np.asarray(sorted({normalize(b) for b in brands} - {""}), dtype=object)
        is_brand = np.isin(table.queries[kept], names)
        stats["brand_only_queries"] = int(is_brand.sum())
        stats["brand_only_multi_category"] = int((is_brand & (categories >= 2)).sum())
    return stats


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


def _p90(values: np.ndarray) -> float:
    return float(np.percentile(values, 90)) if len(values) else float("nan")


def format_stats(stats: dict[str, float | int | None]) -> str:
    """One ``key: value`` line per statistic."""
    return "\n".join(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}"
                     for key, value in stats.items())
