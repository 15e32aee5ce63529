"""A boosted tree ensemble as flat arrays, walked by a numba kernel: the re-ranker's scorer,
served without the library that trained it (``qcat.training.rerank.trainer`` exports LightGBM's trees).

Every node of every tree is one entry of the arrays: an internal node splits on
``feature[node]``, going to ``left[node]`` when the value is ``<= threshold[node]``, else to
``right[node]``; a leaf has ``feature == -1`` and adds ``value[node]`` to the row's score.
Internal nodes keep their mean output in ``value`` too, so :meth:`TreeEnsemble.contributions`
can say which features moved a score (each split's change of value, charged to its feature).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

TREE_ARRAYS = ("roots", "feature", "threshold", "left", "right", "value")


@dataclass(frozen=True)
class TreeEnsemble:
    roots: np.ndarray  # int64 per tree: its root node
    feature: np.ndarray  # int32 per node, -1 at a leaf
    threshold: np.ndarray  # float64
    left: np.ndarray  # int64
    right: np.ndarray  # int64
    value: np.ndarray  # float64: a leaf's output; an internal node's mean output
    n_features: int

    def score(self, rows: np.ndarray) -> np.ndarray:
        """The summed leaf values of each row of ``rows`` (float64, ``(n, n_features)``)."""
        return walk(np.ascontiguousarray(rows, dtype=np.float64), self.roots, self.feature, self.threshold,
                    self.left, self.right, self.value)

    def contributions(self, row: np.ndarray) -> np.ndarray:
        """Per feature, how much the splits on it moved ``row``'s score (the rest is the trees'
        root values): the path attribution of each tree, summed."""
        out = np.zeros(self.n_features)
        for root in self.roots.tolist():
            node = root
            while self.feature[node] >= 0:
                child = self.left[node] if row[self.feature[node]] <= self.threshold[node] else self.right[node]
                out[self.feature[node]] += self.value[child] - self.value[node]
                node = child
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {f"tree_{name}": getattr(self, name) for name in TREE_ARRAYS}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], n_features: int) -> "TreeEnsemble":
        """Read :meth:`arrays`' output back; ValueError when they do not form trees."""
        try:
            ensemble = cls(arrays["tree_roots"].astype(np.int64), arrays["tree_feature"].astype(np.int32),
                           arrays["tree_threshold"].astype(np.float64), arrays["tree_left"].astype(np.int64),
                           arrays["tree_right"].astype(np.int64), arrays["tree_value"].astype(np.float64), n_features)
        except KeyError as exc:
            raise ValueError(f"no array {exc}") from None
        n = len(ensemble.feature)
        internal = ensemble.feature >= 0
        if (any(getattr(ensemble, name).ndim != 1 for name in TREE_ARRAYS)
                or any(len(getattr(ensemble, name)) != n for name in TREE_ARRAYS[2:]) or np.any(ensemble.feature >= n_features)
                or np.any((ensemble.roots < 0) | (ensemble.roots >= n))
                or np.any(internal & ((ensemble.left <= np.arange(n)) | (ensemble.left >= n)))
                or np.any(internal & ((ensemble.right <= np.arange(n)) | (ensemble.right >= n)))):
            raise ValueError("node arrays of unequal length, or children that do not point forward inside them")
        return ensemble


@njit(cache=True, nogil=True)
def walk(rows, roots, feature, threshold, left, right, value):
    """Sum over the trees of the leaf each row reaches (children always follow their parent,
    so every walk ends)."""
    out = np.zeros(rows.shape[0])
    for i in range(rows.shape[0]):
        total = 0.0
        for t in range(roots.shape[0]):
            node = roots[t]
            while feature[node] >= 0:
                if rows[i, feature[node]] <= threshold[node]:
                    node = left[node]
                else:
                    node = right[node]
            total += value[node]
        out[i] = total
    return out
