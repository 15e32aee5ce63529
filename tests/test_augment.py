"""Data augmentation (qcat.training.data.augment): the three §3.4 steps on hand-built tables, the
merge, switching steps off, no leakage of held-out queries, and the demo corpus."""

from __future__ import annotations

import numpy as np
import pytest

from qcat.errors import InputError
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.augment import (
    augment,
    brand_matches,
    brand_rare_queries,
    merge,
    misclassification_rates,
    rare_categories,
    worst_categories,
)
from qcat.training.data.dataset import Dataset, split_queries


def _table(rows, categories=None) -> ClickTable:
    """A table from (query, category, clicks[, impressions]) rows, keeping the invariants."""
    rows = [r if len(r) == 4 else (*r, np.nan) for r in rows]
    rows.sort(key=lambda r: (r[0], -r[2], r[1]))
    queries = np.array(sorted({r[0] for r in rows}), dtype=object)
    categories = np.array(sorted({r[1] for r in rows}) if categories is None else categories, dtype=object)
    pair_query = np.array([np.flatnonzero(queries == r[0])[0] for r in rows], dtype=np.int32)
    clicks = np.array([r[2] for r in rows], dtype=np.float64)
    return ClickTable(
        queries=queries,
        categories=categories,
        pair_query=pair_query,
        pair_category=np.array([np.flatnonzero(categories == r[1])[0] for r in rows], dtype=np.int32),
        clicks=clicks,
        impressions=np.array([r[3] for r in rows], dtype=np.float64),
        query_impressions=np.bincount(pair_query, weights=clicks, minlength=len(queries)),
    )


def _pairs(table: ClickTable, mask=None) -> set[tuple[str, str]]:
    keep = np.ones(len(table), dtype=bool) if mask is None else mask
    return set(zip(table.queries[table.pair_query[keep]], table.categories[table.pair_category[keep]]))


def _check_invariants(table: ClickTable) -> None:
    assert list(table.queries) == sorted(set(table.queries))
    assert len(set(table.categories)) == len(table.categories)
    key = list(zip(table.pair_query, -table.clicks, table.categories[table.pair_category]))
    assert key == sorted(key)
    assert len(_pairs(table)) == len(table)
    assert table.pair_query.dtype == np.int32 and table.pair_category.dtype == np.int32
    assert len(table.query_impressions) == len(table.queries)


# Category frequencies (queries): a 3, b 1, c 2, d 1; e has no pairs.
RARE = _table(
    [("q1", "a", 5), ("q2", "a", 4), ("q3", "a", 3), ("q3", "c", 9), ("q4", "b", 3), ("q5", "c", 3), ("q6", "d", 7)],
    categories=["e", "d", "c", "b", "a"],
)


def test_rare_categories_takes_the_least_frequent_ties_by_id():
    two = rare_categories(RARE, 2)
    assert two.categories.tolist() == ["b", "d"]
    assert _pairs(RARE, two.pairs) == {("q4", "b"), ("q6", "d")}
    three = rare_categories(RARE, 3)
    assert three.categories.tolist() == ["b", "c", "d"]
    assert _pairs(RARE, three.pairs) == {("q4", "b"), ("q6", "d"), ("q3", "c"), ("q5", "c")}
    assert rare_categories(RARE, 10).categories.tolist() == ["a", "b", "c", "d"]  # never e (no pairs)
    assert rare_categories(RARE).pairs.sum() == 0  # default: round(7.5% of 4 categories) = 0
    with pytest.raises(InputError, match="-1"):
        rare_categories(RARE, -1)


BRANDS = ["Nike", "nike", "Dior", "air max", "adidas", "zara"]
BRAND = _table([
    ("nike shoes", "c1", 9), ("nike running shoes", "c1", 8), ("nike air", "c1", 7), ("nike air", "c2", 3),
    ("nike bag", "c2", 5), ("nike dinner plate", "c3", 4), ("nike watch", "c4", 3), ("nikes", "c5", 6),
    ("dior gaudron", "c3", 4), ("dior dress", "c4", 8), ("dior dress red", "c4", 5), ("dior lipstick", "c5", 7),
    ("air max 90", "c1", 6), ("air max bag", "c2", 4), ("max air", "c3", 5),
    ("adidas shoes", "c1", 9),
])


def test_brand_matches_whole_contiguous_tokens():
    match_query, match_brand, names = brand_matches(BRAND.queries, BRANDS)
    assert names == ["adidas", "air max", "dior", "nike", "zara"]
    found = {(BRAND.queries[q], names[b]) for q, b in zip(match_query, match_brand)}
    assert ("nikes", "nike") not in found and ("max air", "air max") not in found
    assert ("air max 90", "air max") in found and ("nike air", "nike") in found
    assert len(found) == 13  # nike 6, dior 4, air max 2, adidas 1


def test_brand_rare_queries_lower_half_of_each_brand_repeated():
    # nike: c3 1, c4 1, c2 2, c1 3 -> c3, c4; dior: c3 1, c5 1, c4 2 -> c3;
    # air max: c1 1, c2 1 -> c1 (tie by id); adidas: one category -> nothing.
    selection = brand_rare_queries(BRAND, BRANDS)
    assert selection.repeat == 50
    assert _pairs(BRAND, selection.pairs) == {
        ("nike dinner plate", "c3"), ("nike watch", "c4"), ("dior gaudron", "c3"), ("air max 90", "c1"),
    }
    assert selection.brand_categories == [("air max", "c1"), ("dior", "c3"), ("nike", "c3"), ("nike", "c4")]
    assert selection.categories.tolist() == ["c1", "c3", "c4"]
    assert brand_rare_queries(BRAND, []).pairs.sum() == 0
    with pytest.raises(InputError, match="repeat"):
        brand_rare_queries(BRAND, BRANDS, repeat=0)


def test_misclassification_rates():
    table = _table([("q1", "a", 5), ("q1", "b", 3), ("q2", "a", 4), ("q3", "b", 6), ("q3", "c", 3), ("q4", "c", 3)],
                   categories=["a", "b", "c", "d"])
    rates = misclassification_rates(np.array(["b", "c", "a", None], dtype=object), table)
    np.testing.assert_array_equal(rates, [0.5, 0.5, 1.0, np.nan])
    with pytest.raises(InputError, match="one top-1 prediction per query"):
        misclassification_rates(["a"], table)


def test_worst_categories_skips_added_unrated_and_absent():
    rate_categories = np.array(["x", "d", "c", "b", "a", "e"], dtype=object)
    rates = np.array([1.0, 0.9, 0.2, 0.9, np.nan, 1.0])  # x not in candidate, e has no pairs, a unrated
    assert worst_categories(rates, rate_categories, RARE, 2).categories.tolist() == ["b", "d"]
    selection = worst_categories(rates, rate_categories, RARE, 2, already_added=["b"])
    assert selection.categories.tolist() == ["c", "d"]
    assert _pairs(RARE, selection.pairs) == {("q6", "d"), ("q3", "c"), ("q5", "c")}
    assert worst_categories(rates, rate_categories, RARE, 9, already_added={"b", "c", "d"}).pairs.sum() == 0
    with pytest.raises(InputError, match="6 misclassification rates for 2"):
        worst_categories(rates, rate_categories[:2], RARE, 1)


def test_merge_sums_clicks_and_weights_repetition():
    base = _table([("x", "a", 10, 100), ("y", "b", 5, 50)])
    candidate = _table([("x", "a", 4, 20), ("x", "c", 3, np.nan), ("z", "b", 6, 30), ("w", "a", 8, 10)])
    # candidate pairs in order: (w,a) (x,a) (x,c) (z,b)
    table, weights = merge(base, candidate, np.array([0, 50, 1, 50]))
    _check_invariants(table)
    rows = {(q, c): (k, i, w) for q, c, k, i, w in zip(
        table.queries[table.pair_query], table.categories[table.pair_category], table.clicks, table.impressions, weights)}
    assert rows.keys() == {("x", "a"), ("x", "c"), ("y", "b"), ("z", "b")}
    assert rows[("x", "a")] == (14, 120, (10 + 50 * 4) / 14)
    assert rows[("x", "c")][0] == 3 and np.isnan(rows[("x", "c")][1]) and rows[("x", "c")][2] == 1
    assert rows[("y", "b")] == (5, 50, 1) and rows[("z", "b")] == (6, 30, 50)
    assert table.queries.tolist() == ["x", "y", "z"]
    np.testing.assert_array_equal(table.query_impressions, [10 + 7, 5, 6])


def _base_and_candidate():
    base = _table([("q1", "a", 5), ("q2", "a", 4), ("q3", "c", 3), ("q4", "b", 3), ("q6", "d", 7)])
    return base, RARE


def test_switching_steps_off_adds_nothing():
    base, candidate = _base_and_candidate()
    result = augment(base, candidate, steps=(), split_seed=None)
    for name in ("queries", "categories", "pair_query", "pair_category", "clicks", "query_impressions"):
        np.testing.assert_array_equal(getattr(result.table, name), getattr(base, name))
    assert (result.weights == 1).all() and result.report["steps"] == {}
    assert result.report["added"] == {"queries": 0, "new_queries": 0, "pairs": 0, "new_pairs": 0}


def test_augment_report_counts_and_steps():
    base, candidate = _base_and_candidate()
    rates = np.array([0.1, 0.5, 0.9, 0.3])  # for a, b, c, d
    result = augment(base, candidate, steps=("worst", "rare"), rare_n=2, worst_n=1, misclassification_rate=rates,
                     rate_categories=np.array(["a", "b", "c", "d"], dtype=object), split_seed=None)
    _check_invariants(result.table)
    steps = result.report["steps"]
    assert list(steps) == ["rare", "worst"]
    assert steps["rare"] == {"categories": ["b", "d"], "queries": 2, "pairs": 2, "repeat": 1}
    assert steps["worst"] == {"categories": ["c"], "queries": 2, "pairs": 2, "repeat": 1}
    # Added candidate pairs (q4,b) (q6,d) (q3,c) (q5,c): all but (q5,c) already in base.
    assert result.report["added"] == {"queries": 4, "new_queries": 1, "pairs": 4, "new_pairs": 1}
    assert result.report["final"] == {"queries": 6, "pairs": 6}
    assert _pairs(result.table) == _pairs(base) | {("q5", "c")}
    assert (result.weights == 1).all()
    assert dict(zip(result.table.queries[result.table.pair_query], result.table.clicks))["q6"] == 14


def test_augment_brand_step_weights():
    result = augment(BRAND, BRAND, steps=("brand",), brands=BRANDS, split_seed=None)
    weights = dict(zip(zip(result.table.queries[result.table.pair_query], result.table.categories[result.table.pair_category]), result.weights))
    # base once + candidate 50 times, over the summed clicks
    assert weights[("nike watch", "c4")] == pytest.approx(51 / 2) and weights[("nike shoes", "c1")] == 1
    assert result.report["steps"]["brand"]["brand_categories"] == 4
    assert result.table.clicks.sum() == BRAND.clicks.sum() + (4 + 3 + 4 + 6)
    assert result.weighted_table().clicks.sum() == pytest.approx(BRAND.clicks.sum() + 50 * (4 + 3 + 4 + 6))


def test_no_held_out_query_leaks():
    queries = np.array([f"query {i}" for i in range(200)], dtype=object)
    split = split_queries(queries, seed=3)
    assert (split == 0).any() and (split > 0).any()
    base = _table([(q, "common", 10) for q in queries[:100]])
    candidate = _table([(q, "rare", 3) for q in queries[50:120]] + [(q, "common", 20) for q in queries[:150]])
    result = augment(base, candidate, steps=("rare",), rare_n=1, split_seed=3)
    assert result.report["candidate"]["held_out_queries"] == int((split[:150] > 0).sum())  # candidate: queries[:150]
    added = {q for q, c in _pairs(result.table) if c == "rare"}
    assert added == {q for q, s in zip(queries[50:120], split[50:120]) if s == 0}
    dataset = Dataset.from_table(result.table, taxonomy=None, seed=3)
    base_dataset = Dataset.from_table(base, taxonomy=None, seed=3)
    for part in ("validation", "test"):
        assert _pairs(dataset.part(part)) == _pairs(base_dataset.part(part))


def test_bad_arguments():
    base, candidate = _base_and_candidate()
    with pytest.raises(InputError, match="unknown augmentation step"):
        augment(base, candidate, steps=("rare", "typo"))
    with pytest.raises(InputError, match="'rare'"):
        augment(base, candidate, steps="rare")
    with pytest.raises(InputError, match="brand names, got None"):
        augment(base, candidate, steps=("brand",))
    with pytest.raises(InputError, match="brand names, got 'nike'"):
        augment(base, candidate, steps=("brand",), brands="nike")
    with pytest.raises(InputError, match="n_categories"):
        augment(base, candidate, steps=("rare",), rare_n=1.5)
    with pytest.raises(InputError, match="misclassification_rate"):
        augment(base, candidate, steps=("worst",))


@pytest.fixture(scope="module")
def demo(demo_ingested):
    from qcat.training.data.corpus import Corpus
    from qcat.training.simulator.simulate import catalog_brand_queries

    # corpus.ingest("base") and ("candidate") on the corpus's taxonomy, once a session (tests/conftest.py)
    base, candidate = demo_ingested["base"].table, demo_ingested["candidate"].table
    return base, candidate, catalog_brand_queries(Corpus.open().catalog())


@pytest.mark.slow
def test_demo_corpus(demo):
    base, candidate, brands = demo
    # A stand-in model: right (its top category) on 80% of the base queries, random otherwise.
    rng = np.random.default_rng(0)
    top = base.categories[base.pair_category[np.searchsorted(base.pair_query, np.arange(len(base.queries)))]]
    top = np.where(rng.random(len(top)) < 0.2, rng.choice(base.categories, len(top)), top)
    rates = misclassification_rates(top, base)
    result = augment(base, candidate, brands=brands, misclassification_rate=rates, rate_categories=base.categories)
    table, report = result.table, result.report
    _check_invariants(table)
    assert _pairs(base) <= _pairs(table)
    train = split_queries(candidate.queries, 0) == 0
    assert set(table.queries) - set(base.queries) <= set(candidate.queries[train])
    steps = report["steps"]
    assert len(steps["rare"]["categories"]) == round(0.075 * len(candidate.categories))
    assert len(steps["worst"]["categories"]) == round(0.05 * len(candidate.categories))
    assert not set(steps["worst"]["categories"]) & (set(steps["rare"]["categories"]) | set(steps["brand"]["categories"]))
    new = np.isin(table.queries[table.pair_query], list(set(table.queries) - set(base.queries)))
    assert set(table.categories[table.pair_category[new]]) <= set().union(*(s["categories"] for s in steps.values()))
    assert steps["brand"]["pairs"] > 0 and (result.weights == 50).sum() > 0
    assert set(np.unique(result.weights[new])) <= {1.0, 50.0, 51.0}
    assert result.weighted_table().clicks.sum() > table.clicks.sum()
    assert report["final"]["pairs"] == report["base"]["pairs"] + report["added"]["new_pairs"]
