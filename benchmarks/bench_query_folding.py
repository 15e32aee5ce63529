"""Query folding (issue 53, item 18): what folding accents, hyphens, possessives and HTML entities
does to the NB lookup and to strict top-1 on real text.

The comparison is between two whole systems, each with its own normalizer and the demo model built
under it: the code before folding with the model it shipped, and the code after with the model
rebuilt by ``qcat data build-demo --model-only --catalog-source log``. Both read the same raw text,
so the figures are paired per item:

- ``real-title``: the raw title of every held-out **test** listing of the demo corpus (the listings
  are chosen by a hash of their id, so both systems see the same ones), gold = the listing's leaf;
- ``real-2tok``: the first two tokens of that title under each system's own normalizer;
- ``real-queries``: the 18 real Best Buy queries of the corpus, gold = their clicked leaf.

Per item it records whether the normalized query is a row of the NB part's lookup table (a "lookup
hit"), the share of its tokens that NB's vocabulary knows, and whether the model's top leaf is the
gold leaf (strict top-1). Run once per system, then compare::

    # before: a checkout of the commit before folding, with its demo model
    git worktree add /tmp/before <commit> && cd /tmp/before
    PYTHONPATH=/tmp/before python benchmarks/bench_query_folding.py --out /tmp/folding_before.json
    # after: this checkout, with the rebuilt demo model
    python benchmarks/bench_query_folding.py --out /tmp/folding_after.json
    python benchmarks/bench_query_folding.py --compare /tmp/folding_before.json /tmp/folding_after.json

``--compare`` prints a Markdown table: each rate before and after, the top-1 difference with its
paired standard error (the standard deviation of the per-item differences / sqrt(n)), and whether
the change keeps the rule of the issue: real-text strict top-1 does not drop by more than 2 paired SE.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

SETS = ("real-title", "real-2tok", "real-queries")
TEST_PART = 2  # holdout_split: 0 simulator, 1 validation, 2 test


def raw_items(corpus, taxonomy) -> dict[str, tuple[list[str], list[str]]]:
    """Per set: the raw texts and their gold leaf ids, in a fixed order."""
    from qcat.inputs import read_table
    from qcat.text.normalize import tokenize
    from qcat.training.data.real_text import REAL_QUERIES

    catalog = corpus.catalog()
    split = corpus.holdout_split(catalog)
    titles, leaves = [], []
    for row in np.flatnonzero(split == TEST_PART).tolist():
        titles.append(catalog.title[row])
        leaves.append(taxonomy.id_of_path(catalog.category_path[row]))
    table = read_table(corpus.path("real_queries"), REAL_QUERIES)
    queries = [str(row["query"]) for row in table.rows]
    query_leaves = [taxonomy.id_of_path(str(row["category_path"])) for row in table.rows]
    return {
        "real-title": (titles, leaves),
        "real-2tok": ([" ".join(tokenize(title)[:2]) for title in titles], leaves),
        "real-queries": (queries, query_leaves),
    }


def nb_part(model):
    return model if model.backend == "nb" else model.nb


def measure(model_dir: str | None) -> dict:
    from qcat.classifier import Classifier
    from qcat.text.normalize import normalize, tokenize
    from qcat.training.data.corpus import Corpus

    classifier = Classifier.load(model_dir)
    corpus = Corpus.open()
    nb = nb_part(classifier.model)
    lookup, vocabulary = set(nb.lookup_queries), set(nb.vocabulary)
    out = {}
    for name, (texts, gold) in raw_items(corpus, corpus.taxonomy()).items():
        kept = [i for i, text in enumerate(texts) if tokenize(text)]
        answers = classifier.classify([texts[i] for i in kept], k=1)
        correct = np.zeros(len(texts), dtype=bool)
        for i, answer in zip(kept, answers):
            correct[i] = bool(answer.categories) and answer.categories[0].id == gold[i]
        known = [np.mean([t in vocabulary for t in tokenize(text)]) if tokenize(text) else 0.0 for text in texts]
        out[name] = {
            "n": len(texts),
            "normalized": [normalize(text) for text in texts],
            "lookup_hit": [normalize(text) in lookup for text in texts],
            "known_token_share": [float(x) for x in known],
            "correct": correct.tolist(),
        }
    return out


def compare(before: dict, after: dict) -> str:
    rows = ["| set | n | distinct queries before / after | NB lookup hit rate before / after | "
            "tokens NB knows before / after | strict top-1 before / after | difference ± paired SE | "
            "drop > 2 SE? |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name in SETS:
        b, a = before[name], after[name]
        if b["n"] != a["n"]:
            raise SystemExit(f"{name}: {b['n']} items before and {a['n']} after; the two runs did not read "
                             "the same corpus")
        diff = np.asarray(a["correct"], float) - np.asarray(b["correct"], float)
        se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else float("nan")
        mean = float(diff.mean())
        rows.append(
            f"| {name} | {b['n']:,} | {len(set(b['normalized'])):,} / {len(set(a['normalized'])):,} | "
            f"{np.mean(b['lookup_hit']):.4f} / {np.mean(a['lookup_hit']):.4f} | "
            f"{np.mean(b['known_token_share']):.4f} / {np.mean(a['known_token_share']):.4f} | "
            f"{np.mean(b['correct']):.4f} / {np.mean(a['correct']):.4f} | "
            f"{mean:+.4f} ± {se:.4f} | {'yes' if mean < -2 * se else 'no'} |")
    changed = {name: sum(x != y for x, y in zip(before[name]["normalized"], after[name]["normalized"]))
               for name in SETS}
    rows.append("")
    rows.append("Items whose normalized text changed: " + ", ".join(f"{n} {c:,}" for n, c in changed.items()))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="bundle directory (default: the shipped demo model)")
    parser.add_argument("--out", help="write the per-item record as JSON")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two records")
    args = parser.parse_args(argv)
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        print(compare(before, after))
        return 0
    record = measure(args.model)
    for name in SETS:
        r = record[name]
        print(f"{name}: n={r['n']:,} lookup hit {np.mean(r['lookup_hit']):.4f} "
              f"tokens known {np.mean(r['known_token_share']):.4f} strict top-1 {np.mean(r['correct']):.4f}")
    if args.out:
        Path(args.out).write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
