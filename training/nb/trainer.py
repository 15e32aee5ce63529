"""Training the Naive Bayes backend (eBay §3.2) from click tables."""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

from qcat.console.progress import task
from qcat.models.nb import NaiveBayesModel, query_features
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import Dataset, truth_matrix
from qcat.training.selection.calibrate import fit_calibration
from qcat.training.selection.decide import decide
from qcat.training.selection.objective import ValidationSets, check_trainable, own_split, validation_sets
from qcat.training.selection.table_metrics import evaluate_pr


@dataclass(frozen=True)
class NBConfig:
    """Grid of the noise threshold (minimum clicks of a feature-category row) and the
    smoothing alpha; the pair with the best validation objective (:mod:`qcat.training.selection.objective`)
    is kept."""

    thresholds: tuple[float, ...] = (1, 2, 3, 5, 10, 20)
    alphas: tuple[float, ...] = (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
    # The stated default (no noise threshold, Laplace smoothing): another point of the grid replaces
    # it only when it wins on validation by more than 2 paired SE (qcat.training.selection.decide).
    default: tuple[float, float] = (1, 1.0)


@dataclass(frozen=True)
class FeatureCounts:
    """Clicks of every (feature, category) pair of a training table."""

    vocabulary: np.ndarray  # object, sorted
    counts: sp.csr_matrix  # (features, categories)
    category_clicks: np.ndarray  # (categories,)


def count_features(table: ClickTable) -> FeatureCounts:
    features = [query_features(q.split(" ")) for q in table.queries]
    vocabulary, feature_ids = np.unique(np.fromiter(itertools.chain.from_iterable(features), dtype=object), return_inverse=True)
    lengths = np.fromiter((len(f) for f in features), dtype=np.int64, count=len(features))
    rows = np.repeat(np.arange(len(features)), lengths)
    query_features_matrix = sp.csr_matrix(
        (np.ones(len(rows)), (rows, feature_ids)), shape=(len(features), len(vocabulary))
    )
    clicks = sp.csr_matrix(
        (table.clicks, (table.pair_query, table.pair_category)), shape=(len(table.queries), len(table.categories))
    )
    counts = (query_features_matrix.T @ clicks).tocsr()
    category_clicks = np.bincount(table.pair_category, weights=table.clicks, minlength=len(table.categories))
    return FeatureCounts(vocabulary, counts, category_clicks)


@dataclass(frozen=True)
class _Pruned:
    """The (feature, category) counts of one noise threshold, before smoothing."""

    labels_used: np.ndarray  # categories with clicks
    kept_features: np.ndarray  # positions in FeatureCounts.vocabulary
    counts: sp.csr_matrix  # (kept features, labels used), sorted indices
    category_totals: np.ndarray
    log_prior: np.ndarray  # float32


def _prune(fc: FeatureCounts, threshold: float) -> _Pruned:
    labels_used = np.nonzero(fc.category_clicks > 0)[0]
    counts = fc.counts[:, labels_used].tocsr()
    counts.data[counts.data < threshold] = 0
    counts.eliminate_zeros()
    kept_features = np.nonzero(np.diff(counts.indptr) > 0)[0]
    counts = counts[kept_features].tocsr()
    counts.sort_indices()
    prior_clicks = fc.category_clicks[labels_used]
    return _Pruned(labels_used, kept_features, counts, np.asarray(counts.sum(axis=0)).ravel(),
                   np.log(prior_clicks / prior_clicks.sum()).astype(np.float32))


def _smooth(pruned: _Pruned, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``feature_delta`` and ``label_unseen`` of smoothing ``alpha``."""
    unseen = np.log(alpha) - np.log(pruned.category_totals + alpha * max(len(pruned.kept_features), 1))
    return np.log1p(pruned.counts.data / alpha).astype(np.float32), unseen.astype(np.float32)


def build_model(fc: FeatureCounts, table: ClickTable, dataset: Dataset, threshold: float, alpha: float, config: dict,
                pruned: _Pruned | None = None) -> NaiveBayesModel:
    """Drop (feature, category) rows under ``threshold`` clicks and smooth with ``alpha``."""
    pruned = pruned or _prune(fc, threshold)
    delta, unseen = _smooth(pruned, alpha)
    labels_used = pruned.labels_used
    lookup = _lookup_table(table, labels_used)
    return NaiveBayesModel(
        labels=tuple(table.categories[labels_used]),
        taxonomy=dataset.taxonomy.subset(list(table.categories[labels_used])),
        vocabulary=tuple(fc.vocabulary[pruned.kept_features]),
        feature_indptr=pruned.counts.indptr.astype(np.int64),
        feature_labels=pruned.counts.indices.astype(np.int32),
        feature_delta=delta,
        label_log_prior=pruned.log_prior,
        label_unseen=unseen,
        config={**config, "threshold": threshold, "alpha": alpha},
        metrics={},
        **lookup,
    )


def _lookup_table(table: ClickTable, labels_used: np.ndarray) -> dict:
    """The full-query table: each training query with its categories by clicks, descending
    (a :class:`ClickTable` is already sorted that way)."""
    label_position = np.full(len(table.categories), -1, dtype=np.int64)
    label_position[labels_used] = np.arange(len(labels_used))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(table.pair_query, minlength=len(table.queries)))])
    return {
        "lookup_queries": tuple(table.queries),
        "lookup_indptr": indptr.astype(np.int64),
        "lookup_labels": label_position[table.pair_category].astype(np.int32),
        "lookup_clicks": table.clicks.astype(np.float32),
    }


def fit(dataset: Dataset, config: NBConfig = NBConfig(), progress=None,
        sets: ValidationSets | None = None) -> NaiveBayesModel:
    """Train on ``dataset.train``, tune threshold and alpha on the validation objective over
    ``sets`` (default: the dataset's validation split alone), then calibrate the scores on them."""
    started = time.perf_counter()
    train = dataset.train
    sets = sets or validation_sets(dataset)
    check_trainable(dataset, sets, "NB")
    fc = count_features(train)
    # The grid is scored without building a model per point: PR@1 needs only each query's top
    # category, which _GridScorer finds in one pass over the query's (feature, category) counts
    # (the same top category NaiveBayesModel.predict gives, ties to the lower label).
    scorer = _GridScorer(fc, train, sets)
    points, outcomes, grid = [], [], []
    with task("NB: the threshold x alpha grid", len(config.thresholds) * len(config.alphas)) as advance:
        for threshold in config.thresholds:
            pruned = _prune(fc, threshold)
            for alpha in config.alphas:
                hits = scorer.hits_at_1(pruned, alpha)
                per_set = {name: float(values.mean()) if len(values) else 0.0 for name, values in hits.items()}
                score = sum(per_set[name] * weight for name, (_, weight) in sets.items())
                grid.append({"threshold": threshold, "alpha": alpha, "objective": round(score, 5)}
                            | {f"pr@1 {name}": round(value, 5) for name, value in per_set.items()})
                points.append((threshold, alpha))
                outcomes.append(hits)
                if progress:
                    progress(threshold, alpha, score, per_set)
                advance()
    default = points.index(config.default) if config.default in points else 0
    decision = decide([f"threshold {t:g}, alpha {a:g}" for t, a in points], outcomes,
                      {name: weight for name, (_, weight) in sets.items()}, default)
    decision.annotate(grid)
    threshold, alpha = points[decision.chosen]
    best_score = grid[decision.chosen]["objective"]
    best = build_model(fc, train, dataset, threshold, alpha, asdict(config))
    best.calibration = fit_calibration(best, sets)
    best.metrics.update({
        "validation": evaluate_pr(best, own_split(sets)),
        "validation_objective": round(best_score, 5),
        "objective_weights": {name: round(weight, 4) for name, (_, weight) in sets.items()},
        "tuning_grid": grid,
        "tuning_decision": decision.to_json(),
        "train_queries": int(len(train.queries)),
        "train_pairs": int(len(train)),
        "train_seconds": round(time.perf_counter() - started, 2),
    })
    return best


class _GridScorer:
    """PR@1 over the validation sets of every (threshold, alpha) of the grid.

    Each set's queries are tokenized and their features looked up once; a query in the
    training lookup table answers its most-clicked category, as at serving time. The others
    are scored by :func:`_top1`, which adds each feature's entries to one row of scores and
    takes the best, in the order and precision of ``NaiveBayesModel.log_scores``, so the
    objective is the one ``selection.objective`` computes on the built model; the work per
    query is its entries plus one pass over the categories, with no (batch x categories)
    matrices in between.
    """

    def __init__(self, fc: FeatureCounts, train: ClickTable, sets: ValidationSets):
        from qcat.text.normalize import tokenize

        feature_index = {feature: i for i, feature in enumerate(fc.vocabulary)}
        lookup_index = {query: i for i, query in enumerate(train.queries)}
        labels_used = np.nonzero(fc.category_clicks > 0)[0]
        lookup = _lookup_table(train, labels_used)
        self.labels = train.categories[labels_used]
        self.n_features = len(fc.vocabulary)
        self.sets = {}
        for name, (table, _) in sets.items():
            token_lists = [tokenize(q) for q in table.queries]
            hit = np.fromiter((lookup_index.get(" ".join(tokens), -1) for tokens in token_lists), dtype=np.int64,
                              count=len(token_lists))
            hit_label = np.full(len(hit), -1, dtype=np.int64)
            found = np.nonzero(hit >= 0)[0]
            starts, ends = lookup["lookup_indptr"][hit[found]], lookup["lookup_indptr"][hit[found] + 1]
            has = ends > starts
            hit_label[found[has]] = lookup["lookup_labels"][starts[has]]
            ids = [[feature_index[f] for f in query_features(tokens) if f in feature_index] if h < 0 else []
                   for tokens, h in zip(token_lists, hit)]
            indptr = np.zeros(len(ids) + 1, dtype=np.int64)
            np.cumsum([len(i) for i in ids], out=indptr[1:])
            features = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(indptr[-1]))
            owner = np.repeat(np.arange(len(ids)), np.diff(indptr))
            self.sets[name] = (table, hit, hit_label, indptr, features, owner, truth_matrix(table))

    def hits_at_1(self, pruned: _Pruned, alpha: float) -> dict[str, np.ndarray]:
        """Each validation query's PR@1 (0 or 1, queries with a true category), per set."""
        from qcat.measure.predict import match_to_truth

        delta, unseen = _smooth(pruned, alpha)
        position = np.full(self.n_features, -1, dtype=np.int64)
        position[pruned.kept_features] = np.arange(len(pruned.kept_features))
        labels = tuple(self.labels)
        out = {}
        for name, (table, hit, hit_label, indptr, features, owner, truth) in self.sets.items():
            kept = position[features]
            known = kept >= 0
            counts = np.bincount(owner[known], minlength=len(hit))
            kept_indptr = np.zeros(len(indptr), dtype=np.int64)
            np.cumsum(counts, out=kept_indptr[1:])
            top = _top1(kept_indptr, kept[known], pruned.counts.indptr.astype(np.int64),
                        pruned.counts.indices.astype(np.int64), delta, pruned.log_prior, unseen)
            top = np.where(hit >= 0, hit_label, top)
            matched = match_to_truth(top[:, None], np.zeros((len(top), 1)), labels, table.categories, truth)
            out[name] = matched.hits[matched.valid, 0].astype(np.float64)
        return out


def _top1(query_indptr, query_features, feature_indptr, feature_labels, feature_delta, log_prior, unseen) -> np.ndarray:
    from numba import njit

    global _top1_kernel
    if _top1_kernel is None:
        _top1_kernel = njit(cache=True, nogil=True)(_top1_loop)
    return _top1_kernel(query_indptr, query_features, feature_indptr, feature_labels, feature_delta, log_prior, unseen)


_top1_kernel = None


def _top1_loop(query_indptr, query_features, feature_indptr, feature_labels, feature_delta, log_prior, unseen):
    n_queries, n_labels = len(query_indptr) - 1, len(log_prior)
    top = np.full(n_queries, -1, dtype=np.int64)
    acc = np.zeros(n_labels, dtype=np.float64)
    for q in range(n_queries):
        acc[:] = 0.0
        for j in range(query_indptr[q], query_indptr[q + 1]):
            f = query_features[j]
            for e in range(feature_indptr[f], feature_indptr[f + 1]):
                acc[feature_labels[e]] += np.float64(feature_delta[e])
        count = np.float64(query_indptr[q + 1] - query_indptr[q])
        best, arg = -np.inf, -1
        for c in range(n_labels):
            score = (np.float64(log_prior[c]) + count * np.float64(unseen[c])) + acc[c]
            if score > best:
                best, arg = score, c
        top[q] = arg
    return top
