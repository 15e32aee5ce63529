"""Node answers scored against the taxonomy (qcat.measure.hierarchy): hand-computed cases, and
hierarchical precision/recall/F1 against hiclass itself."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import binomtest

from qcat.errors import TaxonomyError
from qcat.measure.hierarchy import (NodeTable, hierarchical_prf, node_correct, node_summary, path_coverage,
                                    wilson_interval)
from qcat.taxonomy import from_paths

TAXONOMY = from_paths(["Toys > Trains > Sets", "Toys > Trains > Track", "Toys > Dolls", "Toys > Other",
                       "Books > Fiction", "Books > Other"])


def at(path: str) -> str:
    return TAXONOMY.id_of_path(path)


# Per query: the truth, the answer; then whether it is right, its coverage, and |A∩G|, |A|, |G|.
CASES = [
    (["Toys > Trains > Sets"], "Toys", True, 1 / 3, 1, 1, 3),  # a department
    (["Toys > Trains > Sets"], "Toys > Trains", True, 2 / 3, 2, 2, 3),  # an aisle
    (["Toys > Trains > Sets"], "Toys > Trains > Sets", True, 1.0, 3, 3, 3),  # the leaf
    (["Toys > Trains > Sets"], "Toys > Trains > Track", False, 0.0, 2, 3, 3),  # its sibling leaf
    (["Books > Fiction"], "Toys > Dolls", False, 0.0, 0, 2, 2),  # another department
    (["Toys > Dolls"], None, False, 0.0, 0, 0, 2),  # no node
    (["Toys > Dolls", "Toys > Trains > Sets"], "Toys > Trains", True, 2 / 3, 2, 2, 4),  # G: Toys, Dolls, Trains, Sets
    (["Books > Fiction", "Toys > Dolls"], "Toys", True, 1 / 2, 1, 1, 4),  # contains Dolls (depth 2) only
]
GOLD = [[at(p) for p in gold] for gold, *_ in CASES]
NODES = [None if node is None else at(node) for _, node, *_ in CASES]


def test_node_table_holds_ancestors_department_first_and_depths() -> None:
    table = NodeTable.build(TAXONOMY)
    sets, trains, toys = (TAXONOMY.index(at(p)) for p in ("Toys > Trains > Sets", "Toys > Trains", "Toys"))
    assert table.ancestors[sets].tolist() == [toys, trains, sets]
    assert table.ancestors[toys].tolist() == [toys, -1, -1]
    assert table.depth[[sets, trains, toys, -1]].tolist() == [3, 2, 1, 0]  # -1: no node
    assert table.leaf[[sets, trains, toys, -1]].tolist() == [True, False, False, False]
    assert table.leaf[:-1].sum() == len(TAXONOMY.leaves)
    assert table.positions([at("Toys"), None]).tolist() == [toys, -1]
    assert table.gold_positions([at("Toys"), [], [at("Toys"), at("Toys > Trains")]]).tolist() == \
        [[toys, -1], [-1, -1], [toys, trains]]  # a lone id is one true node


def test_node_correct_and_path_coverage_hand_computed() -> None:
    assert node_correct(TAXONOMY, NODES, GOLD).tolist() == [case[2] for case in CASES]
    assert path_coverage(TAXONOMY, NODES, GOLD).tolist() == [case[3] for case in CASES]
    table = NodeTable.build(TAXONOMY)  # a table built once gives the same
    assert node_correct(table, NODES, GOLD).tolist() == [case[2] for case in CASES]


def test_hierarchical_prf_hand_computed() -> None:
    both, answered, true = (sum(case[i] for case in CASES) for i in (4, 5, 6))
    assert (both, answered, true) == (11, 14, 24)
    precision, recall, f1 = hierarchical_prf(TAXONOMY, NODES, GOLD)
    assert precision == pytest.approx(11 / 14, abs=1e-15) and recall == pytest.approx(11 / 24, abs=1e-15)
    assert f1 == pytest.approx(22 / 38, abs=1e-15)  # 2·11 / (14 + 24)


def test_edge_cases() -> None:
    assert hierarchical_prf(TAXONOMY, [None, None], GOLD[:2])[1:] == (0.0, 0.0)
    assert math.isnan(hierarchical_prf(TAXONOMY, [None, None], GOLD[:2])[0])  # nothing answered
    assert all(math.isnan(x) for x in hierarchical_prf(TAXONOMY, [], []))
    precision, recall, f1 = hierarchical_prf(TAXONOMY, [at("Toys")], [[]])  # no truth
    assert (precision, f1) == (0.0, 0.0) and math.isnan(recall)
    assert node_correct(TAXONOMY, [], []).tolist() == [] and path_coverage(TAXONOMY, [], []).tolist() == []
    assert node_correct(TAXONOMY, [at("Toys")], [at("Toys > Dolls")]).tolist() == [True]  # a lone id
    with pytest.raises(TaxonomyError):
        node_correct(TAXONOMY, ["nope"], [[at("Toys > Dolls")]])
    with pytest.raises(ValueError):
        path_coverage(TAXONOMY, [None], [])


@pytest.mark.slow
def test_a_name_two_branches_share_is_no_common_ancestor() -> None:
    """Toys > Other answered for Books > Other: no node in common, though hiclass given the names
    (not the ids) would count "Other" as one."""
    assert hierarchical_prf(TAXONOMY, [at("Toys > Other")], [[at("Books > Other")]]) == (0.0, 0.0, 0.0)
    metrics = pytest.importorskip("hiclass.metrics")
    assert metrics.precision(np.array([["Books", "Other"]]), np.array([["Toys", "Other"]])) == 0.5


# -- against hiclass ----------------------------------------------------------------------------


def random_taxonomy(rng: np.random.Generator):
    paths, frontier = [], [(f"d{i}",) for i in range(rng.integers(2, 5))]
    while frontier:
        path = frontier.pop()
        children = rng.integers(len(path) == 1, 4) if len(path) < 4 else 0  # a department has an aisle
        if not children:
            paths.append(" > ".join(path))
        frontier += [path + (f"n{len(paths)}_{len(frontier)}_{j}",) for j in range(children)]
    return from_paths(paths)


def hiclass_rows(taxonomy, rows: list[list[str]], width: int, depth: int) -> np.ndarray:
    """hiclass's 3-d labels: per query ``width`` labels, each its path of node ids padded with "".
    Every query needs the same number of label rows, the answer's too (padded with rows of ""):
    hiclass zips a query's true rows with its predicted rows, so true leaves past the number of
    predicted rows would be dropped."""
    out = np.full((len(rows), width, depth), "", dtype=object)
    for i, row in enumerate(rows):
        for j, node in enumerate(row):
            ids = [node]
            while (parent := taxonomy.parent(ids[-1])) is not None:
                ids.append(parent)
            out[i, j, :len(ids)] = ids[::-1]
    return out.astype(str)


@pytest.mark.parametrize("seed", range(5))
def test_hierarchical_prf_matches_hiclass(seed: int) -> None:
    metrics = pytest.importorskip("hiclass.metrics")
    rng = np.random.default_rng(seed)
    taxonomy = random_taxonomy(rng)
    leaves, ids = taxonomy.leaves, taxonomy.ids
    most = 1 if seed < 2 else 3  # one true leaf per query (hiclass's 2-d labels) or up to three (3-d)
    gold = [list(rng.choice(leaves, rng.integers(1, most + 1))) for _ in range(300)]
    predicted = []
    for row in gold:
        draw = rng.random()
        if draw < 0.15:
            predicted.append(None)
        elif draw < 0.6:  # on the way to a true leaf
            chain = [row[0]]
            while (parent := taxonomy.parent(chain[-1])) is not None:
                chain.append(parent)
            predicted.append(str(rng.choice(chain)))
        else:
            predicted.append(str(rng.choice(ids)))
    depth = max(len(path) for path in taxonomy.paths)
    y_true = hiclass_rows(taxonomy, gold, most, depth)
    y_pred = hiclass_rows(taxonomy, [[] if p is None else [p] for p in predicted], most, depth)
    if most == 1:
        y_true, y_pred = y_true[:, 0], y_pred[:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # hiclass warns when its F1 is undefined: it must not be here
        expected = (metrics.precision(y_true, y_pred), metrics.recall(y_true, y_pred), metrics.f1(y_true, y_pred))
    assert hierarchical_prf(taxonomy, predicted, gold) == pytest.approx(expected, abs=1e-12, rel=0)


# -- the summary --------------------------------------------------------------------------------


def test_node_summary_hand_computed() -> None:
    """Toys, Trains and Sets right for Sets; Track wrong; two queries without a node."""
    nodes = [at("Toys"), at("Toys > Trains"), at("Toys > Trains > Sets"), at("Toys > Trains > Track"), None, None]
    gold = [[at("Toys > Trains > Sets")]] * 6
    table = NodeTable.build(TAXONOMY)
    position = table.positions(nodes)
    correct, depth, leaf = node_correct(table, nodes, gold), table.depth[position], table.leaf[position]
    assert depth.tolist() == [1, 2, 3, 3, 0, 0] and leaf.tolist() == [False, False, True, True, False, False]
    summary = node_summary(correct, depth, position >= 0, leaf)
    low, high = binomtest(3, 4).proportion_ci(0.95, method="wilson")
    assert summary == pytest.approx({"precision": 0.75, "precision_low": low, "precision_high": high,
                                     "answered": 4, "n": 6, "mean_depth": 1.5, "mean_depth_answered": 2.25,
                                     "leaf_share": 1 / 3, "none_share": 1 / 3}, abs=1e-12)
    assert 0.30 < low < 0.31 and 0.95 < high < 0.96  # 0.3006, 0.9544


def test_node_summary_without_answers_or_queries() -> None:
    none = node_summary([False] * 3, [0] * 3, [False] * 3, [False] * 3)
    assert none == {"precision": None, "precision_low": None, "precision_high": None, "answered": 0, "n": 3,
                    "mean_depth": 0.0, "mean_depth_answered": None, "leaf_share": 0.0, "none_share": 1.0}
    empty = node_summary([], [], [], [])
    assert empty["n"] == 0 and empty["answered"] == 0 and empty["mean_depth"] is None and empty["none_share"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in [*none.values(), *empty.values()])
    with pytest.raises(ValueError):
        node_summary([True], [1, 2], [True], [False])


@pytest.mark.parametrize(("k", "n", "confidence"), [(0, 1, 0.95), (0, 7, 0.9), (3, 4, 0.95), (7, 7, 0.99),
                                                    (412, 500, 0.95), (1, 10_000, 0.8)])
def test_wilson_interval_matches_scipy_and_statsmodels(k: int, n: int, confidence: float) -> None:
    ours = wilson_interval(k, n, confidence)
    scipy_ci = binomtest(k, n).proportion_ci(confidence, method="wilson")
    assert ours == pytest.approx((scipy_ci.low, scipy_ci.high), abs=1e-12)
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    assert ours == pytest.approx(proportion.proportion_confint(k, n, alpha=1 - confidence, method="wilson"), abs=1e-12)
