"""Fitting the score calibration of a model (:mod:`qcat.calibration`) on validation queries.

For every validation query the model's top-1 category and raw score are taken; the map of
each answering source (``lookup``, ``nb``, ``xmlq``, ``xreg``) is the isotonic regression of
"the top-1 category is one the query's truth holds" on that score (pool-adjacent-violators),
over all lengths and per query-length bin (``qcat.calibration.LENGTH_EDGES``),
each query weighted so that every validation set counts with its objective weight whatever
its size. A source with fewer than ``min_points`` validation queries keeps its raw scores.
"""

from __future__ import annotations

import numpy as np

from qcat.calibration import LENGTH_EDGES, Calibration, length_bins, map_key
from qcat.model import Model
from training.clicktable import ClickTable
from training.dataset import truth_matrix

MIN_POINTS = 50


def isotonic(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least-squares non-decreasing fit of ``y`` on ``x`` (pool adjacent violators),
    as the knots of a strictly increasing piecewise-linear map.

    Pooling merges equal means too, so block means strictly increase; a knot sits at each
    block's weighted mean ``x`` with the block's mean ``y``, and (0, 0) anchors the low end.
    Interpolating between block centres (rather than a step function) keeps distinct raw
    scores distinct, so calibration never ties, and hence never reorders, two categories.
    """
    # Equal scores are one point (their weighted mean): PAV must never split a tie.
    x, inverse = np.unique(x, return_inverse=True)
    total = np.bincount(inverse, weights=weight, minlength=len(x))
    y = np.bincount(inverse, weights=weight * y, minlength=len(x)) / np.maximum(total, 1e-300)
    weight = total
    means, weights, centres = [], [], []
    for xi, yi, wi in zip(x.tolist(), y.tolist(), weight.tolist()):
        means.append(yi), weights.append(wi), centres.append(xi * wi)
        while len(means) > 1 and means[-2] >= means[-1]:
            w = weights[-2] + weights[-1]
            means[-2:] = [(means[-2] * weights[-2] + means[-1] * weights[-1]) / w]
            centres[-2:] = [centres[-2] + centres[-1]]
            weights[-2:] = [w]
    knots_x = np.array(centres) / np.array(weights)
    knots_y = np.clip(np.array(means), 0.0, 1.0)
    if knots_x[0] > 0 and knots_y[0] > 0:
        knots_x, knots_y = np.concatenate([[0.0], knots_x]), np.concatenate([[0.0], knots_y])
    return knots_x, knots_y


def top1_outcomes(model: Model, table: ClickTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query of ``table``: the model's top-1 score, whether that category is true, and
    which part answered."""
    predictions = model.predict(list(table.queries), 1)
    index = {label: i for i, label in enumerate(table.categories)}
    column = np.array([index.get(label, -1) for label in model.labels] + [-1], dtype=np.int64)
    top = column[predictions.labels[:, 0]]  # -1 (no answer) reads the padding entry
    hit = np.asarray(truth_matrix(table).tocsr()[np.arange(len(top)), np.maximum(top, 0)]).ravel() > 0
    correct = (hit & (top >= 0)).astype(np.float64)
    return predictions.scores[:, 0].astype(np.float64), correct, np.asarray(predictions.sources, dtype=object)


def fit_calibration(model: Model, sets: dict[str, tuple[ClickTable, float]], min_points: int = MIN_POINTS) -> Calibration:
    """Isotonic maps per source from ``sets`` (name -> (validation table, weight)) of the
    scores ``model`` gives as it is (a trainer passes a model without calibration)."""
    scores, correct, sources, weights, lengths, points = [], [], [], [], [], {}
    sets = {name: (table, weight) for name, (table, weight) in sets.items() if len(table.queries) and weight > 0}
    for name, (table, weight) in sets.items():
        s, c, src = top1_outcomes(model, table)
        scores.append(s), correct.append(c), sources.append(src)
        lengths.append(table.query_tokens_count())
        weights.append(np.full(len(s), weight / len(s)))
        points[name] = {str(k): int(v) for k, v in zip(*np.unique(src, return_counts=True))}
    scores, correct = np.concatenate(scores), np.concatenate(correct)
    sources, weights = np.concatenate(sources), np.concatenate(weights)
    bins = length_bins(np.concatenate(lengths))
    maps = {}
    for source in sorted(set(sources.tolist())):
        rows = sources == source
        if rows.sum() < min_points:
            continue
        maps[map_key(source)] = isotonic(scores[rows], correct[rows], weights[rows])
        for length_bin in range(len(LENGTH_EDGES) + 1):
            in_bin = rows & (bins == length_bin)
            if in_bin.sum() >= min_points:
                maps[map_key(source, length_bin)] = isotonic(scores[in_bin], correct[in_bin], weights[in_bin])
    return Calibration(maps, {"sets": {n: round(w, 4) for n, (_, w) in sets.items()}, "top1_points": points,
                              "min_points": min_points, "length_edges": list(LENGTH_EDGES)})
