"""System-level metrics of the golden harness (eBay §4.2.2–4.2.3), per query.

The returned top-N listings of a query are compared with its golden pairs. A judged
listing counts as *predicted relevant* when the system returned it, so per query, over
its judged listings: accuracy = (TP + TN) / judged, precision = TP / (TP + FP) (NaN when
no returned listing is judged), recall = TP / relevant (NaN when none is relevant),
F1 = 2TP / (2TP + FP + FN) (NaN when both are empty). AUC scores each judged listing by
its rank (the first of N returned scores N, the last 1, not returned 0) and is the
probability that a relevant listing outscores an irrelevant one, ties counting half
(NaN unless both kinds are judged).

NDCG* (eBay §4.2.3, gain as printed): over the top N' = min(5, returned) listings,
DCG = Σ 2^rel_i / log2(i + 1) with rel_i the listing's grade (an unjudged listing counts as
Off-topic, 0), and IDCG the same sum with Excellent (3) at every position. A query with no
result scores 0.

PR@k (eBay's PR@k, §4.2.1, over search results; reported when a system answers by node): the
relevant judged listings among the returned top N divided by min(N, the query's relevant judged
listings), NaN when none is relevant.

Segment figures are means over the queries where the metric is defined;
:func:`bootstrap_delta` gives percentile confidence intervals of a paired difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qcat.evaluation.metrics import roc_auc_by_group

NDCG_DEPTH = 5
EXCELLENT = 3
METRICS = ("accuracy", "precision", "recall", "F1", "AUC", "NDCG*")
PR_AT_K = "PR@k"
NODE_METRICS = (PR_AT_K, *METRICS)  # what a report shows when a system answers by node


@dataclass(frozen=True)
class QueryJudgments:
    """The golden pairs of an evaluation query set, grouped by query (CSR layout)."""

    indptr: np.ndarray  # int64 (queries + 1,)
    doc: np.ndarray  # int64: inventory row, -1 for an unsearchable listing
    relevance: np.ndarray  # int8
    grade: np.ndarray  # float64, NaN where ungraded

    @property
    def n_queries(self) -> int:
        return len(self.indptr) - 1

    @property
    def query_of_pair(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_queries), np.diff(self.indptr))


def judged_positions(judgments: QueryJudgments, docs: np.ndarray) -> np.ndarray:
    """For each judged pair, the 0-based position at which the system returned it (-1: not
    returned). ``docs`` is ``(queries, N)`` inventory rows, -1 padded."""
    n_queries, depth = docs.shape
    if docs.size == 0 or len(judgments.doc) == 0:
        return np.full(len(judgments.doc), -1, dtype=np.int64)
    width = int(max(docs.max(initial=-1), judgments.doc.max(initial=-1))) + 2
    returned_keys = (np.arange(n_queries)[:, None] * width + docs + 1).ravel()
    returned_keys = np.where(docs.ravel() >= 0, returned_keys, -1)
    order = np.argsort(returned_keys, kind="stable")
    sorted_keys = returned_keys[order]
    pair_keys = judgments.query_of_pair * width + judgments.doc + 1
    found = np.searchsorted(sorted_keys, pair_keys)
    found = np.minimum(found, len(sorted_keys) - 1)
    hit = (sorted_keys[found] == pair_keys) & (judgments.doc >= 0)
    return np.where(hit, order[found] % depth, -1)


def per_query_metrics(judgments: QueryJudgments, docs: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric of :data:`NODE_METRICS` (NDCG* NaN when no pair has a grade) per query, plus
    ``returned`` and ``judged_share`` (the share of returned listings that are judged)."""
    n_queries, depth = docs.shape
    position = judged_positions(judgments, docs)
    query = judgments.query_of_pair
    returned_pair = position >= 0
    relevant = judgments.relevance.astype(bool)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(query[mask], minlength=n_queries).astype(np.float64)

    tp, fp = count(returned_pair & relevant), count(returned_pair & ~relevant)
    fn, tn = count(~returned_pair & relevant), count(~returned_pair & ~relevant)
    judged = tp + fp + fn + tn
    returned = (docs >= 0).sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        metrics = {
            "accuracy": np.where(judged > 0, (tp + tn) / judged, np.nan),
            "precision": np.where(tp + fp > 0, tp / (tp + fp), np.nan),
            "recall": np.where(tp + fn > 0, tp / (tp + fn), np.nan),
            "F1": np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan),
            PR_AT_K: np.where(tp + fn > 0, tp / np.minimum(depth, tp + fn), np.nan),
            "AUC": roc_auc_by_group(query, np.where(returned_pair, depth - position, 0).astype(np.float64), relevant, n_queries),
            "NDCG*": ndcg_star(judgments, position, returned) if np.any(~np.isnan(judgments.grade)) else np.full(n_queries, np.nan),
            "returned": returned,
            "judged_share": np.where(returned > 0, (tp + fp) / returned, np.nan),
        }
    return metrics


def ndcg_star(judgments: QueryJudgments, position: np.ndarray, returned: np.ndarray) -> np.ndarray:
    n_queries = judgments.n_queries
    depth = np.minimum(returned, NDCG_DEPTH).astype(np.int64)
    discount = 1.0 / np.log2(np.arange(NDCG_DEPTH) + 2.0)
    # Every shown position starts as Off-topic (gain 2^0); judged ones add their extra gain.
    shown = np.arange(NDCG_DEPTH)[None, :] < depth[:, None]
    dcg = (shown * discount[None, :]).sum(axis=1)
    graded = (position >= 0) & (position < NDCG_DEPTH) & ~np.isnan(judgments.grade)
    query = judgments.query_of_pair[graded]
    extra = (2.0 ** judgments.grade[graded] - 1.0) * discount[position[graded]]
    dcg += np.bincount(query, weights=extra, minlength=n_queries)
    ideal = 2.0**EXCELLENT * np.cumsum(discount)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(depth > 0, dcg / ideal[np.maximum(depth - 1, 0)], 0.0)


def mean_defined(values: np.ndarray) -> float:
    defined = ~np.isnan(values)
    return float(values[defined].mean()) if defined.any() else float("nan")


def bootstrap_delta(baseline: np.ndarray, target: np.ndarray, draws: int = 1000, seed: int = 0,
                    level: float = 0.95, chunk: int = 100) -> tuple[float, float, float]:
    """The paired difference ``mean(target) - mean(baseline)`` over queries (each mean over
    its defined values) and its percentile bootstrap interval: queries are resampled with
    replacement, the same draw for both systems."""
    delta = mean_defined(target) - mean_defined(baseline)
    n = len(baseline)
    if n == 0 or np.isnan(delta) or draws <= 0:
        return delta, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    b_value, b_defined = np.nan_to_num(baseline), ~np.isnan(baseline)
    t_value, t_defined = np.nan_to_num(target), ~np.isnan(target)
    deltas = []
    for start in range(0, draws, chunk):
        sample = rng.integers(0, n, size=(min(chunk, draws - start), n))
        with np.errstate(invalid="ignore", divide="ignore"):
            t_mean = t_value[sample].sum(axis=1) / t_defined[sample].sum(axis=1)
            b_mean = b_value[sample].sum(axis=1) / b_defined[sample].sum(axis=1)
        deltas.append(t_mean - b_mean)
    deltas = np.concatenate(deltas)
    deltas = deltas[~np.isnan(deltas)]
    if not len(deltas):
        return delta, float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(deltas, [tail, 100 - tail])
    return delta, float(low), float(high)
