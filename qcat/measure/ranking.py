"""The shared core of every metric: sparse top-k predictions, sparse truth, and the
per-position truth values they line up to.

Predictions are an ``(n, k)`` int array of label indices (``-1`` pads rows with fewer
labels) with an ``(n, k)`` float array of scores. :func:`rank_predictions` orders each row
by score, highest first, ties to the lower label index, pads last, so every metric sees
one deterministic ranking. Ground truth is a scipy CSR matrix ``(n, n_labels)`` whose
non-zeros are the true labels, with their relevance weights as values (1 for binary
relevance).
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp


def check_truth(truth: sp.spmatrix, n_rows: int) -> sp.csr_matrix:
    """``truth`` as CSR with sorted indices, float64 values, no explicit zeros; its row
    count must match the predictions'. A (row, label) entered twice is summed, as scipy
    sums duplicate COO entries (two click records of one pair add up)."""
    if not sp.issparse(truth):
        raise TypeError(f"ground truth must be a scipy sparse matrix, got {type(truth).__name__}")
    truth = sp.csr_matrix(truth, dtype=np.float64, copy=True)
    if truth.shape[0] != n_rows:
        raise ValueError(f"ground truth has {truth.shape[0]} rows but there are {n_rows} prediction rows")
    if truth.nnz and (not np.all(np.isfinite(truth.data)) or truth.data.min() < 0):
        raise ValueError("ground truth relevances must be finite and non-negative")
    truth.sum_duplicates()
    truth.eliminate_zeros()
    truth.sort_indices()
    return truth


def rank_predictions(labels: np.ndarray, scores: np.ndarray, n_labels: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row sorted by score (highest first, ties to the lower label, ``-1`` pads last).

    Raises ValueError on a shape mismatch, a label outside ``[-1, n_labels)``, a NaN score
    or a label repeated within a row (it would be counted twice).
    """
    labels = np.asarray(labels)
    scores = np.asarray(scores, dtype=np.float64)
    if labels.ndim != 2 or labels.shape != scores.shape:
        raise ValueError(f"labels {labels.shape} and scores {scores.shape} must be the same 2-d shape")
    if labels.size and (labels.min() < -1 or (n_labels is not None and labels.max() >= n_labels)):
        raise ValueError(f"predicted labels must lie in [-1, {n_labels}), got {labels.min()}..{labels.max()}")
    if np.isnan(scores).any():
        row = int(np.nonzero(np.isnan(scores).any(axis=1))[0][0])
        raise ValueError(f"prediction row {row} has a NaN score")
    labels = labels.astype(np.int64)
    is_pad = labels < 0
    score_key = np.where(is_pad, np.inf, -scores)
    label_key = np.where(is_pad, np.iinfo(np.int64).max, labels)
    order = np.lexsort((label_key, score_key), axis=1)
    ranked = np.take_along_axis(labels, order, axis=1)
    ranked_scores = np.where(ranked < 0, 0.0, np.take_along_axis(scores, order, axis=1))
    by_label = np.sort(ranked, axis=1)
    repeated = (by_label[:, 1:] == by_label[:, :-1]) & (by_label[:, 1:] >= 0)
    if repeated.any():
        row = int(np.nonzero(repeated.any(axis=1))[0][0])
        raise ValueError(f"prediction row {row} lists a label twice")
    return ranked, ranked_scores


@numba.njit(cache=True)
def _truth_at(indptr, indices, data, labels):
    n, k = labels.shape
    out = np.zeros((n, k))
    for i in range(n):
        start, end = indptr[i], indptr[i + 1]
        for j in range(k):
            label = labels[i, j]
            if label < 0:
                continue
            # Truth rows are short and sorted: a binary search per predicted label.
            lo, hi = start, end
            while lo < hi:
                mid = (lo + hi) // 2
                if indices[mid] < label:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < end and indices[lo] == label:
                out[i, j] = data[lo]
    return out


def truth_at(labels: np.ndarray, truth: sp.csr_matrix) -> np.ndarray:
    """``(n, k)`` float: the truth value of each predicted label (0 where it is not true
    or a pad). ``truth`` must come from :func:`check_truth`."""
    return _truth_at(truth.indptr, truth.indices, truth.data, np.ascontiguousarray(labels, dtype=np.int64))


@numba.njit(cache=True)
def _ideal(indptr, indices, data, weights, k):
    n = len(indptr) - 1
    values = np.zeros((n, k))
    labels = np.full((n, k), -1, dtype=np.int64)
    for i in range(n):
        filled = 0
        # Insertion into a sorted top-k buffer: rows are short, so this beats a sort.
        # Indices ascend within a row, so an equal value lands after the lower label.
        for t in range(indptr[i], indptr[i + 1]):
            value = data[t] * weights[indices[t]]
            pos = filled
            while pos > 0 and values[i, pos - 1] < value:
                pos -= 1
            if pos >= k:
                continue
            for s in range(min(filled, k - 1), pos, -1):
                values[i, s] = values[i, s - 1]
                labels[i, s] = labels[i, s - 1]
            values[i, pos] = value
            labels[i, pos] = indices[t]
            filled = min(filled + 1, k)
    return values, labels


def ideal_ranking(truth: sp.csr_matrix, k: int, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The best possible top-k of each row: ``(values, labels)``, both ``(n, k)``, where
    ``values`` are the truth values (times ``weights[label]`` when given) sorted highest
    first, ties to the lower label, padded with 0 / -1."""
    if weights is None:
        weights = np.ones(truth.shape[1])
    return _ideal(truth.indptr, truth.indices, truth.data, np.asarray(weights, dtype=np.float64), int(k))


def n_true(truth: sp.csr_matrix) -> np.ndarray:
    """Number of true labels of each row."""
    return np.diff(truth.indptr)


def binary(truth: sp.csr_matrix) -> sp.csr_matrix:
    """The same truth with every relevance set to 1."""
    ones = truth.copy()
    ones.data = np.ones_like(ones.data)
    return ones


def row_normalized(truth: sp.csr_matrix) -> sp.csr_matrix:
    """Each row divided by its sum: click counts become click shares in [0, 1]."""
    sums = np.asarray(truth.sum(axis=1)).ravel()
    scaled = truth.copy()
    scaled.data = scaled.data / np.repeat(np.where(sums > 0, sums, 1.0), np.diff(truth.indptr))
    return scaled
