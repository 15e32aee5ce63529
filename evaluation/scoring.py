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


# Issue 53: when models saw different numbers of the evaluated queries in training, their headline
# figures are repeated on the queries none of them saw, and paired differences are taken there.
UNSEEN_FIGURES = ("PR@1", "PR@3", "PR@10")


def unseen_figures(matched: Matched, unseen: np.ndarray) -> dict[str, float]:
    """The headline figures of ``matched`` on its rows in the boolean mask ``unseen``."""
    rows = matched.subset(unseen)
    return {"queries": len(rows) - rows.n_skipped} | {name: pr_at_k(rows, int(name[3:])) for name in UNSEEN_FIGURES}


def paired_pr1(baseline: Matched, target: Matched, rows: np.ndarray) -> dict[str, float]:
    """``target``'s PR@1 minus ``baseline``'s on the same rows (a boolean mask), with the paired
    standard error (the standard deviation of the per-query differences / sqrt(n))."""
    base, other = baseline.subset(rows), target.subset(rows)
    valid = base.valid & other.valid
    difference = other.hits[valid, 0].astype(float) - base.hits[valid, 0].astype(float)
    n = len(difference)
    se = float(difference.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return {"queries": n, "value": float(difference.mean()) if n else float("nan"), "se": se}


def differing_sets(models: list[dict]) -> list[str]:
    """The query sets (``all`` for the simulated split, real-text sets) whose seen-in-training counts
    differ between the report's models; none when a model records no training queries."""
    sets = list(models[0].get("overlap", {}))
    if any(entry["seen"] is None for m in models for entry in m.get("overlap", {}).values()):
        return []
    return [s for s in sets if len({m["overlap"][s]["seen"] for m in models}) > 1]


def add_unseen_scores(models: list[dict], matched_of: list[dict[str, Matched]], unseen: dict[str, np.ndarray]) -> None:
    """Each model entry's ``unseen`` figures per set of ``unseen`` (set -> mask of the queries no model
    saw) and, after the first, ``unseen_paired``: its PR@1 difference from the first on them."""
    for i, (entry, matched) in enumerate(zip(models, matched_of)):
        entry["unseen"] = {s: unseen_figures(matched[s], mask) for s, mask in unseen.items()}
        if i:
            entry["unseen_paired"] = {s: paired_pr1(matched_of[0][s], matched[s], mask) for s, mask in unseen.items()}


def unseen_table(report: dict) -> dict | None:
    """The report's table of headline figures beside their values on the queries no model saw
    (fields of ``qcat.evaluation.report.Table``), or None when the models' seen counts agree."""
    models = report["models"]
    sets = list(models[0].get("unseen", {}))
    if not sets:
        return None

    def cell(value: float) -> str:
        return "–" if value is None or np.isnan(value) else f"{100 * value:.2f}"

    rows = []
    for s in sets:
        for i, m in enumerate(models):
            every = m["segments"]["all"] if s == "all" else m["query_sets"][s]
            unseen = m["unseen"][s]
            paired = m.get("unseen_paired", {}).get(s)
            delta = "–" if paired is None else f"{100 * paired['value']:+.2f} ± {100 * paired['se']:.2f}"
            label = "simulated split" if s == "all" else s
            rows.append((f"{label} ({m['overlap'][s]['queries']:,}; {unseen['queries']:,} unseen)" if i == 0 else "",
                         m["name"], f"{m['overlap'][s]['seen']:,}")
                        + tuple(x for name in UNSEEN_FIGURES for x in (cell(every[name]), cell(unseen[name])))
                        + (delta,))
    return {
        "title": "Headline figures on unseen queries (the models saw different numbers of the evaluated queries)",
        "header": ("query set (queries; unseen by every model)", "model", "seen in training")
        + tuple(f"{name} (%) {where}" for name in UNSEEN_FIGURES for where in ("all", "on unseen queries"))
        + (f"δ PR@1 vs {models[0]['name']} on unseen queries (points ± paired SE)",),
        "rows": rows,
        "note": ("The models saw different numbers of these queries while they were trained, so their figures on "
                 "all queries are not comparable: each is given again on the queries none of them saw, and the "
                 "paired difference (per query, against the first model) is computed on those."),
    }
