"""Classification and ranking metrics over sparse top-k predictions (DESIGN.md, Metrics).

Every metric takes a :class:`qcat.measure.metrics.Matched` (the predictions ranked and lined up
against the truth once) and means over the rows with at least one true label. PR@k and the
Godbole–Sarawagi scores, which training tunes on too, are in :mod:`qcat.measure.metrics`.

Which relevance a metric reads: P@k, PR@k, the Godbole–Sarawagi scores, the propensity
scored metrics and coverage treat every true label as relevant (value > 0); nDCG@k uses
the truth values as graded gains (pass binary truth for binary nDCG).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qcat.measure.metrics import Matched, calibration_bins, check_k, mean_over_valid
from qcat.measure.ranking import binary, ideal_ranking


def discounts(k: int) -> np.ndarray:
    """``1 / log2(rank + 1)`` for ranks 1..k."""
    return 1.0 / np.log2(np.arange(2, k + 2))


# -- unweighted ------------------------------------------------------------------------


def precision_at_k(matched: Matched, k: int) -> float:
    """P@k: true labels among the top k, divided by k."""
    check_k(k)
    return mean_over_valid(matched.hits[:, :k].sum(axis=1) / k, matched)


def coverage_at_k(matched: Matched, k: int) -> float:
    """Label coverage@k: distinct labels predicted correctly somewhere in a top k, over
    the distinct labels that are true somewhere (napkinXC's definition)."""
    check_k(k)
    true_labels = np.unique(matched.truth.indices)
    if len(true_labels) == 0:
        return float("nan")
    correct = np.unique(matched.labels[:, :k][matched.hits[:, :k]])
    return len(correct) / len(true_labels)


# -- graded ----------------------------------------------------------------------------


def ndcg_at_k(matched: Matched, k: int) -> float:
    """nDCG@k with the truth values as gains: ``Σ gain_r / log2(r + 1)`` over the top k,
    divided by the same sum over the best possible top k (trec_eval's ndcg_cut)."""
    check_k(k)
    weights = discounts(k)
    width = min(k, matched.k)
    dcg = matched.gains[:, :width] @ weights[:width]
    ideal, _ = ideal_ranking(matched.truth, k)
    idcg = ideal @ weights
    return mean_over_valid(dcg / np.where(idcg > 0, idcg, 1.0), matched)


# -- propensity scored (Jain et al. 2016) ---------------------------------------------


def _ps_gains(matched: Matched, inverse_propensity: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverse propensity of each correct label in the top k (0 elsewhere), and the
    best possible: the row's true labels with the highest inverse propensities."""
    check_k(k)
    inverse_propensity = np.asarray(inverse_propensity, dtype=np.float64)
    if inverse_propensity.shape != (matched.truth.shape[1],):
        raise ValueError(f"need one inverse propensity per label ({matched.truth.shape[1]}), got {inverse_propensity.shape}")
    width = min(k, matched.k)
    labels = matched.labels[:, :width]
    gains = np.where(matched.hits[:, :width], inverse_propensity[np.maximum(labels, 0)], 0.0)
    best, _ = ideal_ranking(binary(matched.truth), k, inverse_propensity)
    return gains, best


def psp_at_k_raw(matched: Matched, inverse_propensity: np.ndarray, k: int) -> float:
    """Jain et al.'s unbiased PSP@k as defined (Table 1): ``(1/k) Σ_{top k} y_l / p_l``,
    averaged over rows. Unbounded: it can exceed 1."""
    gains, _ = _ps_gains(matched, inverse_propensity, k)
    return mean_over_valid(gains.sum(axis=1) / k, matched)


def psp_at_k_normalized(matched: Matched, inverse_propensity: np.ndarray, k: int) -> float:
    """PSP@k as papers report it (Jain et al. §7, napkinXC ``normalize=True``): the summed
    raw PSP@k divided by the summed PSP@k of the best possible predictions. In [0, 1]."""
    gains, best = _ps_gains(matched, inverse_propensity, k)
    valid = matched.valid
    denominator = best[valid].sum()
    return float(gains[valid].sum() / denominator) if denominator > 0 else float("nan")


def psndcg_at_k_raw(matched: Matched, inverse_propensity: np.ndarray, k: int) -> float:
    """Jain et al.'s unbiased PSnDCG@k as defined (Table 1):
    ``Σ_{top k} y_l / (p_l log(r_l + 1))`` divided by ``Σ_{r=1..k} 1 / log(r + 1)``."""
    gains, _ = _ps_gains(matched, inverse_propensity, k)
    weights = discounts(k)
    return mean_over_valid(gains @ weights[: gains.shape[1]] / weights.sum(), matched)


def psndcg_at_k_normalized(matched: Matched, inverse_propensity: np.ndarray, k: int) -> float:
    """PSnDCG@k as reported (napkinXC ``normalize=True``): each row's PSDCG@k over its
    ``Σ_{r=1..min(k,|Y|)} 1/log2(r + 1)``, summed, divided by the same sum for the best
    possible predictions. In [0, 1]."""
    gains, best = _ps_gains(matched, inverse_propensity, k)
    weights = discounts(k)
    norm = np.cumsum(weights)[np.clip(np.minimum(k, matched.n_true) - 1, 0, k - 1)]
    valid = matched.valid
    attained = (gains @ weights[: gains.shape[1]] / norm)[valid].sum()
    possible = (best @ weights / norm)[valid].sum()
    return float(attained / possible) if possible > 0 else float("nan")


# -- binary relevance (golden-data judgments) -----------------------------------------


def accuracy(predicted_relevant: np.ndarray, relevant: np.ndarray) -> float:
    """Share of items whose predicted relevance (bool) matches the judged one (bool)."""
    predicted_relevant = np.asarray(predicted_relevant, dtype=bool)
    relevant = np.asarray(relevant, dtype=bool)
    if predicted_relevant.shape != relevant.shape:
        raise ValueError(f"shapes differ: {predicted_relevant.shape} vs {relevant.shape}")
    return float((predicted_relevant == relevant).mean()) if relevant.size else float("nan")


def roc_auc(scores: np.ndarray, relevant: np.ndarray) -> float:
    """ROC-AUC: the probability that a relevant item outscores an irrelevant one, ties
    counting half (the Mann–Whitney statistic over average ranks). NaN when either class
    is empty."""
    scores = np.asarray(scores, dtype=np.float64)
    relevant = np.asarray(relevant, dtype=bool)
    if scores.shape != relevant.shape:
        raise ValueError(f"shapes differ: {scores.shape} vs {relevant.shape}")
    return float(roc_auc_by_group(np.zeros(scores.size, np.int64), scores.ravel(), relevant.ravel(), 1)[0])


def roc_auc_by_group(group: np.ndarray, scores: np.ndarray, relevant: np.ndarray, n_groups: int) -> np.ndarray:
    """:func:`roc_auc` of every group at once (``group`` holds ids ``0..n_groups-1``): the
    rank-sum formula with mid-ranks for ties, ranks counted within each group."""
    order = np.lexsort((scores, group))
    g, s = group[order], scores[order]
    n = len(order)
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (g[1:] != g[:-1]) | (s[1:] != s[:-1])
    run_id = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    run_end = np.append(run_start[1:], n)
    group_start = np.searchsorted(g, g, side="left")
    midrank = (run_start[run_id] + run_end[run_id] - 1) / 2.0 - group_start + 1.0
    positive = relevant[order]
    n_pos = np.bincount(g[positive], minlength=n_groups).astype(np.float64)
    n_neg = np.bincount(g[~positive], minlength=n_groups).astype(np.float64)
    rank_sum = np.bincount(g[positive], weights=midrank[positive], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg), np.nan)


# -- calibration ----------------------------------------------------------------------


@dataclass(frozen=True)
class Reliability:
    """Top-1 score against top-1 correctness in equal-width score bins."""

    edges: np.ndarray  # (bins + 1,)
    count: np.ndarray  # rows per bin
    mean_score: np.ndarray  # NaN for empty bins
    accuracy: np.ndarray  # NaN for empty bins
    expected_calibration_error: float


def reliability(matched: Matched, bins: int = 10) -> Reliability:
    """Reliability diagram data for the top-1 prediction (scores taken as probabilities,
    clipped to [0, 1]) and its expected calibration error."""
    valid = matched.valid & (matched.labels[:, 0] >= 0) if matched.k else np.zeros(len(matched), bool)
    score = matched.scores[valid, 0] if matched.k else np.zeros(0)
    correct = matched.hits[valid, 0].astype(np.float64) if matched.k else np.zeros(0)
    edges, count, mean_score, hit_rate, ece = calibration_bins(score, correct, bins)
    return Reliability(edges, count.astype(np.int64), mean_score, hit_rate, ece)
