"""XReg's regression and relevance-weighted ranking metrics (XReg §3, supplementary A).

Truth values are relevance weights ``y`` (e.g. click shares, see
:func:`qcat.measure.ranking.row_normalized`) and prediction scores are relevance estimates
``ŷ >= 0``. Predictions are sparse: a label outside a row's top-k list has ``ŷ = 0``,
as in XReg's pointwise inference. Hence ``S(ŷ, k)`` is the first k predicted labels,
and where a row lists fewer than k, the rest of ``S(ŷ, k)`` are zero-score labels that
are not true (the labels this convention stands for).

- ``e_l = |ŷ_l - y_l|`` over all L labels; XMAD@k = mean of the k largest ``e_l``;
  XRMSE@k = root mean square of the k largest; MAD = ``Σ_l e_l / L``.
- WP@k = ``(1/k) Σ_{l in S(ŷ,k)} y_l``; WP-regret@k = ``(1/k) Σ_{l in S(y,k)} y_l - WP@k``
  (the paper's Ranking-error@k, eq. 9). Lemma 3.1: ``0 <= WP-regret@k <= 2 XMAD@2k``.
- Tau@k (the paper gives no formula; this is ours): Kendall's tau over the labels
  ``U = S(ŷ,k) ∪ S(y,k)``, where ``S(y,k)`` holds only true labels (at most k of them). Over the pairs of U that the truth orders (``y_i != y_j``),
  ``(concordant - discordant) / pairs``, a pair tied in ``ŷ`` counting as neither. A row
  where the truth orders no pair of U (every label of U equally relevant) scores 1. In
  [-1, 1]; Tau@1 is 1 when the top prediction is a most relevant label, else -1 (0 on a
  score tie).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from qcat.measure.metrics import Matched, mean_over_valid
from qcat.measure.ranking import ideal_ranking


def _check_scores(matched: Matched) -> None:
    if matched.scores.size and matched.scores.min() < 0:
        raise ValueError("regression metrics need non-negative relevance scores (ŷ >= 0)")


@numba.njit(cache=True)
def _largest_errors(indptr, indices, data, labels, scores, gains, k):
    """Per row: sum of the k largest errors, sum of their squares, sum of all errors."""
    n, width = labels.shape
    top_sum = np.zeros(n)
    top_squares = np.zeros(n)
    total = np.zeros(n)
    largest = np.zeros(k)
    for i in range(n):
        filled = 0
        for t in range(width + indptr[i + 1] - indptr[i]):
            if t < width:  # a predicted label
                if labels[i, t] < 0:
                    continue
                error = abs(scores[i, t] - gains[i, t])
            else:  # a true label: its error counts here unless it was predicted
                label = indices[indptr[i] + t - width]
                predicted = False
                for j in range(width):
                    if labels[i, j] == label:
                        predicted = True
                        break
                if predicted:
                    continue
                error = data[indptr[i] + t - width]
            total[i] += error
            pos = filled
            while pos > 0 and largest[pos - 1] < error:
                pos -= 1
            if pos >= k:
                continue
            for s in range(min(filled, k - 1), pos, -1):
                largest[s] = largest[s - 1]
            largest[pos] = error
            filled = min(filled + 1, k)
        for j in range(filled):
            top_sum[i] += largest[j]
            top_squares[i] += largest[j] * largest[j]
    return top_sum, top_squares, total


@dataclass(frozen=True)
class Errors:
    """One pass over every row's absolute errors, from which XMAD@k, XRMSE@k and MAD follow."""

    matched: Matched
    k: int
    top_sum: np.ndarray  # per row: the k largest errors, summed
    top_squares: np.ndarray  # their squares, summed
    total: np.ndarray  # all errors, summed

    def xmad(self) -> float:
        """XMAD@k (XReg eq. 1): the mean of the k largest absolute errors over all labels."""
        return mean_over_valid(self.top_sum / self.k, self.matched)

    def xrmse(self) -> float:
        """XRMSE@k (XReg eq. 2): the root mean square of the k largest absolute errors."""
        return mean_over_valid(np.sqrt(self.top_squares / self.k), self.matched)

    def mad(self) -> float:
        """MAD: the mean absolute error over all L labels (sensitive to L, XReg §3)."""
        return mean_over_valid(self.total / self.matched.truth.shape[1], self.matched)


def errors(matched: Matched, k: int) -> Errors:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    _check_scores(matched)
    t = matched.truth
    return Errors(matched, k, *_largest_errors(t.indptr, t.indices, t.data, matched.labels, matched.scores,
                                               matched.gains, k))


def xmad_at_k(matched: Matched, k: int) -> float:
    return errors(matched, k).xmad()


def xrmse_at_k(matched: Matched, k: int) -> float:
    return errors(matched, k).xrmse()


def mad(matched: Matched) -> float:
    return errors(matched, 1).mad()


def _wp_rows(matched: Matched, k: int) -> np.ndarray:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return matched.gains[:, :k].sum(axis=1) / k


def wp_at_k(matched: Matched, k: int) -> float:
    """WP@k: relevance-weighted precision, ``(1/k) Σ_{l in S(ŷ,k)} y_l``."""
    return mean_over_valid(_wp_rows(matched, k), matched)


def wp_regret_at_k(matched: Matched, k: int) -> float:
    """WP-regret@k: the best attainable WP@k minus the attained WP@k."""
    best, _ = ideal_ranking(matched.truth, k)
    return mean_over_valid(best.sum(axis=1) / k - _wp_rows(matched, k), matched)


@numba.njit(cache=True)
def _tau(labels, scores, gains, ideal_labels, ideal_values, n_free, k):
    n = labels.shape[0]
    width = min(k, labels.shape[1])
    out = np.ones(n)
    for i in range(n):
        union = np.full(2 * k, -1, dtype=np.int64)
        y_hat = np.zeros(2 * k)
        y = np.zeros(2 * k)
        m = 0
        for j in range(width):
            if labels[i, j] >= 0:
                union[m] = labels[i, j]
                y_hat[m] = scores[i, j]
                y[m] = gains[i, j]
                m += 1
        for j in range(k):
            label = ideal_labels[i, j]
            if label < 0:
                break
            seen = False
            for u in range(m):
                if union[u] == label:
                    seen = True
                    break
            if not seen:
                union[m] = label
                y[m] = ideal_values[i, j]
                # ŷ is 0 unless the label was predicted below the top k.
                for j2 in range(width, labels.shape[1]):
                    if labels[i, j2] == label:
                        y_hat[m] = scores[i, j2]
                        break
                m += 1
        # A row listing fewer than k labels has zero-score, non-true labels in S(ŷ, k),
        # as many as exist (n_free).
        for _ in range(min(k - _count_listed(labels[i, :width]), n_free[i])):
            m += 1  # y_hat = y = 0 already
        ordered = 0
        agree = 0
        for a in range(m):
            for b in range(a + 1, m):
                if y[a] == y[b]:
                    continue
                ordered += 1
                product = (y[a] - y[b]) * (y_hat[a] - y_hat[b])
                if product > 0:
                    agree += 1
                elif product < 0:
                    agree -= 1
        if ordered > 0:
            out[i] = agree / ordered
    return out


@numba.njit(cache=True)
def _count_listed(row):
    c = 0
    for v in row:
        if v >= 0:
            c += 1
    return c


def tau_at_k(matched: Matched, k: int) -> float:
    """Tau@k: Kendall's tau between ``ŷ`` and ``y`` over ``S(ŷ,k) ∪ S(y,k)`` (module doc)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    ideal_values, ideal_labels = ideal_ranking(matched.truth, k)
    listed = (matched.labels >= 0).sum(axis=1)
    n_free = matched.truth.shape[1] - listed - (matched.n_true - matched.hits.sum(axis=1))
    rows = _tau(matched.labels, matched.scores, matched.gains, ideal_labels, ideal_values, n_free.astype(np.int64), k)
    return mean_over_valid(rows, matched)
