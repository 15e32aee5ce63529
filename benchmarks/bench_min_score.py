"""Thresholds (``qcat classify --min-score P``): per query length, the share of queries a bundle
answers (top-1 score >= P) and the precision of those answers (top-1 right), at P = 0.5, 0.7
and 0.9, on the real-text test sets; and the precision/coverage curve over P, as a plot.

The scores are the bundle's own (calibrated where it is), exactly those ``qcat classify``
prints (:func:`qcat.classifier.load_model` ``.predict``).

    python benchmarks/bench_min_score.py --model "shipped=demo/qcat_demo/model" --model "log only=/tmp/demo_log" \\
        --out docs/min_score.json --plot docs/min_score.svg
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_catalog import per_query  # noqa: E402

THRESHOLDS = (0.5, 0.7, 0.9)
SETS = ("real-title", "real-2tok", "real-queries")
LENGTHS = {"1": (1, 1), "2": (2, 2), "3-4": (3, 4), "5-8": (5, 8), "9+": (9, 10**6), "all": (1, 10**6)}


def coverage_table(scored: dict) -> dict:
    """Set -> length bucket -> P -> {queries, answered share, precision} (None where nothing is answered)."""
    out = {}
    for set_name, values in scored.items():
        out[set_name] = {}
        for bucket, (low, high) in LENGTHS.items():
            rows = (values["tokens"] >= low) & (values["tokens"] <= high)
            if not rows.any():
                continue
            cells = {"queries": int(rows.sum())}
            for p in THRESHOLDS:
                answered = rows & (values["score"] >= p)
                cells[f"{p:g}"] = {"answered": round(100 * answered.sum() / rows.sum(), 1),
                                   "precision": round(100 * values["top1"][answered].mean(), 1) if answered.any() else None}
            out[set_name][bucket] = cells
    return out


def plot(scored_by_model: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "qcat"
    models = list(scored_by_model)
    figure, axes = plt.subplots(len(models), len(SETS), figsize=(3.6 * len(SETS), 3.2 * len(models)), squeeze=False,
                                sharex=True, sharey=True)
    grid = np.linspace(0, 1, 101)
    for row, model in enumerate(models):
        for column, set_name in enumerate(SETS):
            ax, values = axes[row][column], scored_by_model[model][set_name]
            for bucket, (low, high) in LENGTHS.items():
                rows = (values["tokens"] >= low) & (values["tokens"] <= high)
                if rows.sum() < 10:
                    continue
                coverage, precision = [], []
                for p in grid:
                    answered = rows & (values["score"] >= p)
                    if answered.any():
                        coverage.append(100 * answered.sum() / rows.sum())
                        precision.append(100 * values["top1"][answered].mean())
                line, = ax.plot(coverage, precision, label=f"{bucket} tokens ({int(rows.sum())})",
                                linewidth=2 if bucket == "all" else 1, color="black" if bucket == "all" else None)
                for p, marker in zip(THRESHOLDS, ("o", "s", "^")):
                    answered = rows & (values["score"] >= p)
                    if answered.any():
                        ax.plot(100 * answered.sum() / rows.sum(), 100 * values["top1"][answered].mean(), marker,
                                color=line.get_color(), markersize=5)
            ax.set_title(f"{model}: {set_name}", fontsize=9)
            ax.set_xlabel("queries answered (%)")
            if column == 0:
                ax.set_ylabel("precision of top-1 (%)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6, loc="lower left")
    figure.suptitle("precision / coverage of --min-score P (markers: P = 0.5 o, 0.7 s, 0.9 ^)", fontsize=10)
    figure.savefig(path, format=path.suffix.lstrip(".") or "svg", bbox_inches="tight", metadata={"Date": None}
                   if path.suffix == ".svg" else None)
    plt.close(figure)


def markdown(model: str, table: dict) -> str:
    lines = [f"**{model}** (answered % / precision % of top-1 at P)", "",
             "| set | length | queries | " + " | ".join(f"P = {p:g}" for p in THRESHOLDS) + " |",
             "|---|---|---:|" + "---:|" * len(THRESHOLDS)]
    for set_name, buckets in table.items():
        for bucket, cells in buckets.items():
            shown = []
            for p in THRESHOLDS:
                c = cells[f"{p:g}"]
                shown.append(f"{c['answered']:.1f} / " + ("–" if c["precision"] is None else f"{c['precision']:.1f}"))
            lines.append(f"| {set_name} | {bucket} | {cells['queries']:,} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from qcat.classifier import load_model
    from qcat.training.data.corpus import Corpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plot", type=Path, required=True, help="the curves (.svg or .png)")
    args = parser.parse_args(argv)
    corpus = Corpus.open()
    taxonomy = corpus.taxonomy()
    tables = {name: corpus.query_set(name, "test", taxonomy) for name in SETS}
    scored, results = {}, {}
    for spec in args.model:
        name, _, directory = spec.partition("=")
        model = load_model(directory)
        scored[name] = {set_name: per_query(model, table) for set_name, table in tables.items()}
        results[name] = coverage_table(scored[name])
        print(markdown(name, results[name]) + "\n")
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    plot(scored, args.plot)
    print(f"wrote {args.out} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
