"""Ranking metrics over sparse top-k predictions and sparse ground truth.

Predictions are an ``(n, k)`` int array of label indices, best first, ``-1`` padded.
Ground truth is a scipy CSR matrix ``(n, n_labels)`` whose non-zeros are the true labels.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def hits_matrix(predicted: np.ndarray, truth: sp.csr_matrix) -> np.ndarray:
    """Boolean ``(n, k)``: is ``predicted[i, j]`` a true label of row ``i``?"""
    truth = truth.tocsr()
    truth.sort_indices()
    n_labels = np.int64(truth.shape[1])
    rows = np.repeat(np.arange(truth.shape[0], dtype=np.int64), np.diff(truth.indptr))
    # (row, label) pairs as one sorted int64 key each; membership is a binary search.
    truth_keys = rows * n_labels + truth.indices
    keys = np.arange(predicted.shape[0], dtype=np.int64)[:, None] * n_labels + predicted
    pos = np.minimum(np.searchsorted(truth_keys, keys), max(len(truth_keys) - 1, 0))
    if len(truth_keys) == 0:
        return np.zeros(predicted.shape, dtype=bool)
    return (truth_keys[pos] == keys) & (predicted >= 0)


def pr_at_k(predicted: np.ndarray, truth: sp.csr_matrix, k: int) -> float:
    """eBay's PR@k: hits in the top k divided by ``min(k, |Y|)``, averaged over rows
    with at least one true label."""
    hits = hits_matrix(predicted[:, :k], truth).sum(axis=1)
    n_true = np.diff(truth.tocsr().indptr)
    keep = n_true > 0
    return float(np.mean(hits[keep] / np.minimum(k, n_true[keep]))) if keep.any() else float("nan")


def precision_at_k(predicted: np.ndarray, truth: sp.csr_matrix, k: int) -> float:
    """P@k: hits in the top k divided by k, averaged over rows with a true label."""
    hits = hits_matrix(predicted[:, :k], truth).sum(axis=1)
    keep = np.diff(truth.tocsr().indptr) > 0
    return float(np.mean(hits[keep] / k)) if keep.any() else float("nan")
