"""Fitting a model's node calibration (:mod:`qcat.models.calibration.nodes`) on validation queries.

For every validation query the model's top ``top_k`` leaves are summed up the tree
(:meth:`qcat.models.calibration.nodes.NodeTree.masses`); every node with mass is a point "the
query's gold leaf lies beneath this node" against the node's mass, weighted so that each validation set counts
with its objective weight whatever its size. The map of each depth is the isotonic regression of
those points (:func:`qcat.training.selection.calibrate.isotonic`).

The thresholds that keep a stated precision are chosen on queries the maps did not see (split
conformal): the validation queries are cut into two halves (every other query of each set), the
maps are fitted on the first, and for each query-length bin and each precision P of
:data:`qcat.models.calibration.nodes.LEVELS`, the threshold is the lowest at which every validation
set with at least ``min_queries`` queries of that length in the second half keeps the one-sided
Clopper-Pearson lower bound of its answers' precision at least P (at ``confidence``), scanned
from the highest threshold down and stopping at the first that fails (thresholds answering fewer
than ``min_answers`` queries of a set are not tested). Taking
the highest threshold over the sets keeps the promise for each kind of traffic validation holds
(the demo: real titles, their first two tokens, the simulated log), not only for their mix.
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaincinv  # beta.ppf's own function: scipy.stats takes half a second to import

from qcat.models.calibration.nodes import ALL_LENGTHS, LENGTH_EDGES, LEVELS, TOP_K, NodeCalibration, NodeTree
from qcat.models.model import Model
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import truth_matrix
from qcat.training.selection.calibrate import isotonic

CONFIDENCE = 0.7  # of the lower bound each threshold must keep (docs/guide/node-answers.md: why not 0.9)
MIN_QUERIES = 100  # of a set in a length bin, for the set to have a say in the bin's thresholds
MIN_ANSWERS = 30  # a threshold answering fewer queries of a set is not tested on it
GRID = np.round(np.arange(1000, -1, -1) / 1000, 3)  # thresholds tried, highest first


class SetPoints:
    """One validation set's queries as the fit reads them: each query's nodes with mass, whether
    the gold lies beneath each, and the query's length bin."""

    def __init__(self, model: Model, table: ClickTable, tree: NodeTree, top_k: int, weight: float) -> None:
        predictions = model.predict(list(table.queries), top_k)
        taxonomy = tree.taxonomy
        column = np.array([taxonomy.index(c) if c in taxonomy else -1 for c in table.categories], dtype=np.int64)
        truth = truth_matrix(table).tocsr()
        self.queries = []  # (nodes, mass, gold-beneath per node)
        for row in range(len(table.queries)):
            nodes, mass = tree.masses(predictions.labels[row], predictions.scores[row])
            gold = column[truth.indices[truth.indptr[row]:truth.indptr[row + 1]]]
            beneath = tree.ancestors_of(gold[gold >= 0])
            self.queries.append((predictions.labels[row], predictions.scores[row], nodes, mass,
                                 np.fromiter((n in beneath for n in nodes.tolist()), dtype=bool, count=len(nodes)),
                                 beneath))
        self.bins = np.searchsorted(LENGTH_EDGES, table.query_tokens_count(), side="left")
        self.weight = weight / max(len(table.queries), 1)

    def __len__(self) -> int:
        return len(self.queries)


def fit_maps(tree: NodeTree, sets: list[SetPoints], rows: list[np.ndarray]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Isotonic maps per depth from the given query rows of each set."""
    mass, right, depth, weight = [], [], [], []
    for points, chosen in zip(sets, rows):
        for row in chosen.tolist():
            _, _, nodes, node_mass, beneath, _ = points.queries[row]
            mass.append(node_mass), right.append(beneath), depth.append(tree.depth[nodes])
            weight.append(np.full(len(nodes), points.weight))
    if not mass:
        return {}
    mass, right = np.concatenate(mass), np.concatenate(right).astype(np.float64)
    depth, weight = np.concatenate(depth), np.concatenate(weight)
    return {int(d): isotonic(mass[depth == d], right[depth == d], weight[depth == d]) for d in np.unique(depth)}


def chains(calibration: NodeCalibration, tree: NodeTree, points: SetPoints,
           rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query row: the chain's probability per depth and whether each depth's node is right."""
    probability = np.zeros((len(rows), tree.max_depth))
    right = np.zeros((len(rows), tree.max_depth), dtype=bool)
    for i, row in enumerate(rows.tolist()):
        labels, scores, _, _, _, beneath = points.queries[row]
        best, probability[i] = calibration.chain(tree, labels, scores)
        right[i] = np.fromiter((n in beneath for n in best.tolist()), dtype=bool, count=len(best))
    return probability, right


def lower_bound(right: np.ndarray, answered: np.ndarray, confidence: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bounds of right / answered (0 where nothing is right)."""
    with np.errstate(invalid="ignore"):
        bound = betaincinv(right.astype(np.float64), (answered - right + 1).astype(np.float64), 1 - confidence)
    return np.where(right > 0, np.nan_to_num(bound), 0.0)


def set_thresholds(probability: np.ndarray, right: np.ndarray, confidence: float) -> list[float | None]:
    """Per level of :data:`LEVELS`: the threshold this set's queries support (None: none)."""
    reached = np.zeros((len(probability), len(GRID)), dtype=np.int64)
    for depth in range(probability.shape[1]):
        reached += probability[:, depth, None] >= GRID[None, :]
    answered = (reached > 0).sum(axis=0)
    at = np.take_along_axis(right, np.maximum(reached - 1, 0), axis=1) & (reached > 0)
    bound = lower_bound(at.sum(axis=0), answered, confidence)
    tested = answered >= MIN_ANSWERS
    thresholds = []
    for level in LEVELS:
        passing = None
        for g in np.flatnonzero(tested).tolist():  # highest threshold first
            if bound[g] < level:
                break
            passing = float(GRID[g])
        thresholds.append(passing)
    return thresholds


def worst_over_sets(per_set: list[list[float | None]]) -> tuple[float | None, ...]:
    """The threshold every set supports: the highest, None where any set supports none."""
    return tuple(None if any(t is None for t in column) else max(column) for column in zip(*per_set))


def fit_node_calibration(model: Model, sets: dict[str, tuple[ClickTable, float]], top_k: int = TOP_K,
                         confidence: float = CONFIDENCE, min_queries: int = MIN_QUERIES) -> NodeCalibration | None:
    """The node calibration of ``model`` (as it ships: leaf calibration included) from ``sets``
    (name -> (validation table, weight)), or None where the sets hold no query."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    tree = NodeTree(model.taxonomy, model.labels)
    named = {name: (table, weight) for name, (table, weight) in sets.items() if len(table.queries) and weight > 0}
    points = [SetPoints(model, table, tree, top_k, weight) for table, weight in named.values()]
    if not points:
        return None
    maps_half = [np.flatnonzero(np.arange(len(p)) % 2 == 0) for p in points]
    threshold_half = [np.flatnonzero(np.arange(len(p)) % 2 == 1) for p in points]
    maps = fit_maps(tree, points, maps_half)
    if not maps:  # one query a set: nothing left for the maps; fit them on the queries there are
        maps, threshold_half = fit_maps(tree, points, threshold_half), [np.arange(len(p)) for p in points]
    shipped = NodeCalibration(maps, {ALL_LENGTHS: (None,) * len(LEVELS)}, top_k)
    probability, right = zip(*(chains(shipped, tree, p, rows) for p, rows in zip(points, threshold_half)))
    thresholds, counts = {}, {}
    for key in [ALL_LENGTHS] + [str(b) for b in range(len(LENGTH_EDGES) + 1)]:
        per_set = []
        for name, p, half, prob, hit in zip(named, points, threshold_half, probability, right):
            bins = p.bins[half]
            rows = np.arange(len(half)) if key == ALL_LENGTHS else np.flatnonzero(bins == int(key))
            if len(rows) >= min_queries:
                per_set.append(set_thresholds(prob[rows], hit[rows], confidence))
                counts.setdefault(key, {})[name] = len(rows)
        if per_set:
            thresholds[key] = worst_over_sets(per_set)
    if ALL_LENGTHS not in thresholds:  # too few queries anywhere: every set has its say over all lengths
        thresholds[ALL_LENGTHS] = worst_over_sets([set_thresholds(prob, hit, confidence)
                                                   for prob, hit in zip(probability, right)])
        counts[ALL_LENGTHS] = {name: len(half) for name, half in zip(named, threshold_half)}
    fitted_on = {"sets": {name: round(weight, 4) for name, (_, weight) in named.items()},
                 "queries_by_length": counts, "min_queries": min_queries, "min_answers": MIN_ANSWERS}
    return NodeCalibration(maps, thresholds, top_k, confidence, fitted_on)

