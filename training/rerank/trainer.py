"""Training the second stage: LightGBM lambdarank over the candidates' features, cross-fitted
on the validation sets, exported to :class:`qcat.rerank.trees.TreeEnsemble` arrays.

The first stage's parts were trained on the training split only, so the validation queries'
features come from models that never saw them. The ranker itself is cross-fitted: the
validation queries are cut into folds (:func:`qcat.training.rerank.data.fold_of`: by their first
two tokens, so a held-out title and its two-token prefix share a fold), and each query is
scored by a ranker trained on the other folds. Those out-of-fold scores are what the settings
(rounds, leaves) are chosen on, by the validation objective; the shipped ranker is then trained
on every validation query with the chosen settings, and only the test sets judge it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qcat.rerank.trees import TreeEnsemble
from qcat.training.rerank.data import Examples, fold_of

N_FOLDS = 5
ROUNDS = (50, 100, 200, 400)
LEAVES = (15, 31)
BASE_PARAMS = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [1, 3],
    "lambdarank_truncation_level": 10,
    "learning_rate": 0.05,
    "min_data_in_leaf": 50,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "num_threads": 2,
    "seed": 0,
    "deterministic": True,
    "force_row_wise": True,
    "verbose": -1,
}


def _lightgbm():
    try:
        import lightgbm
    except ImportError:
        raise SystemExit("qcat train rerank needs lightgbm: pip install 'qcat[train]'") from None
    return lightgbm


@dataclass(frozen=True)
class Stacked:
    """Several sets' examples as one ranking problem (queries without a relevant candidate
    dropped from training: they teach nothing), with each query's set and fold."""

    rows: np.ndarray
    relevant: np.ndarray
    group_sizes: np.ndarray  # rows per trained query
    query_set: np.ndarray  # set index per trained query
    query_fold: np.ndarray
    row_query: np.ndarray  # trained-query index per row
    weight: np.ndarray  # per row: its set's weight shared over the set's trained queries

    def subset(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Rows, relevance, group sizes and weights of the trained queries where ``queries``."""
        mask = queries[self.row_query]
        return self.rows[mask], self.relevant[mask], self.group_sizes[queries], self.weight[mask]


def stack(examples: list[Examples], n_folds: int = N_FOLDS, set_weights: list[float] | None = None) -> Stacked:
    """``set_weights``: each set's share of the training signal (default: by its queries)."""
    rows, relevant, sizes, sets, folds = [], [], [], [], []
    for s, ex in enumerate(examples):
        keep = ex.reachable
        fold = fold_of(ex.queries, n_folds)
        for i in np.flatnonzero(keep).tolist():
            lo, hi = ex.ptr[i], ex.ptr[i + 1]
            rows.append(ex.rows[lo:hi])
            relevant.append(ex.relevant[lo:hi])
            sizes.append(hi - lo)
            sets.append(s)
            folds.append(fold[i])
    sizes, sets = np.asarray(sizes, dtype=np.int64), np.asarray(sets, dtype=np.int64)
    per_set = np.bincount(sets, minlength=len(examples)).astype(np.float64)
    if set_weights is None:
        query_weight = np.ones(len(sizes))
    else:
        share = np.asarray(set_weights, dtype=np.float64) / np.maximum(per_set, 1.0)
        query_weight = share[sets] * len(sizes) / max(float(np.sum(np.asarray(set_weights)[per_set > 0])), 1e-12)
    return Stacked(np.concatenate(rows), np.concatenate(relevant), sizes, sets, np.asarray(folds),
                   np.repeat(np.arange(len(sizes)), sizes), np.repeat(query_weight, sizes))


def train_booster(rows: np.ndarray, relevant: np.ndarray, group_sizes: np.ndarray, weight: np.ndarray | None,
                  params: dict, rounds: int, names: list[str] | None = None):
    lgb = _lightgbm()
    data = lgb.Dataset(rows, label=relevant, group=group_sizes, weight=weight, feature_name=names or "auto",
                       free_raw_data=False)
    return lgb.train(params, data, num_boost_round=rounds)


def crossfit(examples: list[Examples], params: dict, rounds: tuple[int, ...], n_folds: int = N_FOLDS,
             names: list[str] | None = None, set_weights: list[float] | None = None) -> dict[int, list[np.ndarray]]:
    """Out-of-fold scores of every row of every set (rounds -> per set, per row): a query's
    rows are scored by a ranker that did not train on its fold. Queries without a relevant
    candidate are scored too (they count as misses whatever their order)."""
    stacked = stack(examples, n_folds, set_weights)
    out = {r: [np.zeros(len(ex.relevant)) for ex in examples] for r in rounds}
    folds = [fold_of(ex.queries, n_folds) for ex in examples]
    for fold in range(n_folds):
        booster = train_booster(*stacked.subset(stacked.query_fold != fold), params, max(rounds), names)
        for s, ex in enumerate(examples):
            row_fold = np.repeat(folds[s], np.diff(ex.ptr))
            held = row_fold == fold
            if not held.any():
                continue
            for r in rounds:
                out[r][s][held] = booster.predict(ex.rows[held], num_iteration=r)
    return out


def no_leak_check(examples: list[Examples], n_folds: int = N_FOLDS) -> None:
    """Refuse folds that would leak: a query in two folds, or a two-token prefix split across them."""
    seen: dict[str, int] = {}
    for ex in examples:
        for query, fold in zip(ex.queries.tolist(), fold_of(ex.queries, n_folds).tolist()):
            key = " ".join(query.split()[:2])
            if seen.setdefault(key, fold) != fold:
                raise AssertionError(f"query prefix {key!r} falls in folds {seen[key]} and {fold}")


def export_trees(booster, n_features: int) -> TreeEnsemble:
    """LightGBM's trees as flat arrays (numerical ``<=`` splits only; the features hold no NaN)."""
    roots, feature, threshold, left, right, value = [], [], [], [], [], []

    def add(node: dict) -> int:
        index = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        if "leaf_value" in node:
            value.append(float(node["leaf_value"]))
            return index
        if node.get("decision_type") != "<=":
            raise ValueError(f"cannot export a {node.get('decision_type')!r} split (numerical <= only)")
        value.append(float(node.get("internal_value", 0.0)))
        feature[index] = int(node["split_feature"])
        threshold[index] = float(node["threshold"])
        left[index] = add(node["left_child"])
        right[index] = add(node["right_child"])
        return index

    for tree in booster.dump_model()["tree_info"]:
        roots.append(add(tree["tree_structure"]))
    return TreeEnsemble(np.asarray(roots, dtype=np.int64), np.asarray(feature, dtype=np.int32),
                        np.asarray(threshold, dtype=np.float64), np.asarray(left, dtype=np.int64),
                        np.asarray(right, dtype=np.int64), np.asarray(value, dtype=np.float64), n_features)
