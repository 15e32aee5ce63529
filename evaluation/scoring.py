"""Score one model's predictions on an evaluation set: every metric, per segment.

Relevance conventions (the report states them too): the truth values are click counts.
Set metrics (P, R, F1, P@k, PR@k, PSP, coverage) count every clicked category as true;
nDCG@k uses the clicks as graded gains; the XReg regression metrics (XMAD, XRMSE, MAD,
WP, WP-regret, Tau) compare the scores with each query's click shares.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from qcat.evaluation import metrics as M
from qcat.evaluation import regression as R
from qcat.measure.leniency import Leniency, leniency_summary
from qcat.measure.metrics import Matched, gs_scores, pr_at_k
from qcat.measure.ranking import row_normalized, truth_at
from qcat.measure.segments import LENGTH_BINS, SEGMENTS

CURVE_KS = tuple(range(1, 11))


@dataclass(frozen=True)
class ScoringOptions:
    threshold: float = 0.5  # Godbole–Sarawagi predicted set: scores at least this
    k: int = 5  # the k of nDCG, PSP, PSnDCG, coverage and the XReg metrics
    reliability_bins: int = 10


def with_shares(matched: Matched) -> Matched:
    """The same predictions against each row's click shares instead of click counts."""
    shares = row_normalized(matched.truth)
    return replace(matched, truth=shares, gains=truth_at(matched.labels, shares))


def summarize(matched: Matched, inverse_propensity: np.ndarray, options: ScoringOptions = ScoringOptions(),
              leniency: Leniency | None = None) -> dict[str, float]:
    """Every metric of one set of queries, keyed by the names the report prints; with
    ``leniency``, strict, lenient and severe top-1 with their standard errors too
    (:mod:`qcat.measure.leniency`)."""
    k = options.k
    shares = with_shares(matched)
    share_errors = R.errors(shares, k)
    scores: dict[str, float] = {"queries": len(matched) - matched.n_skipped, "skipped": matched.n_skipped}
    gs = gs_scores(matched, options.threshold)
    scores.update({"P": gs["precision"], "R": gs["recall"], "F1": gs["f1"]})
    for kk in (1, 3, 5, 10):
        scores[f"PR@{kk}"] = pr_at_k(matched, kk)
    for kk in (1, 3, 5):
        scores[f"P@{kk}"] = M.precision_at_k(matched, kk)
    scores.update({
        f"nDCG@{k}": M.ndcg_at_k(matched, k),
        f"PSP@{k}": M.psp_at_k_normalized(matched, inverse_propensity, k),
        f"PSP@{k} raw": M.psp_at_k_raw(matched, inverse_propensity, k),
        f"PSnDCG@{k}": M.psndcg_at_k_normalized(matched, inverse_propensity, k),
        f"PSnDCG@{k} raw": M.psndcg_at_k_raw(matched, inverse_propensity, k),
        f"coverage@{k}": M.coverage_at_k(matched, k),
        f"XMAD@{k}": share_errors.xmad(),
        f"XRMSE@{k}": share_errors.xrmse(),
        "MAD": share_errors.mad(),
        f"WP@{k}": R.wp_at_k(shares, k),
        f"WP-regret@{k}": R.wp_regret_at_k(shares, k),
        f"Tau@{k}": R.tau_at_k(shares, k),
        "ECE": M.reliability(matched, options.reliability_bins).expected_calibration_error,
    })
    if leniency is not None:
        scores.update(leniency_summary(matched, leniency))
    return scores


def pr_curve(matched: Matched) -> list[float]:
    return [pr_at_k(matched, k) for k in CURVE_KS]


@dataclass(frozen=True)
class ModelScores:
    """One model's scores: per impression segment, per query-length bin, and curves."""

    segments: dict[str, dict[str, float]]  # "all", "head", "torso", "tail"
    pr_curves: dict[str, list[float]]  # segment -> PR@1..10
    by_length: dict[str, dict[str, float]]  # length bin -> {"queries", "PR@1", "PR@3"}
    reliability: M.Reliability

    def to_json(self) -> dict:
        r = self.reliability
        return {
            "segments": self.segments,
            "pr_curves": self.pr_curves,
            "by_length": self.by_length,
            "reliability": {
                "edges": r.edges.tolist(),
                "count": r.count.tolist(),
                "mean_score": _nan_to_none(r.mean_score),
                "accuracy": _nan_to_none(r.accuracy),
                "expected_calibration_error": r.expected_calibration_error,
            },
        }


def _nan_to_none(values: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in values]


def score_model(matched: Matched, segment: np.ndarray, length_bin: np.ndarray, inverse_propensity: np.ndarray,
                options: ScoringOptions = ScoringOptions(), leniency: Leniency | None = None) -> ModelScores:
    """Score ``matched`` overall, per head/torso/tail ``segment`` (0/1/2 per row) and per
    query ``length_bin`` (indices into ``LENGTH_BINS``)."""
    parts = {"all": matched} | {name: matched.subset(segment == s) for s, name in enumerate(SEGMENTS)}
    by_length = {}
    for b, name in enumerate(LENGTH_BINS):
        rows = matched.subset(length_bin == b)
        by_length[name] = {"queries": len(rows) - rows.n_skipped, "PR@1": pr_at_k(rows, 1), "PR@3": pr_at_k(rows, 3)}
    return ModelScores(
        segments={name: summarize(part, inverse_propensity, options, leniency) for name, part in parts.items()},
        pr_curves={name: pr_curve(part) for name, part in parts.items()},
        by_length=by_length,
        reliability=M.reliability(matched, options.reliability_bins),
    )
