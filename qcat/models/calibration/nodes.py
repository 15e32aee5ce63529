"""Node answers: the deepest taxonomy node a query's category lies beneath, at a stated precision.

A model's top :attr:`NodeCalibration.top_k` leaf scores (calibrated probabilities where the model
calibrates them) are summed up the tree: a node's *mass* is the sum of the scores beneath it,
divided by the sum of all of them or by :data:`MASS_FLOOR` where that sum is smaller. A
department's mass is the sum of its children's; the departments' masses sum to 1, or to less for
a query whose scores are all small (a query of unknown words: "dior gaudron" against the demo
model, top score 0.04, holds 0.07 anywhere rather than 1 under its top leaf). A node's *probability* that the
query's category lies beneath it is its mass through an isotonic map of its depth (fitted on
validation queries: "the gold leaf is beneath this node" against the node's mass), raised to the
highest probability among its children, so that a parent is never less likely than a child. The
implicit root above the departments holds 1. A node outside the top leaves' ancestors has mass 0
and probability 0.

The answer at precision P walks down from the root, taking at each depth the most probable child
of the node it stands on, and stops at the last node whose probability reaches the *threshold* of P
for the query's length (a leaf when the walk reaches one; none when no department reaches it): the
answer always lies beneath the most probable department, and a lower P only ever answers deeper on
the same path. The maps are
fitted on one half of the validation queries and the thresholds chosen on the other half (split
conformal: the thresholds are measured on queries the maps never saw), per query-length bin: the
lowest threshold at which, on every validation set
with enough queries of that length, the one-sided Clopper-Pearson lower bound (at
:attr:`NodeCalibration.confidence`) of the answers' precision is at least P, scanning from the
highest threshold down and stopping at the first that fails. Where no threshold passes, the
data cannot support P for queries of that length, and the answer says so. Thresholds are kept
for P on :data:`LEVELS` (0.50 to 0.99); a P between two levels takes the next level up.

Fitted by :mod:`qcat.training.selection.nodes`, stored in the bundle as ``nodes.json`` (hashed
like every bundle file). Serving needs numpy only.
"""

from __future__ import annotations

import bisect
import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qcat.bundles.bundle import Manifest
from qcat.errors import BundleError, InputError
from qcat.taxonomy import SEPARATOR, Taxonomy

NODES_FILE = "nodes.json"
METHOD = "isotonic by depth; Clopper-Pearson thresholds per query-length bin"
TOP_K = 20  # leaves whose scores are summed up the tree (a blending hybrid's depth: one call answers both)
MASS_FLOOR = 0.5  # scores summing to less than this are divided by it, not by their sum
LEVELS = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))  # the precisions thresholds are kept for
LENGTH_EDGES = (1, 2, 5)  # the thresholds' length bins: 1, 2, 3-5 and 6+ tokens (titles in one bin)
ALL_LENGTHS = "all"  # the thresholds' key over all lengths (for a bin with too few validation queries)


def check_precision(precision: float | None) -> float | None:
    """``precision`` as every entry point takes it: None, or a number strictly between 0 and 1."""
    if precision is None:
        return None
    if isinstance(precision, bool) or not isinstance(precision, numbers.Real) or math.isnan(precision) \
            or not 0 < precision < 1:
        raise InputError(f"precision {precision!r}: must be a number strictly between 0 and 1 (e.g. 0.9)")
    return float(precision)


def level_index(precision: float) -> int | None:
    """The position in :data:`LEVELS` of the lowest level at least ``precision``, or None above 0.99."""
    position = bisect.bisect_left(LEVELS, precision - 1e-9)
    return position if position < len(LEVELS) else None


def bin_name(key: str) -> str:
    """``"2"`` -> ``"3-token queries"``: a thresholds key as a person reads it."""
    if key == ALL_LENGTHS:
        return "queries of any length"
    number, low = int(key), (0,) + LENGTH_EDGES
    first = low[number] + 1
    last = LENGTH_EDGES[number] if number < len(LENGTH_EDGES) else None
    span = f"{first}" if last == first else (f"{first}-{last}" if last else f"{first}+")
    return f"{span}-token queries"


class NodeTree:
    """The ancestors of a model's labels in its taxonomy, as arrays: ``ancestors[label]`` the
    taxonomy positions of the label's path, department first, ``-1`` padded to the deepest."""

    def __init__(self, taxonomy: Taxonomy, labels: tuple[str, ...]) -> None:
        self.taxonomy = taxonomy
        table, depth = taxonomy.ancestor_table()  # one row more: -1, no node
        self.depth = depth[:-1]
        self.parents = np.array(taxonomy.parents, dtype=np.int64)
        self.max_depth = table.shape[1]
        self.ancestors = table[[taxonomy.index(label) for label in labels]].reshape(len(labels), self.max_depth)
        self.size = len(self.depth)  # a batch numbers its (query, node) pairs query * size + node
        self._table = table

    def ancestor_rows(self, nodes) -> np.ndarray:
        """One row per node of ``nodes`` (taxonomy positions): its path's positions, department
        first, -1 padded."""
        return self._table[np.asarray(nodes, dtype=np.int64).reshape(-1)]

    def masses(self, labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One query's top leaves (label positions, -1 padded) and scores -> the nodes beneath
        which any of them lies (taxonomy positions, ascending) and each node's mass."""
        _, nodes, mass = self.batch_masses(labels[None], scores[None])
        return nodes, mass

    def batch_masses(self, labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`masses` of many queries (one row of top leaves a query), flat: ``(query, node,
        mass)``, sorted by query then node; each query's rows are what :meth:`masses` gives it, to the bit."""
        present = (labels >= 0) & (scores > 0)
        weights = np.where(present, scores, 0).astype(np.float64)
        total = np.cumsum(weights, axis=1)[:, -1] if weights.shape[1] else np.zeros(len(weights))  # in order, as the kernel sums
        present &= (total > 0)[:, None]
        chains = self.ancestors[np.where(present, labels, 0)]  # (query, leaf, depth)
        filled = (chains >= 0) & present[:, :, None]
        query = np.broadcast_to(np.arange(len(labels))[:, None, None], chains.shape)[filled]
        keys, inverse = np.unique(query * self.size + chains[filled], return_inverse=True)
        spread = np.broadcast_to((weights / np.maximum(total, MASS_FLOOR)[:, None])[:, :, None], chains.shape)[filled]
        return keys // self.size, keys % self.size, np.bincount(inverse, weights=spread, minlength=len(keys))


@dataclass(frozen=True)
class NodeAnswer:
    """The node a query was answered at, with its calibrated probability."""

    id: str
    path: str
    depth: int
    probability: float
    leaf: bool

    def to_json(self) -> dict:
        return {"id": self.id, "path": self.path, "depth": self.depth, "probability": round(self.probability, 6),
                "leaf": self.leaf}


@dataclass(frozen=True)
class NodeCalibration:
    """``maps[depth] = (x, y)``: knots of a non-decreasing map from a node's mass to its
    probability; ``thresholds[key][i]``: the probability a node needs for precision ``LEVELS[i]``
    (key: a length bin's number as text, or :data:`ALL_LENGTHS`), None where validation cannot
    support that precision."""

    maps: dict[int, tuple[np.ndarray, np.ndarray]]
    thresholds: dict[str, tuple[float | None, ...]]
    top_k: int = TOP_K
    confidence: float = 0.7
    fitted_on: dict | None = None

    def probabilities(self, tree: NodeTree, labels: np.ndarray,
                      scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(nodes, mass, probability) of one query's top leaves (the first ``top_k``): every node
        with mass, taxonomy positions ascending; probabilities nest (a parent's is at least each
        child's)."""
        _, nodes, mass, probability = self.batch_probabilities(tree, labels[None], scores[None])
        return nodes, mass, probability

    def batch_probabilities(self, tree: NodeTree, labels: np.ndarray,
                            scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`probabilities` of many queries, flat as :meth:`NodeTree.batch_masses`: ``(query,
        node, mass, probability)``."""
        query, nodes, mass = tree.batch_masses(labels[:, :self.top_k], scores[:, :self.top_k])
        probability = np.zeros(len(nodes))
        depth = tree.depth[nodes]
        for d in np.unique(depth).tolist():
            at = depth == d
            x, y = self.map_at(d)
            probability[at] = np.interp(mass[at], x, y)
        keys = query * tree.size + nodes
        parent_at = np.searchsorted(keys, query * tree.size + tree.parents[nodes])  # a node with mass has a parent with mass
        for d in range(int(depth.max()) if len(depth) else 0, 1, -1):
            children = np.flatnonzero(depth == d)
            np.maximum.at(probability, parent_at[children], probability[children])
        return query, nodes, mass, probability

    def map_at(self, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """The map of ``depth``, else that of the nearest depth fitted (the deeper on a tie)."""
        if depth in self.maps:
            return self.maps[depth]
        return self.maps[min(self.maps, key=lambda d: (abs(d - depth), -d))]

    def chain(self, tree: NodeTree, labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The path down from the root, one node per depth (1 first): the most probable department,
        then its most probable child, and so on (ties: the heavier, then the first; -1 past the
        path's end), and each node's probability. Probabilities nest, so they never rise along the
        path: the answer at a threshold is the last node of the path that reaches it, and every
        answer at a lower threshold lies beneath every answer at a higher one."""
        best, probability = self.batch_chains(tree, labels[None], scores[None])
        return best[0], probability[0]

    def batch_chains(self, tree: NodeTree, labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`chain` of many queries: ``(nodes, probability)``, one row a query (fitting the
        calibration walks every validation query's)."""
        query, nodes, mass, probability = self.batch_probabilities(tree, labels, scores)
        best = np.full((len(labels), tree.max_depth), -1, dtype=np.int64)
        best_probability = np.zeros((len(labels), tree.max_depth))
        depth, parent = tree.depth[nodes], tree.parents[nodes]
        current = np.full(len(labels), -1, dtype=np.int64)
        for d in range(1, tree.max_depth + 1):
            children = np.flatnonzero((depth == d) & (parent == current[query]))
            if len(children) == 0:
                break
            # each query's pick: the most probable, then the heavier, then the first
            ranked = children[np.lexsort((nodes[children], -mass[children], -probability[children], query[children]))]
            picks = ranked[np.unique(query[ranked], return_index=True)[1]]
            current[query[picks]] = nodes[picks]
            best[query[picks], d - 1], best_probability[query[picks], d - 1] = nodes[picks], probability[picks]
        return best, best_probability

    def compiled_chain(self, tree: NodeTree):
        """:meth:`chain` through the compiled kernel (:func:`qcat.models.kernels.node_chain`): the
        same nodes and probabilities, for the single-query path (``Classifier.compile``)."""
        from qcat.models import kernels

        maps = [self.map_at(d) for d in range(tree.max_depth + 1)]
        ends = np.cumsum([len(x) for x, _ in maps])
        arrays = (tree.ancestors, tree.depth, tree.parents, np.concatenate([x for x, _ in maps]),
                  np.concatenate([y for _, y in maps]), ends - [len(x) for x, _ in maps], ends)

        def chain(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return kernels.node_chain(labels, scores, self.top_k, *arrays, MASS_FLOOR)

        return chain

    def answer(self, tree: NodeTree, labels: np.ndarray, scores: np.ndarray, threshold: float,
               chain=None) -> NodeAnswer | None:
        """The deepest node whose probability reaches ``threshold``, or None (``chain``: the
        compiled :meth:`compiled_chain`, else :meth:`chain`)."""
        best, probability = chain(labels, scores) if chain is not None else self.chain(tree, labels, scores)
        reached = int((probability >= threshold).sum())
        if reached == 0:
            return None
        node, taxonomy = int(best[reached - 1]), tree.taxonomy
        return NodeAnswer(taxonomy.ids[node], SEPARATOR.join(taxonomy.paths[node]), int(tree.depth[node]),
                          float(probability[reached - 1]), taxonomy.is_leaf(taxonomy.ids[node]))

    def threshold_key(self, n_tokens: int) -> str:
        key = str(bisect.bisect_left(LENGTH_EDGES, n_tokens))
        return key if key in self.thresholds else ALL_LENGTHS

    def threshold(self, precision: float, n_tokens: int) -> float | None:
        """The probability a node needs to be answered at ``precision`` for a query of
        ``n_tokens`` tokens, or None where validation cannot support that precision."""
        level = level_index(precision)
        return None if level is None else self.thresholds[self.threshold_key(n_tokens)][level]

    def unsupported(self, precision: float, n_tokens: int) -> str:
        """Why no node can be answered at ``precision`` for a query of this length."""
        key = self.threshold_key(n_tokens)
        supported = [p for p, t in zip(LEVELS, self.thresholds[key]) if t is not None]
        most = f"at most {max(supported):.2f}" if supported else f"not even {LEVELS[0]:.2f}"
        return f"the validation data cannot support precision {precision:g} for {bin_name(key)} ({most})"

    def to_json(self) -> dict:
        return {"method": METHOD, "top_k": self.top_k, "mass_floor": MASS_FLOOR, "confidence": self.confidence,
                "levels": list(LEVELS),
                "length_edges": list(LENGTH_EDGES),
                "maps": {str(d): {"x": x.tolist(), "y": y.tolist()} for d, (x, y) in sorted(self.maps.items())},
                "thresholds": {key: list(values) for key, values in self.thresholds.items()},
                "fitted_on": self.fitted_on or {}}

    @classmethod
    def from_json(cls, data: dict, where: str) -> "NodeCalibration":
        try:
            maps = {int(d): (np.asarray(m["x"], dtype=np.float64), np.asarray(m["y"], dtype=np.float64))
                    for d, m in data["maps"].items()}
            thresholds = {str(key): tuple(None if t is None else float(t) for t in values)
                          for key, values in data["thresholds"].items()}
            top_k, confidence = int(data["top_k"]), float(data["confidence"])
            levels, edges = tuple(data["levels"]), tuple(data["length_edges"])
            floor = float(data["mass_floor"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BundleError(f"{where}: not a node calibration ({exc})") from None
        if (levels != LEVELS or edges != LENGTH_EDGES or floor != MASS_FLOOR or not maps
                or ALL_LENGTHS not in thresholds or top_k < 1):
            raise BundleError(f"{where}: not a node calibration this qcat reads (its levels, length bins, mass "
                              f"floor, maps, thresholds or top_k differ): fit it again with qcat train nodes")
        for depth, (x, y) in maps.items():
            if (x.ndim != 1 or x.shape != y.shape or len(x) == 0 or np.any(np.diff(x) < 0) or np.any(np.diff(y) < 0)
                    or not np.all(np.isfinite(x)) or np.any(y < 0) or np.any(y > 1)):
                raise BundleError(f"{where}: the map of depth {depth} is not a non-decreasing map into [0, 1]")
        for key, values in thresholds.items():
            if len(values) != len(LEVELS) or any(t is not None and not 0 <= t <= 1 for t in values):
                raise BundleError(f"{where}: the thresholds of {key!r} are not {len(LEVELS)} probabilities")
        return cls(maps, thresholds, top_k, confidence, data.get("fitted_on", {}))


@dataclass(frozen=True)
class NodeChains:
    """Many queries' chains at once (:meth:`NodeCalibration.chain`), to answer them at any precision
    without asking the model again: ``nodes[i, d]`` the taxonomy position of query i's most
    probable node at depth d + 1 (-1: none), ``probability[i, d]`` its probability,
    ``thresholds[i, j]`` what a node needs for precision ``LEVELS[j]`` at query i's length (NaN:
    validation cannot support it)."""

    nodes: np.ndarray  # int64 (n, max depth)
    probability: np.ndarray  # float64 (n, max depth)
    thresholds: np.ndarray  # float64 (n, len(LEVELS))

    def answers(self, precision: float) -> np.ndarray:
        """Each query's node at ``precision``: a taxonomy position, -1 for none (unsupported, or no
        department reaches it); the same nodes as :meth:`NodeCalibration.answer`."""
        level = level_index(check_precision(precision))
        threshold = self.thresholds[:, level] if level is not None else np.full(len(self.nodes), np.nan)
        with np.errstate(invalid="ignore"):
            reached = (self.probability >= threshold[:, None]).sum(axis=1)
        picked = np.take_along_axis(self.nodes, np.maximum(reached - 1, 0)[:, None], axis=1)[:, 0]
        return np.where(reached > 0, picked, -1)


def node_chains(calibration: NodeCalibration, tree: NodeTree, labels: np.ndarray, scores: np.ndarray,
                n_tokens: np.ndarray) -> NodeChains:
    """:class:`NodeChains` of a batch: its top leaves (label positions and scores, one row a query,
    best first) and each query's number of tokens, walked in one numpy batch
    (:meth:`NodeCalibration.batch_chains`: as fast as the compiled chain row by row, without numba)."""
    nodes, probability = calibration.batch_chains(tree, np.asarray(labels), np.asarray(scores))
    rows = {key: np.array([np.nan if t is None else t for t in values])
            for key, values in calibration.thresholds.items()}
    thresholds = np.array([rows[calibration.threshold_key(int(n))] for n in n_tokens]).reshape(len(nodes), len(LEVELS))
    return NodeChains(nodes, probability, thresholds)


def save_node_calibration(calibration: NodeCalibration | None, directory: str | Path) -> None:
    """Write ``nodes.json`` into a bundle directory (before its manifest is written)."""
    path = Path(directory) / NODES_FILE
    if calibration is None:
        path.unlink(missing_ok=True)
        return
    path.write_text(json.dumps(calibration.to_json(), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_node_calibration(manifest: Manifest) -> NodeCalibration | None:
    """The bundle's node calibration (verified with its other files by ``read_manifest``), or
    None for a bundle without one."""
    if NODES_FILE not in manifest.data["files"]:
        return None
    try:
        data = json.loads(manifest.file(NODES_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"model bundle {manifest.directory}: cannot read {NODES_FILE}: {exc}") from None
    return NodeCalibration.from_json(data, f"model bundle {manifest.directory}: {NODES_FILE}")


def describe_nodes(calibration: NodeCalibration | None) -> str:
    """One line on a fitted node calibration: what it was fitted on and the highest precision
    each query length can be promised."""
    if calibration is None:
        return "node calibration: none: this bundle cannot answer --precision (qcat train nodes adds one)"
    highest = []
    for key, values in calibration.thresholds.items():
        supported = [p for p, t in zip(LEVELS, values) if t is not None]
        highest.append(f"{bin_name(key)} {max(supported):.2f}" if supported else f"{bin_name(key)} none")
    sets = ", ".join(calibration.fitted_on.get("sets", {}))
    return (f"node calibration (--precision): depths {min(calibration.maps)}-{max(calibration.maps)} on the validation "
            f"sets {sets}; highest precision kept at confidence {calibration.confidence:g}: " + "; ".join(highest))


def no_node_calibration(directory) -> str:
    """The one line that refuses ``--precision`` for a bundle without ``nodes.json``."""
    return (f"model bundle {directory} has no node calibration, so it cannot answer --precision: retrain it "
            f"with this qcat, or add one: qcat train nodes --model {directory} --out NEW_DIR")
