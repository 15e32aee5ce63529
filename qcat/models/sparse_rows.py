"""Sparse feature rows in CSR form and the vectorized index arithmetic over them, shared by
the NB and XReg backends (numpy only)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``, vectorized."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(np.asarray(starts, dtype=np.int64), lengths) + offsets


@dataclass(frozen=True)
class Rows:
    """A batch of sparse feature rows in CSR form."""

    indptr: np.ndarray  # int64 (n + 1,)
    indices: np.ndarray  # int64
    data: np.ndarray  # float64

    @property
    def n(self) -> int:
        return len(self.indptr) - 1

    def take(self, rows: np.ndarray) -> "Rows":
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        positions = ranges(starts, ends - starts)
        return Rows(np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int64),
                    self.indices[positions], self.data[positions])

    def keyed_lookup(self, queries: np.ndarray, prefixes: np.ndarray, n_features: int,
                     keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Find every feature ``f`` of row ``queries[p]`` under the key ``prefixes[p] · D + f``
        in the sorted ``keys``. Returns, for the features found: the pair ``p``, the feature
        value, and the key's position in ``keys``."""
        starts, ends = self.indptr[queries], self.indptr[queries + 1]
        lengths = ends - starts
        positions = ranges(starts, lengths)
        pair_of = np.repeat(np.arange(len(queries), dtype=np.int64), lengths)
        wanted = np.repeat(np.asarray(prefixes, dtype=np.int64), lengths) * n_features + self.indices[positions]
        where = np.searchsorted(keys, wanted)
        found = where < len(keys)
        found[found] = keys[where[found]] == wanted[found]
        return pair_of[found], self.data[positions[found]], where[found]
