"""Fitting the score calibration of a model (:mod:`qcat.models.calibration`) on validation queries.

For every validation query the model's top-1 category and raw score are taken; the map of
each answering source (``lookup``, ``nb``, ``xmlq``, ``xreg``) is the isotonic regression of
"the top-1 category is one the query's truth holds" on that score (pool-adjacent-violators),
over all lengths and per query-length bin (``qcat.models.calibration.LENGTH_EDGES``),
each query weighted so that every validation set counts with its objective weight whatever
its size. A source with fewer than ``min_points`` validation queries keeps its raw scores.

A map is kept only where it does not make the expected calibration error worse on queries it
was not fitted on: each source's validation queries are cut into two halves, each half is
calibrated by maps fitted on the other, and the source keeps its maps (fitted on all its
queries) only if that cross-fitted ECE is no higher than the raw scores' ECE, each ECE taken
per validation set and averaged with the objective's set weights. In-sample, an
isotonic map always looks better; on the demo's real-text test sets, maps kept without this
check raised the ECE (0.041 -> 0.048, 0.024 -> 0.041). The verdict and both ECEs are recorded in
the calibration's ``fitted_on["ece"]``.
"""

from __future__ import annotations

import numpy as np

from qcat.measure.metrics import calibration_bins
from qcat.models.calibration import LENGTH_EDGES, Calibration, describe_verdict, length_bins, map_key
from qcat.models.model import Model
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import truth_matrix

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


def source_maps(source: str, scores: np.ndarray, correct: np.ndarray, weights: np.ndarray, bins: np.ndarray,
                min_points: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """One source's maps: over all lengths, and per length bin with at least ``min_points``."""
    maps = {map_key(source): isotonic(scores, correct, weights)}
    for length_bin in range(len(LENGTH_EDGES) + 1):
        in_bin = bins == length_bin
        if in_bin.sum() >= min_points:
            maps[map_key(source, length_bin)] = isotonic(scores[in_bin], correct[in_bin], weights[in_bin])
    return maps


def apply_maps(maps: dict, source: str, scores: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """Scores of one source calibrated as serving does (a bin's map, else the source's)."""
    calibration, out = Calibration(maps, {}), scores.copy()
    for length_bin in np.unique(bins):
        key = map_key(source, int(length_bin))
        rows = bins == length_bin
        out[rows] = calibration.calibrate(key if key in maps else map_key(source), scores[rows])
    return out


def cross_fitted_ece(source: str, scores, correct, weights, bins, min_points: int,
                     groups: np.ndarray | None = None) -> tuple[float, float]:
    """(raw ECE, ECE of the scores calibrated by maps fitted on the other half of the queries).
    With ``groups`` (the validation set of each query), each ECE is that of every set on its
    own, averaged with the sets' weights: pooling the sets would let a well-calibrated large
    set hide a set the map makes worse."""
    fold = np.arange(len(scores)) % 2
    crossed = np.empty_like(scores)
    for held in (0, 1):
        fit, out = fold != held, fold == held
        maps = source_maps(source, scores[fit], correct[fit], weights[fit], bins[fit], min_points // 2)
        crossed[out] = apply_maps(maps, source, scores[out], bins[out])
    groups = np.zeros(len(scores), dtype=np.int64) if groups is None else groups
    raw = held_out = total = 0.0
    for group in np.unique(groups):
        rows = groups == group
        weight = float(weights[rows].sum())
        raw += weight * calibration_bins(scores[rows], correct[rows])[-1]
        held_out += weight * calibration_bins(crossed[rows], correct[rows])[-1]
        total += weight
    return raw / total, held_out / total


def fit_calibration(model: Model, sets: dict[str, tuple[ClickTable, float]], min_points: int = MIN_POINTS) -> Calibration:
    """Isotonic maps per source from ``sets`` (name -> (validation table, weight)) of the
    scores ``model`` gives as it is (a trainer passes a model without calibration), for the
    sources where they do not make the held-out ECE worse."""
    scores, correct, sources, weights, lengths, groups, points = [], [], [], [], [], [], {}
    sets = {name: (table, weight) for name, (table, weight) in sets.items() if len(table.queries) and weight > 0}
    for number, (name, (table, weight)) in enumerate(sets.items()):
        s, c, src = top1_outcomes(model, table)
        scores.append(s), correct.append(c), sources.append(src), groups.append(np.full(len(s), number))
        lengths.append(table.query_tokens_count())
        weights.append(np.full(len(s), weight / len(s)))
        points[name] = {str(k): int(v) for k, v in zip(*np.unique(src, return_counts=True))}
    if not sets:
        return Calibration({}, {"sets": {}, "top1_points": {}, "min_points": min_points, "ece": {}})
    scores, correct = np.concatenate(scores), np.concatenate(correct)
    sources, weights = np.concatenate(sources), np.concatenate(weights)
    bins, groups = length_bins(np.concatenate(lengths)), np.concatenate(groups)
    maps, verdicts = {}, {}
    for source in sorted(set(sources.tolist())):
        rows = sources == source
        if rows.sum() < min_points:
            verdicts[source] = {"kept": False, "why": f"{int(rows.sum())} validation queries (< {min_points})"}
            continue
        args = (scores[rows], correct[rows], weights[rows], bins[rows])
        raw, crossed = cross_fitted_ece(source, *args, min_points, groups[rows])
        kept = bool(crossed <= raw)
        verdicts[source] = {"kept": kept, "ece_raw": round(raw, 5), "ece_calibrated_held_out": round(crossed, 5)}
        if kept:
            maps |= source_maps(source, *args, min_points)
    return Calibration(maps, {"sets": {n: round(w, 4) for n, (_, w) in sets.items()}, "top1_points": points,
                              "min_points": min_points, "length_edges": list(LENGTH_EDGES), "ece": verdicts})


def describe_fit(calibration: Calibration | None) -> str:
    """One line on which sources a fitted calibration maps, and why the others keep raw scores."""
    verdicts = calibration.fitted_on.get("ece", {}) if calibration is not None else {}
    if not verdicts:
        return "calibration: none (no validation queries): scores are raw"
    return "calibration: " + "; ".join(describe_verdict(source, verdict) for source, verdict in sorted(verdicts.items()))
