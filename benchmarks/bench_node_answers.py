"""Node answers on real text (issue 52): is the stated precision kept, and how deep do the answers go?

On the demo corpus's real-text test sets (``real-title``: whole titles of held-out listings;
``real-2tok``: their first two tokens), none of which the bundle's node calibration saw (it is fitted
on the validation halves), a bundle (default: the shipped demo model) answers each query:

- the bundle's **top leaf** (what answering a leaf to every query gives);
- **the baseline**, the plain sum of scores: the bundle's top 50 leaf scores, divided by their sum,
  summed up the tree, and the deepest node holding at least τ of the mass (τ = 0.5, 0.7, 0.9);
- **node answers at precision P** (``qcat classify --precision P``) for P = 0.8, 0.9, 0.95, and
  the precision-depth curve for P = 0.50 ... 0.99.

A node answer is right when the query's gold leaf lies beneath it (``qcat.measure.hierarchy``).
Mean depth is over every query, a query with no node counting 0 (a department is 1). It prints
Markdown tables (precision with its Wilson 95% interval, mean depth, the shares answered at a leaf and
with no node) and whether the issue's targets hold: precision at P of at least P - 0.01 at P = 0.8
and 0.9, and mean depth at P = 0.9 at least the baseline's at τ = 0.9; ``--out`` writes every figure
as JSON and ``--plot`` the curve as SVG.

    python benchmarks/bench_node_answers.py --out docs/benchmarks/node_answers.json \\
        --plot docs/benchmarks/node_answers.svg
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

SETS = ("real-title", "real-2tok")
TAUS = (0.5, 0.7, 0.9)
PRECISIONS = (0.8, 0.9, 0.95)
CURVE = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))
TOP = 50


def gold_of(table) -> list[list[str]]:
    """Each query's gold leaves."""
    gold = [[] for _ in table.queries]
    for query, category in zip(table.pair_query.tolist(), table.pair_category.tolist()):
        gold[query].append(table.categories[category])
    return gold


def plain_sum_answers(classifier, queries: list[str], tau: float) -> list[str | None]:
    """The baseline: the deepest node holding at least ``tau`` of the top leaves' summed scores."""
    from qcat.models.calibration.nodes import NodeTree

    tree = NodeTree(classifier.taxonomy, classifier.model.labels)
    predictions = classifier.model.predict(queries, TOP)
    answers = []
    for labels, scores in zip(predictions.labels, predictions.scores):
        total = float(scores[labels >= 0].sum())
        nodes, mass = tree.masses(labels, scores / total if total > 0 else scores)  # summing to 1: shares of it
        held = np.flatnonzero(mass >= tau - 1e-12)
        if len(held) == 0:
            answers.append(None)
            continue
        depth = tree.depth[nodes[held]]
        best = held[np.lexsort((nodes[held], -mass[held], -depth))[0]]
        answers.append(classifier.taxonomy.ids[int(nodes[best])])
    return answers


def figures(table, answers: list[str | None]) -> dict:
    from qcat.measure.hierarchy import NodeTable, node_correct, node_summary

    node_table = NodeTable.of(table.taxonomy)
    positions = node_table.positions(answers)
    correct = node_correct(node_table, answers, table.gold)
    answered = positions >= 0
    summary = node_summary(correct, node_table.depth[positions], answered, node_table.leaf[positions])
    return {key: (round(value, 4) if isinstance(value, float) else value) for key, value in summary.items()}


class Set:
    def __init__(self, name, table, taxonomy):
        self.name, self.queries, self.gold, self.taxonomy = name, list(table.queries), gold_of(table), taxonomy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="bundle with a node calibration (default: the demo)")
    parser.add_argument("--out", type=Path, default=None, help="write every figure as JSON")
    parser.add_argument("--plot", type=Path, default=None, help="write the precision-depth curve as SVG")
    args = parser.parse_args()
    from qcat.classifier import Classifier
    from qcat.training.data.corpus import Corpus

    started = time.perf_counter()
    classifier = Classifier.load(args.model, overrides=False)
    classifier.check_precision(0.9)
    corpus = Corpus.open()
    taxonomy = corpus.taxonomy()  # the gold leaves' (the bundle's taxonomy holds the leaves it answers)
    results = {"model": str(classifier.directory), "date": time.strftime("%Y-%m-%d"), "sets": {}}
    checks = []
    for name in SETS:
        data = Set(name, corpus.query_set(name, "test", taxonomy), taxonomy)
        chains = classifier.node_chains(data.queries)
        ids = classifier.taxonomy.ids

        def at(precision: float) -> list[str | None]:
            return [ids[p] if p >= 0 else None for p in chains.answers(precision).tolist()]

        top = classifier.model.predict(data.queries, 1).labels[:, 0]
        leaves = [classifier.model.labels[label] if label >= 0 else None for label in top.tolist()]
        row = {"queries": len(data.queries), "top_leaf": figures(data, leaves),
               "baseline": {str(tau): figures(data, plain_sum_answers(classifier, data.queries, tau)) for tau in TAUS},
               "precision": {str(p): figures(data, at(p)) for p in PRECISIONS},
               "curve": {str(p): figures(data, at(p)) for p in CURVE}}
        results["sets"][name] = row
        print(f"\n{name} test: {len(data.queries):,} queries\n")
        print("| answer | precision [95% interval] | mean depth | at a leaf | no node |\n|---|---:|---:|---:|---:|")
        for label, block in [("top leaf", row["top_leaf"])] + \
                            [(f"plain sum, τ = {t}", row["baseline"][str(t)]) for t in TAUS] + \
                            [(f"node at P = {p}", row["precision"][str(p)]) for p in PRECISIONS]:
            interval = f"{block['precision']:.3f} [{block['precision_low']:.3f}, {block['precision_high']:.3f}]" \
                if block["precision"] is not None else "–"
            print(f"| {label} | {interval} | {block['mean_depth']:.2f} | {block['leaf_share']:.3f} | "
                  f"{block['none_share']:.3f} |")
        for p in (0.8, 0.9):
            kept = row["precision"][str(p)]["precision"]
            checks.append((f"{name}: precision at P = {p} is {kept:.3f} >= {p - 0.01:.2f}", kept >= p - 0.01))
        depth, base = row["precision"]["0.9"]["mean_depth"], row["baseline"]["0.9"]["mean_depth"]
        checks.append((f"{name}: mean depth at P = 0.9 is {depth:.2f} >= the plain sum's {base:.2f} at τ = 0.9",
                       depth >= base))
    print()
    for line, ok in checks:
        print(("holds:  " if ok else "FAILS:  ") + line)
    results["checks"] = [{"check": line, "holds": ok} for line, ok in checks]
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if args.plot:
        plot(results, args.plot)
    print(f"\ndone in {time.perf_counter() - started:.1f} s")
    return 0 if all(ok for _, ok in checks) else 1


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    for (name, row), colour in zip(results["sets"].items(), ("tab:blue", "tab:orange")):
        curve = [(v["mean_depth"], v["precision"]) for v in row["curve"].values() if v["precision"] is not None]
        axes.plot(*zip(*curve), color=colour, marker=".", label=f"{name}: node at P = 0.50 ... 0.99")
        base = [(v["mean_depth"], v["precision"]) for v in row["baseline"].values()]
        axes.scatter(*zip(*base), color=colour, marker="x", s=60, label=f"{name}: plain sum, τ = 0.5, 0.7, 0.9")
    axes.set_xlabel("mean depth (a department is 1; no node 0)")
    axes.set_ylabel("node answers right")
    axes.set_title("Node answers on held-out real text: precision against depth")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="svg")


if __name__ == "__main__":
    sys.exit(main())
