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
    """One validation set's queries as the fit reads them: each query's top leaves, its nodes with
    mass (flat, :meth:`NodeTree.batch_masses`), whether the gold lies beneath each, and the query's
    length bin."""

    def __init__(self, model: Model, table: ClickTable, tree: NodeTree, top_k: int, weight: float) -> None:
        predictions = model.predict(list(table.queries), top_k)
        self.labels, self.scores = predictions.labels, predictions.scores
        taxonomy = tree.taxonomy
        column = np.array([taxonomy.index(c) if c in taxonomy else -1 for c in table.categories], dtype=np.int64)
        truth = truth_matrix(table).tocoo()
        gold = column[truth.col]
        ancestors = tree.ancestor_rows(gold[gold >= 0])  # every node above each gold leaf, and the leaf
        rows = np.broadcast_to(truth.row[gold >= 0][:, None], ancestors.shape)[ancestors >= 0]
        self.size = tree.size
        self.beneath_keys = np.unique(rows * tree.size + ancestors[ancestors >= 0])  # query * size + node
        self.query, self.nodes, self.mass = tree.batch_masses(self.labels, self.scores)
        self.beneath = self.holds_gold(self.query, self.nodes)
        self.bins = np.searchsorted(LENGTH_EDGES, table.query_tokens_count(), side="left")
        self.weight = weight / max(len(table.queries), 1)

    def holds_gold(self, query: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Whether each (query, node) has one of the query's gold leaves beneath it (no node: False)."""
        return (nodes >= 0) & np.isin(query * self.size + nodes, self.beneath_keys)

    def __len__(self) -> int:
        return len(self.labels)


def fit_maps(tree: NodeTree, sets: list[SetPoints], rows: list[np.ndarray]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Isotonic maps per depth from the given query rows of each set."""
    mass, right, depth, weight = [], [], [], []
    for points, chosen in zip(sets, rows):
        taken = np.isin(points.query, chosen)
        mass.append(points.mass[taken]), right.append(points.beneath[taken]), depth.append(tree.depth[points.nodes[taken]])
        weight.append(np.full(int(taken.sum()), points.weight))
    mass, right = np.concatenate(mass), np.concatenate(right).astype(np.float64)
    if not len(mass):
        return {}
    depth, weight = np.concatenate(depth), np.concatenate(weight)
    return {int(d): isotonic(mass[depth == d], right[depth == d], weight[depth == d]) for d in np.unique(depth)}


def chains(calibration: NodeCalibration, tree: NodeTree, points: SetPoints,
           rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query row: the chain's probability per depth and whether each depth's node is right."""
    best, probability = calibration.batch_chains(tree, points.labels[rows], points.scores[rows])
    right = points.holds_gold(np.broadcast_to(rows[:, None], best.shape), best)
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

