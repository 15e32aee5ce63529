"""Data augmentation (eBay §3.4): the final training set is the whole *base* set plus
parts of the *candidate* set (the half-year before), chosen by three switchable steps:

``rare``
    the candidate pairs of the categories with the fewest candidate queries;
``brand``
    per brand, the candidate pairs of the lower half of the brand's categories by query
    count, repeated ``repeat`` (50) times;
``worst``
    the candidate pairs of the categories a base-set model misclassifies most, among
    those no earlier step added.

Every step only selects candidate pairs; ``augment`` drops candidate queries outside the
training split first (so no validation or test query leaks in) and merges the selection
into the base table. A candidate pair is added as many times as the steps choosing it
say (``rare`` and ``worst`` once, ``brand`` ``repeat`` times, summed over steps).

Merged table: ``clicks`` and ``impressions`` are the log's sums over both periods, each
added candidate pair counted once (impressions NaN if either side is unknown), and
``query_impressions`` is the base demand plus the candidate demand of queries with an
added pair. Repetition lives in ``weights``, one per pair: ``clicks * weights`` is the
pair's click mass with base rows counted once and candidate rows their number of times
(50.0 for a pair only a brand step added, 1.0 for a base-only pair). Click-count trainers
use ``Augmented.weighted_table()``; per-query trainers can take a query's largest weight.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np

from qcat.errors import InputError
from qcat.text.normalize import tokenize
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import split_queries, subset_queries

STEPS = ("rare", "brand", "worst")
RARE_SHARE = 0.075  # paper: 1500 of ~20,000 categories
WORST_SHARE = 0.05  # paper: 1000 of ~20,000 categories


@dataclass(frozen=True)
class Selection:
    """Candidate pairs chosen by one step: ``pairs`` is a mask over the candidate's pairs,
    ``categories`` the category ids chosen (sorted), ``repeat`` the times each pair is added."""

    pairs: np.ndarray
    categories: np.ndarray
    repeat: int = 1
    brand_categories: list[tuple[str, object]] = field(default_factory=list)


@dataclass(frozen=True)
class Augmented:
    table: ClickTable
    weights: np.ndarray  # float64 per pair of ``table``
    report: dict

    def weighted_table(self) -> ClickTable:
        """The table with each pair's clicks multiplied by its weight."""
        return replace(self.table, clicks=self.table.clicks * self.weights)


def _id_rank(categories: np.ndarray) -> np.ndarray:
    """Each category's position in id order, for tie-breaking by id."""
    rank = np.empty(len(categories), dtype=np.int64)
    rank[np.argsort(categories, kind="stable")] = np.arange(len(categories))
    return rank


def _count(n: int | None, share: float, available: int, what: str) -> int:
    if n is None:
        return int(round(share * available))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"{what} must be a non-negative integer, got {n!r}")
    return int(n)


def _selection(table: ClickTable, chosen: np.ndarray, repeat: int = 1) -> Selection:
    """The pairs of the categories where ``chosen`` (mask over ``table.categories``) is true."""
    return Selection(chosen[table.pair_category], np.sort(table.categories[chosen]), repeat)


def rare_categories(candidate: ClickTable, n_categories: int | None = None) -> Selection:
    """The candidate pairs of the ``n_categories`` categories with the fewest candidate
    queries (ties: lower id first). Default: 7.5% of the categories the candidate has."""
    frequency = np.bincount(candidate.pair_category, minlength=len(candidate.categories))
    present = np.flatnonzero(frequency > 0)
    n = _count(n_categories, RARE_SHARE, len(present), "n_categories")
    order = present[np.lexsort((_id_rank(candidate.categories)[present], frequency[present]))]
    chosen = np.zeros(len(candidate.categories), dtype=bool)
    chosen[order[:n]] = True
    return _selection(candidate, chosen)


def brand_matches(queries: np.ndarray, brands: Iterable[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(query index, brand index) of every query containing a brand's tokens as a contiguous
    run, and the brands (normalized, de-duplicated, sorted) the indices refer to."""
    names = sorted({" ".join(tokenize(b)) for b in brands} - {""})
    lookup = {tuple(name.split(" ")): i for i, name in enumerate(names)}
    lengths = sorted({len(k) for k in lookup})
    match_query, match_brand = [], []
    for qi, query in enumerate(queries):
        tokens = query.split(" ")
        found = {
            lookup[key]
            for n in lengths
            for start in range(len(tokens) - n + 1)
            if (key := tuple(tokens[start:start + n])) in lookup
        }
        match_query.extend([qi] * len(found))
        match_brand.extend(sorted(found))
    return np.asarray(match_query, dtype=np.int64), np.asarray(match_brand, dtype=np.int64), names


def brand_rare_queries(candidate: ClickTable, brands: Iterable[str], repeat: int = 50) -> Selection:
    """Per brand, count the candidate queries with the brand per category, sort the categories
    by that count (ascending, ties by id) and take the first ``floor(n / 2)``: a brand with
    one category gets nothing, one with two or three gets its rarest. Selects the candidate
    pairs of those (brand, category) pairs; a pair chosen through several brands counts once."""
    if isinstance(repeat, bool) or not isinstance(repeat, (int, np.integer)) or repeat < 1:
        raise InputError(f"repeat must be a positive integer, got {repeat!r}")
    match_query, match_brand, names = brand_matches(candidate.queries, brands)
    # Expand each (query, brand) match to the query's pairs.
    starts = np.searchsorted(candidate.pair_query, np.arange(len(candidate.queries) + 1))
    sizes = (starts[1:] - starts[:-1])[match_query]
    pair = np.repeat(starts[match_query], sizes) + np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    brand = np.repeat(match_brand, sizes)
    n_cat = len(candidate.categories)
    # (query, category) pairs are unique, so rows per (brand, category) = queries.
    keys, per_key = np.unique(brand * n_cat + candidate.pair_category[pair], return_counts=True)
    key_brand, key_category = keys // n_cat, keys % n_cat
    order = np.lexsort((_id_rank(candidate.categories)[key_category], per_key, key_brand))
    first = np.searchsorted(key_brand[order], key_brand[order], side="left")
    rank = np.arange(len(order)) - first
    per_brand = np.bincount(key_brand, minlength=len(names))
    chosen_keys = keys[order][rank < per_brand[key_brand[order]] // 2]
    selected = np.zeros(len(candidate), dtype=bool)
    selected[pair[np.isin(brand * n_cat + candidate.pair_category[pair], chosen_keys)]] = True
    brand_categories = [(names[k // n_cat], candidate.categories[k % n_cat]) for k in np.sort(chosen_keys)]
    categories = np.sort(np.unique(candidate.categories[candidate.pair_category[selected]]))
    return Selection(selected, categories, int(repeat), brand_categories)


def misclassification_rates(top1_predicted_category_ids: Sequence, table: ClickTable) -> np.ndarray:
    """Per category of ``table.categories``: the share of the table's queries having that
    category among their true (clicked) categories whose top-1 prediction is none of their
    true categories. NaN for a category without queries; a missing prediction (None) is a miss."""
    top1 = np.asarray(top1_predicted_category_ids, dtype=object)
    if top1.shape != (len(table.queries),):
        raise InputError(f"expected one top-1 prediction per query ({len(table.queries)}), got shape {top1.shape}")
    hit_pair = table.categories[table.pair_category] == top1[table.pair_query]
    miss = np.bincount(table.pair_query, weights=hit_pair, minlength=len(table.queries)) == 0
    queries = np.bincount(table.pair_category, minlength=len(table.categories))
    missed = np.bincount(table.pair_category, weights=miss[table.pair_query], minlength=len(table.categories))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(queries > 0, missed / queries, np.nan)


def worst_categories(
    misclassification_rate: np.ndarray,
    rate_categories: np.ndarray,
    candidate: ClickTable,
    n_categories: int | None = None,
    already_added: Iterable = (),
) -> Selection:
    """The candidate pairs of the ``n_categories`` categories with the highest rate
    (``misclassification_rate[i]`` belongs to id ``rate_categories[i]``; ties: lower id
    first) among those with candidate pairs, a rate (not NaN) and not in ``already_added``.
    Default: 5% of the categories the candidate has."""
    if len(misclassification_rate) != len(rate_categories):
        raise InputError(f"{len(misclassification_rate)} misclassification rates for {len(rate_categories)} category ids")
    rate_of = dict(zip(list(rate_categories), np.asarray(misclassification_rate, dtype=np.float64).tolist()))
    if len(rate_of) != len(rate_categories):
        raise InputError("rate_categories holds duplicate category ids")
    rate = np.array([rate_of.get(c, np.nan) for c in candidate.categories.tolist()], dtype=np.float64)
    present = np.bincount(candidate.pair_category, minlength=len(candidate.categories)) > 0
    n = _count(n_categories, WORST_SHARE, int(present.sum()), "n_categories")
    eligible = np.flatnonzero(present & ~np.isnan(rate) & ~np.isin(candidate.categories, list(already_added)))
    order = eligible[np.lexsort((_id_rank(candidate.categories)[eligible], -rate[eligible]))]
    chosen = np.zeros(len(candidate.categories), dtype=bool)
    chosen[order[:n]] = True
    return _selection(candidate, chosen)


def merge(base: ClickTable, candidate: ClickTable, times: np.ndarray) -> tuple[ClickTable, np.ndarray]:
    """Base plus the candidate pairs with ``times[i] > 0`` (see the module docstring)."""
    add = np.flatnonzero(times > 0)
    added_queries = np.unique(candidate.pair_query[add])
    queries = np.unique(np.concatenate([base.queries, candidate.queries[added_queries]]))
    categories = np.unique(np.concatenate([base.categories, candidate.categories[candidate.pair_category[add]]]))
    query = np.concatenate([
        np.searchsorted(queries, base.queries)[base.pair_query],
        np.searchsorted(queries, candidate.queries[candidate.pair_query[add]]),
    ])
    category = np.concatenate([
        np.searchsorted(categories, base.categories)[base.pair_category],
        np.searchsorted(categories, candidate.categories[candidate.pair_category[add]]),
    ])
    clicks = np.concatenate([base.clicks, candidate.clicks[add]])
    repeat = np.concatenate([np.ones(len(base)), times[add].astype(np.float64)])
    keys, row = np.unique(query.astype(np.int64) * len(categories) + category, return_inverse=True)
    total = np.bincount(row, weights=clicks, minlength=len(keys))
    mass = np.bincount(row, weights=clicks * repeat, minlength=len(keys))
    most = np.zeros(len(keys))
    np.maximum.at(most, row, repeat)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(total > 0, mass / total, most)
    demand = np.zeros(len(queries))
    np.add.at(demand, np.searchsorted(queries, base.queries), base.query_impressions)
    np.add.at(demand, np.searchsorted(queries, candidate.queries[added_queries]), candidate.query_impressions[added_queries])
    pair_query, pair_category = keys // len(categories), keys % len(categories)
    order = np.lexsort((pair_category, -total, pair_query))
    table = ClickTable(
        queries=queries.astype(object),
        categories=categories.astype(object),
        pair_query=pair_query[order].astype(np.int32),
        pair_category=pair_category[order].astype(np.int32),
        clicks=total[order],
        impressions=np.bincount(row, weights=np.concatenate([base.impressions, candidate.impressions[add]]), minlength=len(keys))[order],
        query_impressions=demand,
    )
    return table, weights[order]


def _step_report(candidate: ClickTable, selection: Selection) -> dict:
    return {
        "categories": selection.categories.tolist(),
        "queries": int(len(np.unique(candidate.pair_query[selection.pairs]))),
        "pairs": int(selection.pairs.sum()),
        "repeat": selection.repeat,
    }


def augment(
    base: ClickTable,
    candidate: ClickTable,
    steps: Sequence[str] = STEPS,
    *,
    brands: Iterable[str] | None = None,
    rare_n: int | None = None,
    brand_repeat: int = 50,
    worst_n: int | None = None,
    misclassification_rate: np.ndarray | None = None,
    rate_categories: np.ndarray | None = None,
    split_seed: int | None = 0,
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
) -> Augmented:
    """The final training set: ``base`` plus the candidate pairs the enabled ``steps`` choose.

    Steps run in the paper's order whatever the order given; ``worst`` skips the categories
    ``rare`` chose and those with a pair ``brand`` chose. Candidate queries whose split under
    ``split_seed`` is not train are dropped first (``split_seed=None``: the caller has already
    restricted ``candidate`` to training queries). The report gives the ``base`` and
    (train-only) ``candidate`` sizes with ``held_out_queries``; per step, the categories
    chosen and the candidate queries and pairs selected; ``added``: candidate queries and
    pairs added by any step, of which ``new_`` are not in base; ``final`` sizes.
    """
    unknown = steps if isinstance(steps, str) else [s for s in steps if s not in STEPS]
    if unknown:
        raise InputError(f"unknown augmentation step(s) {unknown!r}; expected a sequence of names from {', '.join(STEPS)}")
    if "brand" in steps and (brands is None or isinstance(brands, str)):
        raise InputError(f"the brand step needs a list of brand names, got {brands!r}")
    if "worst" in steps and (misclassification_rate is None or rate_categories is None):
        raise InputError("the worst step needs misclassification_rate and rate_categories (see misclassification_rates)")
    report: dict = {"steps": {}, "base": {"queries": len(base.queries), "pairs": len(base)}}
    held_out = 0
    if split_seed is not None:
        train = split_queries(candidate.queries, split_seed, split_fractions) == 0
        held_out = int((~train).sum())
        candidate = subset_queries(candidate, train)
    report["candidate"] = {"queries": len(candidate.queries), "pairs": len(candidate), "held_out_queries": held_out}

    times = np.zeros(len(candidate), dtype=np.int64)
    added: set = set()
    selections = {}
    if "rare" in steps:
        selections["rare"] = rare_categories(candidate, rare_n)
    if "brand" in steps:
        selections["brand"] = brand_rare_queries(candidate, brands, brand_repeat)
    for selection in selections.values():
        added.update(selection.categories.tolist())
    if "worst" in steps:
        selections["worst"] = worst_categories(misclassification_rate, rate_categories, candidate, worst_n, added)
    for name, selection in selections.items():
        times += selection.repeat * selection.pairs
        report["steps"][name] = _step_report(candidate, selection)
    if "brand" in selections:
        report["steps"]["brand"]["brand_categories"] = len(selections["brand"].brand_categories)

    table, weights = merge(base, candidate, times)
    report["added"] = {
        "queries": int(len(np.unique(candidate.pair_query[times > 0]))),
        "new_queries": len(table.queries) - len(base.queries),
        "pairs": int((times > 0).sum()),
        "new_pairs": len(table) - len(base),
    }
    report["final"] = {"queries": len(table.queries), "pairs": len(table)}
    return Augmented(table, weights, report)
