"""Node answers in numpy batches: the node calibration's fit and ``Classifier.node_chains``.

1. The fit (``fit_node_calibration``, what every ``qcat train`` command and ``qcat train nodes``
   run) on the demo model's validation sets, timed as a whole (the model's predictions included).
2. The chains of the real-text validation titles (``real-title``, repeated to ``--queries``):
   ``NodeCalibration.batch_chains`` over the whole batch (what ``node_chains`` runs) against the
   compiled single-query kernel row by row (what it ran before, and what ``qcat serve`` runs a
   query at a time), the model's predictions made once, before timing. It checks that both give
   the same nodes and probabilities, to the bit.

Best of ``--runs``; the kernel is loaded (compiled or read from numba's cache) before timing.

    python benchmarks/bench_node_batches.py [--queries 20000] [--runs 3]
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_xreg_batch import best_of  # this folder is the script's: on sys.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from qcat.classifier import Classifier
    from qcat.models.calibration.nodes import NodeTree
    from qcat.training.data.corpus import Corpus
    from qcat.training.selection.nodes import fit_node_calibration
    from qcat.training.selection.objective import validation_sets

    classifier = Classifier.load()  # the shipped demo model
    model, calibration = classifier.model, classifier.nodes
    corpus = Corpus.open()
    sets = validation_sets(corpus.dataset("base"), corpus)
    fit_seconds, fitted = best_of(args.runs, lambda: fit_node_calibration(model, sets))
    print(f"fit: {sum(len(t.queries) for t, _ in sets.values()):,} validation queries of {len(sets)} sets, best of "
          f"{args.runs}: {fit_seconds:.2f} s, the model's predictions included ({len(fitted.maps)} depth maps)")

    titles = [str(q) for q in corpus.query_set("real-title", "validation").queries]
    queries = (titles * (args.queries // len(titles) + 1))[:args.queries]
    predictions = model.predict(queries, calibration.top_k)
    tree = NodeTree(model.taxonomy, model.labels)
    chain = calibration.compiled_chain(tree)
    chain(predictions.labels[0], predictions.scores[0])  # loaded before timing
    batch_seconds, (nodes, probability) = best_of(
        args.runs, lambda: calibration.batch_chains(tree, predictions.labels, predictions.scores))
    row_seconds, rows = best_of(args.runs, lambda: [chain(labels, scores) for labels, scores
                                                    in zip(predictions.labels, predictions.scores)])
    same = all(np.array_equal(a, n) and np.array_equal(b, p) for (a, b), n, p in zip(rows, nodes, probability))
    print(f"chains of {len(queries):,} real-title queries, best of {args.runs}: numpy batch {batch_seconds:.3f} s, "
          f"compiled kernel row by row {row_seconds:.3f} s ({row_seconds / batch_seconds:.2f}x); "
          f"same nodes and probabilities: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
