"""Training the Naive Bayes backend (eBay §3.2) from click tables."""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

from qcat.errors import InputError
from qcat.nb import NaiveBayesModel, query_features
from training.calibrate import fit_calibration
from training.clicktable import ClickTable
from training.dataset import Dataset
from training.selection import ValidationSets, objective, validation_sets
from training.table_metrics import evaluate_pr


@dataclass(frozen=True)
class NBConfig:
    """Grid of the noise threshold (minimum clicks of a feature-category row) and the
    smoothing alpha; the pair with the best validation objective (:mod:`training.selection`)
    is kept."""

    thresholds: tuple[float, ...] = (1, 2, 3, 5, 10, 20)
    alphas: tuple[float, ...] = (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)


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


def build_model(fc: FeatureCounts, table: ClickTable, dataset: Dataset, threshold: float, alpha: float, config: dict) -> NaiveBayesModel:
    """Drop (feature, category) rows under ``threshold`` clicks and smooth with ``alpha``."""
    labels_used = np.nonzero(fc.category_clicks > 0)[0]
    counts = fc.counts[:, labels_used].tocsr()
    counts.data[counts.data < threshold] = 0
    counts.eliminate_zeros()
    kept_features = np.nonzero(np.diff(counts.indptr) > 0)[0]
    counts = counts[kept_features].tocsr()
    counts.sort_indices()
    n_features = len(kept_features)
    category_totals = np.asarray(counts.sum(axis=0)).ravel()
    prior_clicks = fc.category_clicks[labels_used]
    log_prior = np.log(prior_clicks / prior_clicks.sum())
    unseen = np.log(alpha) - np.log(category_totals + alpha * max(n_features, 1))
    lookup = _lookup_table(table, labels_used)
    return NaiveBayesModel(
        labels=tuple(table.categories[labels_used]),
        taxonomy=dataset.taxonomy.subset(list(table.categories[labels_used])),
        vocabulary=tuple(fc.vocabulary[kept_features]),
        feature_indptr=counts.indptr.astype(np.int64),
        feature_labels=counts.indices.astype(np.int32),
        feature_delta=np.log1p(counts.data / alpha).astype(np.float32),
        label_log_prior=log_prior.astype(np.float32),
        label_unseen=unseen.astype(np.float32),
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
    if len(train) == 0 or len(sets["simulated"][0]) == 0:
        raise InputError(f"cannot train NB: {len(train):,} training and {len(sets['simulated'][0]):,} validation "
                         f"(query, category) pairs; the log needs more queries (or a lower --min-clicks)")
    fc = count_features(train)
    best, best_score, grid = None, -1.0, []
    for threshold, alpha in itertools.product(config.thresholds, config.alphas):
        model = build_model(fc, train, dataset, threshold, alpha, asdict(config))
        score, per_set = objective(model, sets)
        grid.append({"threshold": threshold, "alpha": alpha, "objective": round(score, 5)}
                    | {f"pr@1 {name}": round(value, 5) for name, value in per_set.items()})
        if progress:
            progress(threshold, alpha, score, per_set)
        if score > best_score:
            best, best_score = model, score
    best.calibration = fit_calibration(best, sets)
    best.metrics.update({
        "validation": evaluate_pr(best, sets["simulated"][0]),
        "validation_objective": round(best_score, 5),
        "objective_weights": {name: round(weight, 4) for name, (_, weight) in sets.items()},
        "tuning_grid": grid,
        "train_queries": int(len(train.queries)),
        "train_pairs": int(len(train)),
        "train_seconds": round(time.perf_counter() - started, 2),
    })
    return best
