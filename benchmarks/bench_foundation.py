"""Foundation benchmark: ingestion, NB training and batch classification on the demo corpus.

Run: python benchmarks/bench_foundation.py   (prints the figures docs/benchmarks.md quotes)
"""

from __future__ import annotations

import time

from qcat.classifier import Classifier
from qcat.training.data.corpus import Corpus
from qcat.training.nb import trainer as nb_trainer
from qcat.training.selection.table_metrics import evaluate_pr


def main() -> None:
    corpus = Corpus.open()
    taxonomy = corpus.taxonomy()
    started = time.perf_counter()
    result = corpus.ingest("all", taxonomy)
    print(f"ingest whole-year log: {result.report.rows_read:,} rows -> {len(result.table):,} pairs "
          f"in {time.perf_counter() - started:.1f} s")

    dataset = corpus.dataset("base")
    started = time.perf_counter()
    fc = nb_trainer.count_features(dataset.train)
    model = nb_trainer.build_model(fc, dataset.train, dataset, threshold=3, alpha=0.01, config={})
    print(f"NB single fit (count + build, {len(dataset.train.queries):,} train queries): "
          f"{time.perf_counter() - started:.2f} s")
    print(f"NB test split ({len(dataset.test.queries):,} queries): {evaluate_pr(model, dataset.test)}")

    classifier = Classifier.load()
    queries = list(dataset.test.queries) * 4
    started = time.perf_counter()
    classifier.classify(queries, k=10)
    elapsed = time.perf_counter() - started
    print(f"batch classify with the demo model: {len(queries):,} queries in {elapsed:.2f} s "
          f"= {len(queries) / elapsed:,.0f} queries/s")


if __name__ == "__main__":
    main()
