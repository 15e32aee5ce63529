"""XReg's batch path two ways: numpy's beam search (calls per tree level over the whole batch)
against the single-query kernels run row by row (``XRegModel.top_relevance(..., compiled=True)``,
what batches from ``COMPILED_FROM`` rows take), on the demo model's XReg part.

The real-text validation titles (``real-title``), repeated to ``--queries`` queries, top 5; the
features are computed once, so only the search and ranking are timed; best of ``--runs``, the
kernels loaded (compiled or read from numba's cache) before timing. It checks that both give the
same labels and scores, and prints both times and their ratio.

    python benchmarks/bench_xreg_batch.py [--queries 20000] [--runs 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_of(runs: int, call) -> tuple[float, tuple]:
    best, result = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from qcat.classifier import Classifier
    from qcat.training.data.corpus import Corpus

    xreg = Classifier.load().model.part("xreg")
    titles = list(Corpus.open().query_set("real-title", "validation").queries)
    queries = (titles * (args.queries // len(titles) + 1))[:args.queries]
    rows = xreg.transform(queries)
    xreg.top_relevance(rows.take(np.arange(10)), 5, compiled=True)  # the kernels loaded before timing
    numpy_s, (numpy_labels, numpy_scores) = best_of(args.runs, lambda: xreg.top_relevance(rows, 5, compiled=False))
    compiled_s, (labels, scores) = best_of(args.runs, lambda: xreg.top_relevance(rows, 5, compiled=True))
    same = np.array_equal(labels, numpy_labels) and np.array_equal(scores, numpy_scores)
    print(f"demo XReg ({len(xreg.trees)} trees, beam {xreg.beam}, {len(xreg.labels)} labels), {rows.n:,} real-title "
          f"queries, top 5, best of {args.runs}:")
    print(f"  numpy beam search   {numpy_s:6.2f} s  {1e6 * numpy_s / rows.n:6.1f} µs a query")
    print(f"  compiled, by rows   {compiled_s:6.2f} s  {1e6 * compiled_s / rows.n:6.1f} µs a query"
          f"  ({numpy_s / compiled_s:.1f}x faster)")
    print(f"  same labels and scores: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
