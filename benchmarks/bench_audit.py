"""How well a confusable map separates acceptable answers from real errors, against human judgments.

Reads a file of judged top-1 errors (``gold_path``, ``pred_path`` and a rater's label per row: A as
correct as the gold (overlapping leaves), B an acceptable near-miss, C a real error, D the gold is
wrong; e.g. the two-rater sample the project was given for the demo model's real-title
*validation* errors) and a map (``qcat data audit`` writes ``confusable.tsv``), and prints, per
label, how many of the judged errors the map credits (the pair gold/answer is in the map)::

    qcat data audit --out /tmp/audit
    python benchmarks/bench_audit.py --map /tmp/audit/confusable.tsv --judged judged_errors_validation.tsv

A good map credits many A (and B) errors and few C errors.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json

from qcat.taxonomy.confusable import load_confusable
from qcat.training.data.corpus import Corpus

LABELS = {"A": "as correct as the gold", "B": "acceptable near-miss", "C": "real error", "D": "gold wrong"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--map", required=True, help="confusable.tsv")
    parser.add_argument("--judged", required=True, help="TSV with gold_path, pred_path, label_rater1[, label_rater2]")
    parser.add_argument("--rater", default="label_rater1", help="the label column (default label_rater1)")
    args = parser.parse_args()
    taxonomy = Corpus.open().taxonomy()
    confusable = load_confusable(args.map, taxonomy)
    pairs = {frozenset((taxonomy.path_of(a), taxonomy.path_of(b))) for a, b in confusable.pairs}
    with open(args.judged, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    counts = collections.Counter()
    for row in rows:
        counts[(row[args.rater], frozenset((row["gold_path"], row["pred_path"])) in pairs)] += 1
    result = {}
    print(f"map {confusable.describe()}; {len(rows)} judged errors ({args.rater})")
    print("| label | judged errors | credited by the map | share |")
    print("|---|---:|---:|---:|")
    for label, meaning in LABELS.items():
        total = counts[(label, True)] + counts[(label, False)]
        result[label] = {"judged": total, "credited": counts[(label, True)]}
        share = counts[(label, True)] / total if total else float("nan")
        print(f"| {label} ({meaning}) | {total} | {counts[(label, True)]} | {share:.1%} |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
