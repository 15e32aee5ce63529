"""Metric scoring benchmark: 1M queries × top-10 predictions over 20,000 labels.

Run: python benchmarks/bench_metrics.py [--queries 1000000]   (figures in docs/benchmarks.md)

The synthetic problem has eBay's shape: ~1.5 clicked categories per query with click
counts as relevance, and predictions that hit a true label about half the time. Timed:
ranking and matching the predictions (``Matched.build``), every metric of the report's
"all queries" row (``scoring.summarize``), and the same per head/torso/tail segment.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from qcat.evaluation.propensity import PropensityModel, label_counts
from qcat.evaluation.scoring import summarize
from qcat.measure.metrics import Matched
from qcat.measure.segments import SEGMENTS, segment_by_impressions


def synthetic(n: int, n_labels: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    popularity = rng.zipf(1.3, n_labels).astype(np.float64)
    popularity /= popularity.sum()
    per_query = 1 + rng.poisson(0.5, n)
    rows = np.repeat(np.arange(n), per_query)
    columns = rng.choice(n_labels, size=len(rows), p=popularity)
    clicks = rng.integers(3, 200, len(rows)).astype(np.float64)
    truth = sp.csr_matrix((clicks, (rows, columns)), shape=(n, n_labels))
    truth.sum_duplicates()
    # Predictions: random labels, with the first true label planted at a random rank half the time.
    labels = rng.integers(0, n_labels, (n, k))
    first_true = truth.indices[truth.indptr[:-1]]
    plant = rng.random(n) < 0.5
    labels[plant, rng.integers(0, k, plant.sum())] = first_true[plant]
    labels = np.sort(labels, axis=1)
    labels[:, 1:][labels[:, 1:] == labels[:, :-1]] = -1  # drop repeats
    scores = rng.dirichlet(np.ones(k), n)
    impressions = rng.pareto(1.2, n) + 1
    return truth, labels, scores, impressions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=20_000)
    args = parser.parse_args()
    truth, labels, scores, impressions = synthetic(args.queries, args.labels, 10)
    inverse = PropensityModel().inverse(label_counts(truth), args.queries)
    Matched.build(labels[:100], scores[:100], truth[:100])  # compile the numba kernels first
    summarize(Matched.build(labels[:100], scores[:100], truth[:100]), inverse)

    started = time.perf_counter()
    matched = Matched.build(labels, scores, truth)
    built = time.perf_counter() - started
    tick = time.perf_counter()
    scores_all = summarize(matched, inverse)
    summarized = time.perf_counter() - tick
    tick = time.perf_counter()
    segment = segment_by_impressions(impressions)
    for s, _ in enumerate(SEGMENTS):
        summarize(matched.subset(segment == s), inverse)
    segmented = time.perf_counter() - tick
    total = time.perf_counter() - started
    print(f"{args.queries:,} queries x top-10 over {args.labels:,} labels, {truth.nnz:,} true pairs")
    print(f"rank + match predictions:        {built:6.2f} s")
    print(f"all {len(scores_all) - 2} metrics, all queries:   {summarized:6.2f} s")
    print(f"same, per head/torso/tail:       {segmented:6.2f} s")
    print(f"total:                           {total:6.2f} s")
    print(f"(PR@1 {scores_all['PR@1']:.4f}, PSP@5 {scores_all['PSP@5']:.4f}, XMAD@5 {scores_all['XMAD@5']:.4f})")


if __name__ == "__main__":
    main()
