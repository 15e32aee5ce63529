"""XReg's label trees (Prabhu et al., WSDM 2020 §4), served with numpy only.

Each tree is a complete binary tree of ``depth`` levels in heap order (node ``g`` has children
``2g+1`` and ``2g+2``); its leaves hold at most M labels. Every edge into a node has a logistic
regressor giving the probability of visiting the child once the parent is visited; every label
of a leaf has one giving its relevance once the leaf is visited. A label's relevance is the
product along its path (§4.2). Pointwise inference is a beam search keeping the P most probable
nodes per level (§4.3); labelwise inference walks one label's path (§4.4, Algorithm 1).

Weights are kept per *group* of regressors (a node's two child edges, or a leaf's labels),
keyed by ``group · D + feature`` in one sorted int64 array: scoring a batch of (query, group)
pairs is a ``searchsorted`` plus a ``bincount``. :class:`qcat.models.xreg.XRegModel` averages the trees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from qcat.models.sparse_rows import Rows, ranges

TREE_ARRAYS = ("leaf_indptr", "leaf_labels", "reg_bias", "keys", "key_ptr", "entry_offset", "entry_weight", "node_frac")


def log_sigmoid(u: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -u)


@dataclass(frozen=True)
class LabelTree:
    """One trained label tree (the layout is in the module docstring).

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
