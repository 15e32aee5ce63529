"""The protocol every backend implements, and the sparse top-k predictions it returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class Predictions:
    """Top-k predictions of a batch of queries.

    ``labels[i, j]`` is the position (in the model's ``labels``) of query ``i``'s ``j``-th
    category and ``scores[i, j]`` its score, best first; ``-1`` / ``0.0`` pad rows with
    fewer than k categories. ``sources[i]`` says which part of the model answered.
    """

    labels: np.ndarray  # int32, (n, k)
    scores: np.ndarray  # float32, (n, k)
    sources: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.labels)


class Model(Protocol):
    """What the hybrid router, the CLI and evaluation rely on."""

    backend: str
    labels: tuple[str, ...]  # taxonomy ids, the columns predictions point into

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        """Top-k categories of raw (not yet normalized) queries."""
        ...

    def predict_one(self, query: str, k: int) -> Predictions:
        """``predict([query], k)`` (the same categories and scores) through a compiled
        single-query path: what an online caller, one query per request, pays for."""
        ...

    @property
    def faster_one_by_one(self) -> bool:
        """Whether a batch is answered faster query by query through ``predict_one`` than by
        ``predict`` (once compiled): true where the batch path's cost is per-call overhead."""
        ...

    def explain(self, query: str, k: int) -> list[str]:
        """Human-readable lines on how the model scored ``query``."""
        ...

    def save(self, directory: str | Path) -> None:
        ...


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the k largest entries per row, best first.

    Ties break by the lower index, so results are deterministic.
    """
    n, width = scores.shape
    k = min(k, width)
    if k == 0:
        return np.zeros((n, 0), np.int32), np.zeros((n, 0), scores.dtype)
    if k == width:
        order = np.argsort(-scores, axis=1, kind="stable")
        return order.astype(np.int32), np.take_along_axis(scores, order, axis=1)
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    values = np.take_along_axis(scores, part, axis=1)
    # Sort the k candidates by score, then index: np.lexsort sorts by its last key first.
    within = np.lexsort((part, -values), axis=1)
    order = np.take_along_axis(part, within, axis=1)
    # Where ties straddle the k-th place, argpartition's pick is arbitrary: redo those
    # rows with a stable full sort so the lower index always wins.
    kth = values.min(axis=1, keepdims=True)
    tied = np.nonzero((scores >= kth).sum(axis=1) > k)[0]
    if len(tied):
        order[tied] = np.argsort(-scores[tied], axis=1, kind="stable")[:, :k]
    return order.astype(np.int32), np.take_along_axis(scores, order, axis=1)


def top_k_sparse(query: np.ndarray, label: np.ndarray, score: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse (query, label, score) triples (labels unique per query) to (n, k) top-k arrays,
    ties to the lower label; ``-1`` / 0 pad."""
    order = np.lexsort((label, -score, query))
    query, label, score = query[order], label[order], score[order]
    counts = np.bincount(query, minlength=n)
    rank = np.arange(len(query)) - np.repeat(np.cumsum(counts) - counts, counts)
    keep = rank < k
    labels = np.full((n, k), -1, dtype=np.int32)
    scores = np.zeros((n, k), dtype=np.float32)
    labels[query[keep], rank[keep]] = label[keep]
    scores[query[keep], rank[keep]] = score[keep]
    return labels, scores
