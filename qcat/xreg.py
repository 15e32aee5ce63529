"""XReg inference (Prabhu et al., WSDM 2020 §4): label trees with relevance-weighted
logistic regressors, served with numpy only.

- Features: tf-idf over the normalized query's unigrams and bigrams
  (:func:`qcat.nb.query_features`), L2-normalized (:class:`TfidfFeatures`).
- Each of the T trees is a complete binary tree of ``depth`` levels in heap order (node
  ``g`` has children ``2g+1`` and ``2g+2``); its leaves hold at most M labels. Every edge
  into a node has a logistic regressor giving the probability of visiting the child once
  the parent is visited; every label of a leaf has one giving its relevance once the leaf
  is visited. A label's relevance is the product along its path (§4.2).
- Pointwise inference (§4.3): beam search keeping the P most probable nodes per level,
  vectorized over a batch; the trees' estimates are averaged (a label a tree's beam did not
  reach counts 0 for that tree).
- Labelwise inference (§4.4, Algorithm 1): for one label, walk its path in each tree and
  keep at each node the ``F · frac(n) · M`` most probable of the M queries, where frac(n)
  is the share of training points that reach node n.
- XReg-t (§5, propensity paper §6.2): the top ``shortlist`` labels are re-ranked by
  ``s_l = α log P_xreg + (1 − α) log P_tail`` with PfastreXML's tail classifier
  ``P_tail = 1 / (1 + exp(γ/2 ‖x − μ_l‖²))``, μ_l the mean of the label's training points;
  the reported score is ``exp(s_l)``.

Weights are kept per *group* of regressors (a node's two child edges, or a leaf's labels),
keyed by ``group · D + feature`` in one sorted int64 array: scoring a batch of (query, group)
pairs is a ``searchsorted`` plus a ``bincount``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qcat.bundle import Manifest, load_arrays, load_labels, load_vocabulary, save_lines, write_bundle
from qcat.calibration import Calibration, calibrated, describe, load_calibration, save_calibration
from qcat.errors import BundleError, InputError
from qcat.model import Predictions, top_k, top_k_sparse
from qcat.nb import normalized_tokens, query_features
from qcat.sparse_rows import Rows, ranges
from qcat.taxonomy import Taxonomy

BACKEND = "xreg"
ARRAYS_FILE = "xreg.npz"
VOCABULARY_FILE = "vocabulary.txt"
LABELS_FILE = "labels.txt"
BATCH = 4096
DENSE_CELLS = 1 << 22  # (queries x labels) cells summed densely at once
TREE_ARRAYS = ("leaf_indptr", "leaf_labels", "reg_bias", "keys", "key_ptr", "entry_offset", "entry_weight", "node_frac")


# -- features --------------------------------------------------------------------------


@dataclass(frozen=True)
class TfidfFeatures:
    """tf-idf of a query's unigrams and bigrams: ``count · idf``, L2-normalized per query.

    Features outside the vocabulary are ignored; a query with none is the zero vector.
    """

    vocabulary: tuple[str, ...]
    idf: np.ndarray  # float32 (D,)
    _index: dict = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {feature: i for i, feature in enumerate(self.vocabulary)})

    @property
    def dimension(self) -> int:
        return len(self.vocabulary)

    def known(self, tokens: Sequence[str]) -> tuple[list[str], list[str]]:
        features = query_features(tokens)
        return [f for f in features if f in self._index], [f for f in features if f not in self._index]

    def transform(self, token_lists: Sequence[Sequence[str]]) -> Rows:
        ids_per_query = [[i for i in (self._index.get(f) for f in query_features(t)) if i is not None]
                         for t in token_lists]
        counts = np.fromiter((len(ids) for ids in ids_per_query), dtype=np.int64, count=len(ids_per_query))
        flat = np.fromiter((i for ids in ids_per_query for i in ids), dtype=np.int64, count=int(counts.sum()))
        rows = np.repeat(np.arange(len(ids_per_query), dtype=np.int64), counts)
        # Sum repeated features of a query (term counts), keep each row's features sorted.
        key, tf = np.unique(rows * max(self.dimension, 1) + flat, return_counts=True)
        rows, features = key // max(self.dimension, 1), key % max(self.dimension, 1)
        values = tf * self.idf[features].astype(np.float64)
        norms = np.sqrt(np.bincount(rows, weights=values * values, minlength=len(ids_per_query)))
        values = values / norms[rows]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(ids_per_query)))]).astype(np.int64)
        return Rows(indptr, features.astype(np.int64), values)


# -- trees -----------------------------------------------------------------------------


def log_sigmoid(u: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -u)


@dataclass(frozen=True)
class LabelTree:
    """One trained label tree (see the module docstring for the layout).

    Regressor ``r`` of group ``g``: for an internal node the edges into its children
    (regressor ``c - 1`` for child ``c``), for leaf ``l`` its label slots
    (regressor ``n_nodes - 1 + leaf_indptr[l] + slot``).
    """

    depth: int
    n_features: int
    leaf_indptr: np.ndarray  # int64 (leaves + 1,)
    leaf_labels: np.ndarray  # int32: label of every leaf slot
    reg_bias: np.ndarray  # float32 (edges + slots,)
    keys: np.ndarray  # int64, sorted: group * n_features + feature
    key_ptr: np.ndarray  # int64 (len(keys) + 1,): entries of each key
    entry_offset: np.ndarray  # int32: regressor within its group
    entry_weight: np.ndarray  # float32
    node_frac: np.ndarray  # float32 (nodes,): share of training points reaching each node
    _bias: np.ndarray = field(default=None, repr=False, compare=False)  # (nodes, width), -inf pads

    @property
    def n_internal(self) -> int:
        return 2 ** self.depth - 1

    @property
    def n_nodes(self) -> int:
        return 2 ** (self.depth + 1) - 1

    @property
    def n_leaves(self) -> int:
        return 2 ** self.depth

    @property
    def leaf_width(self) -> int:
        return int(np.diff(self.leaf_indptr).max()) if len(self.leaf_indptr) > 1 else 0

    def group_start(self, groups: np.ndarray) -> np.ndarray:
        """First regressor of each group."""
        is_leaf = groups >= self.n_internal
        leaf_start = self.n_nodes - 1 + self.leaf_indptr[np.where(is_leaf, groups - self.n_internal, 0)]
        return np.where(is_leaf, leaf_start, 2 * groups)

    def group_size(self, groups: np.ndarray) -> np.ndarray:
        is_leaf = groups >= self.n_internal
        leaves = np.where(is_leaf, groups - self.n_internal, 0)
        return np.where(is_leaf, self.leaf_indptr[leaves + 1] - self.leaf_indptr[leaves], 2)

    def scores(self, rows: Rows, queries: np.ndarray, groups: np.ndarray, width: int) -> np.ndarray:
        """``w·x + b`` of every regressor of ``groups[p]`` for query ``queries[p]``:
        ``(pairs, width)``, ``-inf`` past a group's size."""
        pairs = len(queries)
        pair_of, values, where = rows.keyed_lookup(queries, groups, self.n_features, self.keys)
        entry_starts = self.key_ptr[where]
        entry_counts = self.key_ptr[where + 1] - entry_starts
        entries = ranges(entry_starts, entry_counts)
        pair_of, values = np.repeat(pair_of, entry_counts), np.repeat(values, entry_counts)
        offsets = self.entry_offset[entries]
        inside = offsets < width  # a caller may ask for the first ``width`` regressors only
        cells = pair_of[inside] * width + offsets[inside]
        contributions = values[inside] * self.entry_weight[entries[inside]]
        out = np.bincount(cells, weights=contributions, minlength=pairs * width).reshape(pairs, width)
        return out + self.bias_table()[groups, :width]

    def bias_table(self) -> np.ndarray:
        """Each group's regressor biases, padded with -inf to the widest group (cached)."""
        if self._bias is None:
            groups = np.arange(self.n_nodes)
            width = max(2, self.leaf_width)
            slot = np.arange(width)[None, :]
            valid = slot < self.group_size(groups)[:, None]
            index = np.where(valid, self.group_start(groups)[:, None] + slot, 0)
            object.__setattr__(self, "_bias", np.where(valid, self.reg_bias[index].astype(np.float64), -np.inf))
        return self._bias

    def beam_search(self, rows: Rows, beam: int,
                    tree_of_row: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pointwise inference: (query, label, log probability) of every label in the P
        leaves each query's beam ends in. On a ``stacked`` ensemble, row ``i`` is searched in
        tree ``tree_of_row[i]``."""
        n = rows.n
        trees = np.zeros(n, dtype=np.int64) if tree_of_row is None else np.asarray(tree_of_row, dtype=np.int64)
        group_base, leaf_base = trees * self.n_nodes, trees * self.n_leaves
        nodes = np.zeros((n, 1), dtype=np.int64)
        logp = np.zeros((n, 1))
        for _ in range(self.depth):
            q, b = np.nonzero(np.isfinite(logp))
            child_logp = logp[q, b][:, None] + log_sigmoid(self.scores(rows, q, group_base[q] + nodes[q, b], 2))
            width = 2 * nodes.shape[1]
            candidates = np.full((n, width), -np.inf)
            candidate_nodes = np.zeros((n, width), dtype=np.int64)
            for j in (0, 1):
                candidates[q, 2 * b + j] = child_logp[:, j]
                candidate_nodes[q, 2 * b + j] = 2 * nodes[q, b] + 1 + j
            keep = np.argsort(-candidates, axis=1, kind="stable")[:, :beam]
            logp = np.take_along_axis(candidates, keep, axis=1)
            nodes = np.take_along_axis(candidate_nodes, keep, axis=1)
        q, b = np.nonzero(np.isfinite(logp))
        leaves = nodes[q, b]
        width = self.leaf_width
        label_logp = logp[q, b][:, None] + log_sigmoid(self.scores(rows, q, group_base[q] + leaves, width))
        slot_start = self.leaf_indptr[leaf_base[q] + leaves - self.n_internal]
        pair, slot = np.nonzero(np.isfinite(label_logp))
        return q[pair], self.leaf_labels[slot_start[pair] + slot].astype(np.int64), label_logp[pair, slot]

    @classmethod
    def stacked(cls, trees: Sequence["LabelTree"]) -> "LabelTree":
        """An ensemble of trees of one depth as one tree-shaped array set: tree t's group g
        becomes ``t · n_nodes + g`` and its leaf l ``t · n_leaves + l``, so that one beam
        search (with ``tree_of_row``) serves every tree, with the numpy calls of one."""
        first = trees[0]
        entries = np.cumsum([0] + [len(t.entry_weight) for t in trees])
        slots = np.cumsum([0] + [len(t.leaf_labels) for t in trees])
        bias = np.full((len(trees) * first.n_nodes, max(max(2, t.leaf_width) for t in trees)), -np.inf)
        for i, tree in enumerate(trees):
            table = tree.bias_table()
            bias[i * first.n_nodes:(i + 1) * first.n_nodes, :table.shape[1]] = table
        return cls(
            depth=first.depth, n_features=first.n_features,
            leaf_indptr=np.concatenate([[0]] + [t.leaf_indptr[1:] + slots[i] for i, t in enumerate(trees)]).astype(np.int64),
            leaf_labels=np.concatenate([t.leaf_labels for t in trees]),
            reg_bias=np.concatenate([t.reg_bias for t in trees]),
            keys=np.concatenate([t.keys + i * first.n_nodes * first.n_features for i, t in enumerate(trees)]),
            key_ptr=np.concatenate([[0]] + [t.key_ptr[1:] + entries[i] for i, t in enumerate(trees)]).astype(np.int64),
            entry_offset=np.concatenate([t.entry_offset for t in trees]),
            entry_weight=np.concatenate([t.entry_weight for t in trees]),
            node_frac=np.concatenate([t.node_frac for t in trees]),
            _bias=bias)

    def label_path(self, label: int) -> tuple[np.ndarray, int, int]:
        """Nodes from the root to the leaf holding ``label``, its leaf and slot there."""
        slots = np.nonzero(self.leaf_labels == label)[0]
        if len(slots) == 0:
            return np.zeros(0, dtype=np.int64), -1, -1
        position = int(slots[0])
        leaf = int(np.searchsorted(self.leaf_indptr, position, side="right") - 1)
        node = self.n_internal + leaf
        path = [node]
        while node > 0:
            node = (node - 1) // 2
            path.append(node)
        return np.array(path[::-1], dtype=np.int64), leaf, position - int(self.leaf_indptr[leaf])

    def labelwise(self, rows: Rows, label: int, factor: float) -> tuple[np.ndarray, np.ndarray]:
        """Algorithm 1 along one label's path: (queries kept at its leaf, their relevance)."""
        path, leaf, slot = self.label_path(label)
        points = np.arange(rows.n, dtype=np.int64)
        if len(path) == 0:
            return points[:0], np.zeros(0)
        z = np.ones(rows.n)
        for parent, child in zip(path[:-1], path[1:]):
            s = self.scores(rows, points, np.full(len(points), parent), 2)[:, child - (2 * parent + 1)]
            z = z * np.exp(log_sigmoid(s))
            retain = min(len(points), math.ceil(factor * float(self.node_frac[child]) * rows.n))
            keep = np.argsort(-z, kind="stable")[:retain]
            points, z = points[keep], z[keep]
        group = np.full(len(points), self.n_internal + leaf)
        s = self.scores(rows, points, group, slot + 1)[:, slot]
        return points, z * np.exp(log_sigmoid(s))

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """Arrays to store, compactly: keys as gaps, offsets in the narrowest unsigned type,
        weights in float16 (a relative error of 5e-4, far below the regressors' own)."""
        arrays = {f"{prefix}{name}": getattr(self, name) for name in TREE_ARRAYS if name != "keys"}
        gaps = np.diff(self.keys, prepend=0)
        arrays[f"{prefix}key_gaps"] = gaps.astype(np.min_scalar_type(int(gaps.max(initial=0))))
        arrays[f"{prefix}entry_offset"] = self.entry_offset.astype(np.min_scalar_type(int(self.entry_offset.max(initial=0))))
        arrays[f"{prefix}entry_weight"] = self.entry_weight.astype(np.float16)
        arrays[f"{prefix}shape"] = np.array([self.depth, self.n_features], dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> "LabelTree":
        depth, n_features = (int(v) for v in arrays[f"{prefix}shape"])
        tree = {name: arrays[f"{prefix}{name}"] for name in TREE_ARRAYS if name != "keys"}
        gaps = arrays.get(f"{prefix}key_gaps")  # older bundles stored the keys themselves
        tree["keys"] = arrays[f"{prefix}keys"] if gaps is None else np.cumsum(gaps, dtype=np.int64)
        tree["entry_offset"], tree["entry_weight"] = tree["entry_offset"].astype(np.int32), tree["entry_weight"].astype(np.float32)
        return cls(depth=depth, n_features=n_features, **tree)

    def problems(self, n_labels: int) -> list[str]:
        """What is inconsistent in the arrays (empty when they fit together)."""
        problems = []
        if not 0 <= self.depth <= 40:
            return [f"depth {self.depth}"]
        n_slots, n_regs = len(self.leaf_labels), self.n_nodes - 1 + len(self.leaf_labels)
        if len(self.leaf_indptr) != self.n_leaves + 1 or self.leaf_indptr[0] != 0 or self.leaf_indptr[-1] != n_slots \
                or np.any(np.diff(self.leaf_indptr) < 0):
            problems.append("leaf index pointers")
        if n_slots and (self.leaf_labels.min() < 0 or self.leaf_labels.max() >= n_labels):
            problems.append("leaf labels out of range")
        if len(self.reg_bias) != n_regs or len(self.node_frac) != self.n_nodes:
            problems.append("regressor or node array lengths")
        if len(self.key_ptr) != len(self.keys) + 1 or len(self.entry_offset) != len(self.entry_weight) \
                or (len(self.key_ptr) and (self.key_ptr[0] != 0 or self.key_ptr[-1] != len(self.entry_weight))):
            problems.append("weight index pointers")
        if len(self.keys) and (np.any(np.diff(self.keys) <= 0) or self.keys[0] < 0
                               or self.keys[-1] >= self.n_nodes * self.n_features):
            problems.append("weight keys unsorted or out of range")
        if len(self.entry_offset) and (self.entry_offset.min() < 0 or self.entry_offset.max() >= max(self.leaf_width, 2)):
            problems.append("weight offsets out of range")
        return problems


# -- tail classifiers (PfastreXML) -------------------------------------------------------


@dataclass(frozen=True)
class TailClassifiers:
    """μ_l as sparse rows keyed by ``label · D + feature`` (sorted), with ‖μ_l‖²."""

    keys: np.ndarray  # int64
    values: np.ndarray  # float32
    sq_norm: np.ndarray  # float32 (L,)
    n_features: int

    def log_prob(self, rows: Rows, queries: np.ndarray, labels: np.ndarray, gamma: float) -> np.ndarray:
        """``log P_tail(l | x) = -log(1 + exp(γ/2 ‖x - μ_l‖²))`` for each (query, label) pair."""
        pair_of, values, where = rows.keyed_lookup(queries, labels, self.n_features, self.keys)
        dots = np.bincount(pair_of, weights=values * self.values[where], minlength=len(queries))
        x_sq = np.bincount(np.repeat(np.arange(rows.n), np.diff(rows.indptr)), weights=rows.data ** 2, minlength=rows.n)
        distance = np.maximum(x_sq[queries] + self.sq_norm[labels] - 2.0 * dots, 0.0)
        return -np.logaddexp(0.0, 0.5 * gamma * distance)


# -- the model -------------------------------------------------------------------------


@dataclass
class XRegModel:
    """An XReg ensemble over tf-idf features, with PfastreXML tail classifiers for XReg-t."""

    labels: tuple[str, ...]
    taxonomy: Taxonomy
    features: TfidfFeatures
    trees: tuple[LabelTree, ...]
    tail: TailClassifiers
    config: dict
    metrics: dict
    calibration: Calibration | None = None
    backend: str = BACKEND

    # -- options -------------------------------------------------------------------

    @property
    def beam(self) -> int:
        return int(self.config.get("beam", 10))

    @property
    def rerank(self) -> bool:
        return bool(self.config.get("rerank", False))

    def with_options(self, **options) -> "XRegModel":
        """A copy with some serving options (beam, rerank, alpha, gamma, shortlist) changed."""
        unknown = set(options) - {"beam", "rerank", "alpha", "gamma", "shortlist"}
        if unknown:
            raise ValueError(f"unknown XReg serving options {sorted(unknown)}")
        return replace(self, config=self.config | {k: v for k, v in options.items() if v is not None})

    # -- pointwise inference ---------------------------------------------------------

    def transform(self, queries: Sequence[str]) -> Rows:
        return self.features.transform([normalized_tokens(q) for q in queries])

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for start in range(0, len(queries), BATCH):
            part_labels, part_scores = self.predict_rows(self.transform(queries[start:start + BATCH]), k)
            labels[start:start + len(part_labels)] = part_labels
            scores[start:start + len(part_labels)] = part_scores
        source = "xreg-t" if self.rerank else "xreg"
        return calibrated(self.calibration, Predictions(labels, scores, (source,) * len(queries)), queries)

    def uncalibrated(self) -> "XRegModel":
        return replace(self, calibration=None)

    def relevance(self, rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, label, relevance) for every label some tree's beam reached: the trees'
        estimates averaged, 0 for a tree that did not reach it."""
        query, label, prob = self._reached(rows)
        key, inverse = np.unique(query * len(self.labels) + label, return_inverse=True)
        return key // len(self.labels), key % len(self.labels), np.bincount(inverse, weights=prob)

    def _reached(self, rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query, label, probability / T) of every label some tree's beam reached, tree by tree."""
        n_trees = len(self.trees)
        if self._stacked is not None:  # every tree in one beam search over the rows repeated T times
            tiled = rows.take(np.tile(np.arange(rows.n), n_trees))
            query, label, logp = self._stacked.beam_search(tiled, self.beam, np.repeat(np.arange(n_trees), rows.n))
            return query % rows.n, label, np.exp(logp) / n_trees
        found = [tree.beam_search(rows, self.beam) for tree in self.trees]
        query = np.concatenate([f[0] for f in found])
        label = np.concatenate([f[1] for f in found])
        return query, label, np.exp(np.concatenate([f[2] for f in found])) / n_trees

    @functools.cached_property
    def _stacked(self) -> LabelTree | None:
        """The trees as one (see ``LabelTree.stacked``) when there are several of one shape."""
        if len(self.trees) < 2 or len({(t.depth, t.n_features) for t in self.trees}) > 1:
            return None
        return LabelTree.stacked(self.trees)

    def top_relevance(self, rows: Rows, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k most relevant labels of each row (``-1`` / 0 where fewer were reached).

        With few labels (at most four times what the beams can reach per query) the trees'
        estimates are summed into a dense ``(n, L)`` block, chunk by chunk, and ranked with
        :func:`qcat.model.top_k`; otherwise the reached (query, label) pairs are sorted."""
        n_labels = len(self.labels)
        reachable = sum(self.beam * max(tree.leaf_width, 1) for tree in self.trees)
        if n_labels > 4 * reachable:
            return top_k_sparse(*self.relevance(rows), rows.n, k)
        labels = np.full((rows.n, k), -1, dtype=np.int32)
        scores = np.zeros((rows.n, k), dtype=np.float32)
        chunk = max(1, DENSE_CELLS // n_labels)
        for start in range(0, rows.n, chunk):
            part = rows.take(np.arange(start, min(start + chunk, rows.n)))
            query, label, prob = self._reached(part)
            dense = np.bincount(query * n_labels + label, weights=prob, minlength=part.n * n_labels)
            top_labels, top_scores = top_k(dense.reshape(part.n, n_labels), k)
            width = top_labels.shape[1]
            labels[start:start + part.n, :width] = np.where(top_scores > 0, top_labels, -1)
            scores[start:start + part.n, :width] = top_scores
        return labels, scores

    def predict_rows(self, rows: Rows, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (labels, scores) of feature rows: XReg's relevance estimates, or with
        ``rerank`` XReg-t's ``exp(s_l)`` over the top ``shortlist`` labels."""
        if not self.rerank:
            return self.top_relevance(rows, k)
        top_labels, top_scores = self.top_relevance(rows, int(self.config.get("shortlist", 100)))
        query, slot = np.nonzero(top_labels >= 0)
        label = top_labels[query, slot].astype(np.int64)
        alpha = float(self.config.get("alpha", 0.8))
        tail = self.tail.log_prob(rows, query, label, float(self.config.get("gamma", 30.0)))
        combined = alpha * np.log(top_scores[query, slot].astype(np.float64)) + (1.0 - alpha) * tail
        return top_k_sparse(query, label, np.exp(combined), rows.n, k)

    # -- labelwise inference -----------------------------------------------------------

    def labelwise(self, label: str, queries: Sequence[str], n: int, factor: float = 4.0) -> list[tuple[int, float]]:
        """The ``n`` queries most relevant to category ``label`` (Algorithm 1): (position in
        ``queries``, estimated relevance), best first, ties to the earlier query."""
        if label not in self.labels:
            raise InputError(f"category {label!r} is not one of this model's {len(self.labels):,} categories")
        rows = self.transform(queries)
        return self.labelwise_rows(rows, self.labels.index(label), n, factor)

    def labelwise_rows(self, rows: Rows, label: int, n: int, factor: float) -> list[tuple[int, float]]:
        total = np.zeros(rows.n)
        for tree in self.trees:
            points, relevance = tree.labelwise(rows, label, factor)
            np.add.at(total, points, relevance / len(self.trees))
        order = np.lexsort((np.arange(rows.n), -total))
        return [(int(i), float(total[i])) for i in order[:n] if total[i] > 0]

    def explain(self, query: str, k: int) -> list[str]:
        tokens = normalized_tokens(query)
        known, unknown = self.features.known(tokens)
        mode = (f"XReg-t: top {self.config.get('shortlist', 100)} re-ranked with tail classifiers "
                f"(alpha {self.config.get('alpha', 0.8)}, gamma {self.config.get('gamma', 30.0)})") if self.rerank else "XReg"
        lines = [f"xreg: {mode}; beam search over {len(self.trees)} label tree(s) with beam {self.beam}; "
                 f"scores are estimated click-through rates (relevance) averaged over the trees"]
        if known:
            lines.append(f"  tf-idf features: {', '.join(repr(f) for f in known)}")
        else:
            lines.append("  no feature of the query is in the vocabulary: scores come from the regressors' biases")
        if unknown:
            lines.append(f"  ignored (not in the vocabulary): {', '.join(repr(f) for f in unknown)}")
        return lines + [describe(self.calibration, "xreg-t" if self.rerank else "xreg")]

    # -- persistence -------------------------------------------------------------------

    def size_bytes(self) -> int:
        arrays = [self.features.idf, self.tail.keys, self.tail.values, self.tail.sq_norm]
        arrays += [getattr(t, name) for t in self.trees for name in TREE_ARRAYS]
        return int(sum(a.nbytes for a in arrays))

    def save(self, directory: str | Path) -> Manifest:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        vocabulary_hash = save_lines(directory / VOCABULARY_FILE, list(self.features.vocabulary))
        save_lines(directory / LABELS_FILE, list(self.labels))
        arrays = {"idf": self.features.idf, "tail_keys": self.tail.keys, "tail_values": self.tail.values,
                  "tail_sq_norm": self.tail.sq_norm, "n_trees": np.array(len(self.trees))}
        for t, tree in enumerate(self.trees):
            arrays |= tree.to_arrays(f"tree{t}_")
        np.savez_compressed(directory / ARRAYS_FILE, **arrays)
        save_calibration(self.calibration, directory)
        return write_bundle(directory, BACKEND, self.taxonomy, vocabulary_hash, self.config, self.metrics)

    @classmethod
    def from_manifest(cls, manifest: Manifest, taxonomy: Taxonomy) -> "XRegModel":
        arrays = load_arrays(manifest, ARRAYS_FILE)
        vocabulary = load_vocabulary(manifest, VOCABULARY_FILE)
        labels = load_labels(manifest, LABELS_FILE, taxonomy)
        try:
            trees = tuple(LabelTree.from_arrays(arrays, f"tree{t}_") for t in range(int(arrays["n_trees"])))
            tail = TailClassifiers(arrays["tail_keys"], arrays["tail_values"], arrays["tail_sq_norm"], len(vocabulary))
            features = TfidfFeatures(tuple(vocabulary), arrays["idf"])
        except KeyError as exc:
            raise BundleError(f"model bundle {manifest.directory}: {ARRAYS_FILE} lacks array {exc}") from None
        model = cls(labels=labels, taxonomy=taxonomy, features=features, trees=trees, tail=tail,
                    config=manifest.config, metrics=manifest.metrics, calibration=load_calibration(manifest))
        model.check_shapes(manifest.directory)
        return model

    def check_shapes(self, where: Path | str) -> None:
        n_labels, n_features = len(self.labels), self.features.dimension
        problems = []
        if self.features.idf.shape != (n_features,):
            problems.append("idf length")
        if not self.trees:
            problems.append("no trees")
        for t, tree in enumerate(self.trees):
            if tree.n_features != n_features:
                problems.append(f"tree {t}: feature count")
            problems.extend(f"tree {t}: {p}" for p in tree.problems(n_labels))
        tail = self.tail
        if tail.sq_norm.shape != (n_labels,) or tail.keys.shape != tail.values.shape:
            problems.append("tail classifier lengths")
        elif len(tail.keys) and (np.any(np.diff(tail.keys) <= 0) or tail.keys[0] < 0 or tail.keys[-1] >= n_labels * n_features):
            problems.append("tail classifier keys unsorted or out of range")
        if problems:
            raise BundleError(f"model bundle {where}: inconsistent arrays ({', '.join(problems)})")
