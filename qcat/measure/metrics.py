"""Top-k predictions lined up with the truth (:class:`Matched`), and eBay's PR@k and
Godbole–Sarawagi scores, which training tunes on and evaluation reports (DESIGN.md, Metrics).

Every metric takes a :class:`Matched`: the predictions ranked deterministically
(:func:`qcat.measure.ranking.rank_predictions`) and lined up against the truth once, so a
report computes a dozen metrics and segments without re-sorting. Means are over the rows
with at least one true label (``Matched.valid``); ``Matched.n_skipped`` counts the rest.
PR@k and the Godbole–Sarawagi scores treat every true label as relevant (value > 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from qcat.measure.ranking import check_truth, n_true, rank_predictions, truth_at


@dataclass(frozen=True)
class Matched:
    """Ranked top-k predictions and the truth value found at each of their positions."""

    labels: np.ndarray  # int64 (n, k), ranked, -1 padded
    scores: np.ndarray  # float64 (n, k)
    truth: sp.csr_matrix  # (n, n_labels)
    gains: np.ndarray  # float64 (n, k): truth value of labels[i, j], 0 if not true

    @classmethod
    def build(cls, labels: np.ndarray, scores: np.ndarray, truth: sp.spmatrix) -> "Matched":
        truth = check_truth(truth, len(labels))
        labels, scores = rank_predictions(labels, scores, truth.shape[1])
        return cls(labels, scores, truth, truth_at(labels, truth))

    def subset(self, rows: np.ndarray) -> "Matched":
        """The rows selected by a boolean mask or an index array."""
        return Matched(self.labels[rows], self.scores[rows], self.truth[rows], self.gains[rows])

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def k(self) -> int:
        return self.labels.shape[1]

    @cached_property  # read by most metrics; Matched is immutable
    def hits(self) -> np.ndarray:
        return self.gains > 0

    @cached_property
    def n_true(self) -> np.ndarray:
        return n_true(self.truth)

    @cached_property
    def valid(self) -> np.ndarray:
        return self.n_true > 0

    @property
    def n_skipped(self) -> int:
        return int((~self.valid).sum())


def mean_over_valid(values: np.ndarray, matched: Matched) -> float:
    valid = matched.valid
    return float(values[valid].mean()) if valid.any() else float("nan")


def check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


# -- eBay's metrics (§4.2.1) ----------------------------------------------------------


def pr_at_k(matched: Matched, k: int) -> float:
    """eBay's PR@k (§4.2.1): true labels among the top k divided by ``min(k, |Y|)``."""
    check_k(k)
    hits = matched.hits[:, :k].sum(axis=1)
    return mean_over_valid(hits / np.maximum(np.minimum(k, matched.n_true), 1), matched)


def gs_scores(matched: Matched, threshold: float = 0.5, at_least_one: bool = True) -> dict[str, float]:
    """Godbole–Sarawagi precision, recall and F1 (eBay §4.2.1) of thresholded predictions.

    The predicted set Z of a row is its labels scoring at least ``threshold`` (within the
    top k given); with ``at_least_one`` the top label is always in Z, as a classifier
    always answers. Per row: precision = |Y∩Z|/|Z| (0 when Z is empty), recall =
    |Y∩Z|/|Y|, F1 = 2|Y∩Z|/(|Y|+|Z|); each is averaged over rows. (The paper's prose swaps
    the names of precision and recall; its formulas, used here, do not.)
    """
    chosen = (matched.scores >= threshold) & (matched.labels >= 0)
    if at_least_one and matched.k:
        chosen[:, 0] |= matched.labels[:, 0] >= 0
    size_z = chosen.sum(axis=1)
    size_y = matched.n_true
    both = (chosen & matched.hits).sum(axis=1)
    precision = np.where(size_z > 0, both / np.maximum(size_z, 1), 0.0)
    recall = both / np.maximum(size_y, 1)
    f1 = 2 * both / np.maximum(size_y + size_z, 1)
    return {
        "precision": mean_over_valid(precision, matched),
        "recall": mean_over_valid(recall, matched),
        "f1": mean_over_valid(f1, matched),
    }


def calibration_bins(score: np.ndarray, correct: np.ndarray, bins: int = 10,
                     weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Scores (probabilities, clipped to [0, 1]) in ``bins`` equal-width bins: the edges, each
    bin's weight, mean score and hit rate, and the expected calibration error
    ``Σ_b w_b · |mean score_b − hit rate_b| / Σ w`` (NaN with no scores)."""
    score = np.clip(np.asarray(score, dtype=np.float64), 0.0, 1.0)
    weight = np.ones(len(score)) if weight is None else np.asarray(weight, dtype=np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.minimum(np.searchsorted(edges, score, side="right") - 1, bins - 1)
    count = np.bincount(which, weights=weight, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_score = np.bincount(which, weights=weight * score, minlength=bins) / count
        hit_rate = np.bincount(which, weights=weight * correct, minlength=bins) / count
    filled = count > 0
    ece = float((count[filled] * np.abs(mean_score[filled] - hit_rate[filled])).sum() / count.sum()) \
        if filled.any() else float("nan")
    return edges, count, mean_score, hit_rate, ece
