"""The loop from judges back into the model, measured on the demo (issue 47): SIMULATED judges.

For each selection (``uncertain``, ``disagree``, ``random``), budget (queries judged) and seed:

1. choose ``budget`` queries from the pool — the demo corpus's real-text *validation* titles
   (``real-title`` and ``real-2tok``: real listings with their retailers' categories) — with
   :func:`qcat.judging.grading.selection.select_queries`, the code ``qcat judge create-session
   --kind categories --select`` runs; a third from each head/torso/tail segment as a session does
   (every title is searched once, so all are tail here, as ``--default-segment tail`` puts them);
2. have the simulated judges of ``benchmarks/simulate_category_judges.py`` grade what a session
   shows for each query (the union of the shipped hybrid's and its NB part's top 3): three judges,
   each grade moved one step with probability ``--noise`` (seeded by the seed), the judged grade
   their mean rounded half up as ``qcat judge export --gold`` writes it, into a graded gold file;
3. retrain the shipped model's parts (NB, XReg and the hybrid's selection, exactly as ``qcat data
   build-demo`` builds them) with that file (``--judged``), and
4. score on the real-text *test* sets only (strict, lenient and severe top-1), each query paired
   with the shipped model's answer: the difference and its paired SE per set, and pooled over the
   two sets (the sets' differences weighted by size; independent samples, so variances add), as
   issue 40 decided the re-ranker.

The seed changes the random sample and the judges' noise; ``uncertain`` and ``disagree`` choose the
same queries for every seed (they are deterministic given the model), so their seeds differ by the
judges alone. Every figure describes simulated judges, not people.

    python benchmarks/learning_curve.py --out /tmp/curve.json --plot docs/benchmarks/learning_curve.svg
    python benchmarks/learning_curve.py --budgets 100 --select random --seeds 0 --out /tmp/one.json   # one cell
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from qcat.errors import InputError

SELECTIONS = ("uncertain", "disagree", "random")
POOLED = ("real-title", "real-2tok")
OUTCOMES = ("strict", "lenient", "severe")
SHOWN_TOP_K = 3  # each model's top 3, as a category session stores by default


def pool_of(corpus) -> tuple[list[str], dict[str, dict[str, int]]]:
    """The pool's queries (the real-text validation sets, each query once) and their true grades."""
    from simulate_category_judges import true_grades

    truth, _ = true_grades(corpus)
    queries: dict[str, None] = {}
    for name in POOLED:
        queries.update(dict.fromkeys(corpus.query_set(name, "validation").queries.tolist()))
    tested = {q for name in POOLED for q in corpus.query_set(name, "test").queries.tolist()}
    return [q for q in queries if q not in tested], truth  # a title both sets have is scored, never judged


def judged_file(path: Path, queries: list[str], shown: list[list[str]], truth: dict, parent: dict,
                noise: float, seed: int, judges: int = 3) -> dict:
    """Write the graded gold file three simulated judges give ``queries`` (each shown ``shown[i]``)."""
    from simulate_category_judges import grade

    from qcat.measure.graded_gold import write_graded_gold
    from qcat.measure.judged import judged_grade

    rngs = [np.random.default_rng([seed, j]) for j in range(judges)]
    rows, counts = [], {3: 0, 2: 0, 1: 0, 0: 0}
    for query, categories in zip(queries, shown):
        for category in categories:
            given = []
            for rng in rngs:
                g = grade(category, truth.get(query, {}), parent)
                if rng.random() < noise:
                    g = int(np.clip(g + rng.choice((-1, 1)), 0, 3))
                given.append(g)
            final = judged_grade(given)
            counts[final] += 1
            rows.append((query, category, final, "tail", "", f"{np.mean(given):.2f}", judges))
    with open(path, "w", encoding="utf-8") as handle:
        write_graded_gold(handle, rows)
    return {"queries": len(queries), "grades": {str(k): v for k, v in counts.items()}}


def shown_categories(models, queries: list[str]) -> list[list[str]]:
    """What a session shows for each query: the union of the models' top 3, each category once."""
    from qcat.measure.judged import top_k_categories

    answers = [top_k_categories(model, queries, SHOWN_TOP_K) for model in models]
    return [list(dict.fromkeys(c for answer in per_model for c in answer)) for per_model in zip(*answers)]


class Scorer:
    """Per-query strict/lenient/severe top-1 on the real-text test sets, paired against a baseline."""

    def __init__(self, corpus) -> None:
        import bench_real_text as brt

        self.brt = brt
        brt.LENIENCY = (corpus.taxonomy(), corpus.confusable())
        self.sets = {name: corpus.query_set(name, "test") for name in POOLED}

    def outcomes(self, model) -> dict[str, dict[str, np.ndarray]]:
        return {name: self.brt.outcomes_of(self.brt.matched_on(model, table), table) for name, table in self.sets.items()}

    def paired(self, target: dict, baseline: dict) -> dict:
        """Per set and pooled: the mean difference and its paired SE, per outcome."""
        out: dict = {}
        sizes = {name: len(baseline[name]["strict"]) for name in POOLED}
        for kind in OUTCOMES:
            cells = {}
            for name in POOLED:
                cells[name] = self.brt.mean_se(target[name][kind] - baseline[name][kind])
            total = sum(sizes.values())
            mean = sum(sizes[n] * cells[n][0] for n in POOLED) / total
            se = float(np.sqrt(sum((sizes[n] * cells[n][1]) ** 2 for n in POOLED))) / total
            out[kind] = {"pooled": [mean, se]} | {n: list(cells[n]) for n in POOLED}
            out[kind]["level"] = {n: float(target[n][kind].mean()) for n in POOLED}
        return out


def run(args) -> dict:
    from qcat.bundles.demo import demo_model_dir
    from qcat.classifier import load_model
    from qcat.judging.grading.selection import select_queries
    from qcat.training.commands.build_demo import build_hybrid
    from qcat.training.data.corpus import Corpus

    started = time.perf_counter()
    corpus = Corpus.open(None)
    shipped = load_model(demo_model_dir())
    nb_part = load_model(demo_model_dir() / "nb")
    queries, truth = pool_of(corpus)
    taxonomy = corpus.taxonomy()
    parent = {c: taxonomy.parent(c) for c in taxonomy.ids}
    scorer = Scorer(corpus)
    baseline = scorer.outcomes(shipped)
    print(f"pool: {len(queries):,} real-text validation queries; scoring on real-title test "
          f"({len(scorer.sets['real-title'].queries):,}) and real-2tok test ({len(scorer.sets['real-2tok'].queries):,}); "
          f"shipped strict top-1 " + ", ".join(f"{n} {baseline[n]['strict'].mean():.4f}" for n in POOLED), flush=True)
    # The same training without judged data: how far retraining alone moves the model from the
    # shipped one (code changed since it was built), the baseline that isolates what judging adds.
    control_outcomes = scorer.outcomes(build_hybrid(corpus, log=lambda message: None)[0])
    control = scorer.paired(control_outcomes, baseline)
    print(f"rebuilt without judged data vs shipped: pooled strict {control['strict']['pooled'][0]:+.4f} ± "
          f"{control['strict']['pooled'][1]:.4f}", flush=True)
    # --keep-routing: the shipped cutoff and blend held, so that a cell differs by what the parts learnt
    routing = (shipped.cutoff, shipped.blend) if args.keep_routing else None
    impressions = np.ones(len(queries))
    segments = np.full(len(queries), "tail", dtype=object)
    results = {"pool": len(queries), "noise": args.noise, "weight": args.weight, "routing": routing, "control": control,
               "cells": []}
    with tempfile.TemporaryDirectory(prefix="qcat-curve-") as scratch:
        # seed outermost: a run cut short still has every selection and budget of its first seeds
        for seed in args.seeds:
            for budget in args.budgets:
                for kind in args.select:
                    cell_started = time.perf_counter()
                    chosen = select_queries(queries, impressions, segments, [shipped, nb_part], kind, budget, seed)
                    picked = [queries[i] for i in chosen]
                    gold = Path(scratch) / f"{kind}-{budget}-{seed}.tsv"
                    judged = judged_file(gold, picked, shown_categories([shipped, nb_part], picked), truth, parent,
                                         args.noise, seed)
                    model = build_hybrid(corpus, judged=[gold], judged_weight=args.weight, log=lambda message: None,
                                         routing=routing)[0]
                    outcomes = scorer.outcomes(model)
                    paired = scorer.paired(outcomes, baseline)
                    cell = {"select": kind, "budget": budget, "seed": seed, "judged": judged,
                            "chosen": model.metrics["selection"]["chosen"], "paired": paired,
                            "against_control": scorer.paired(outcomes, control_outcomes),
                            "seconds": round(time.perf_counter() - cell_started, 1)}
                    results["cells"].append(cell)
                    args.out.write_text(json.dumps(results, indent=1) + "\n")  # what has run so far
                    strict, own = paired["strict"]["pooled"], cell["against_control"]["strict"]["pooled"]
                    print(f"{kind:<9} {budget:>5} seed {seed}: pooled strict {strict[0]:+.4f} ± {strict[1]:.4f} "
                          f"(against the rebuilt {own[0]:+.4f} ± {own[1]:.4f}), "
                          f"lenient {paired['lenient']['pooled'][0]:+.4f}, severe {paired['severe']['pooled'][0]:+.4f} "
                          f"({cell['seconds']:.0f} s)", flush=True)
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results


def summary(results: dict) -> dict:
    """Per selection and budget: the mean over seeds of each pooled difference, and its SE (the
    seeds' mean of paired SEs: the seeds share the test queries, so their SEs do not shrink)."""
    out: dict = {}
    for cell in results["cells"]:
        key = f"{cell['select']} {cell['budget']}"
        out.setdefault(key, {"select": cell["select"], "budget": cell["budget"], "cells": []})["cells"].append(cell)
    for row in out.values():
        for kind in OUTCOMES:
            values = np.array([c["paired"][kind]["pooled"] for c in row["cells"]])
            row[kind] = [float(values[:, 0].mean()), float(values[:, 1].mean()),
                         float(values[:, 0].std(ddof=1)) if len(values) > 1 else 0.0]
        own = [c["against_control"]["strict"]["pooled"] for c in row["cells"] if "against_control" in c]
        row["strict vs rebuilt"] = [float(np.mean([o[0] for o in own])), float(np.mean([o[1] for o in own]))] if own else None
        row["seeds"] = len(row["cells"])
        del row["cells"]
    return out


def markdown(rows: dict) -> str:
    lines = ["| selection | budget | seeds | strict (± paired SE) | in SE | lenient | severe | strict vs rebuilt without judging |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows.values():
        strict, own = row["strict"], row["strict vs rebuilt"]
        lines.append(f"| {row['select']} | {row['budget']:,} | {row['seeds']} | {strict[0]:+.4f} ± {strict[1]:.4f} | "
                     f"{strict[0] / strict[1]:+.1f} | {row['lenient'][0]:+.4f} ± {row['lenient'][1]:.4f} | "
                     f"{row['severe'][0]:+.4f} ± {row['severe'][1]:.4f} | "
                     + (f"{own[0]:+.4f} ± {own[1]:.4f} |" if own else "– |"))
    return "\n".join(lines)


def plot(rows: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharex=True)
    for ax, kind in zip(axes, OUTCOMES):
        for select in SELECTIONS:
            points = sorted((r["budget"], r[kind][0], r[kind][1]) for r in rows.values() if r["select"] == select)
            if points:
                x, y, se = map(np.array, zip(*points))
                ax.errorbar(x, y, yerr=2 * se, marker="o", capsize=3, label=select)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(f"{kind} top-1 − shipped (pooled)")
        ax.set_xlabel("queries judged (simulated judges)")
    axes[0].set_ylabel("difference, ±2 paired SE")
    axes[0].legend()
    fig.suptitle("Training on judged queries: the demo's real-text test sets (SIMULATED judges)")
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")], default=[100, 300, 1000])
    parser.add_argument("--select", type=lambda s: s.split(","), default=list(SELECTIONS))
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    parser.add_argument("--noise", type=float, default=0.15, help="chance a judge moves a grade by one (default 0.15)")
    parser.add_argument("--weight", type=float, default=None,
                        help="the judged pairs' weight (default: chosen on validation, as --judged-weight's default)")
    parser.add_argument("--keep-routing", action="store_true",
                        help="keep the shipped hybrid's cutoff and blend (default: chosen again, as build-demo does)")
    parser.add_argument("--out", type=Path, required=True, help="JSON of every cell")
    parser.add_argument("--plot", type=Path, default=None, help="the learning curve (SVG/PNG)")
    parser.add_argument("--from", dest="saved", type=Path, default=None, help="summarize a saved --out, run nothing")
    args = parser.parse_args(argv)
    try:
        results = json.loads(args.saved.read_text()) if args.saved else run(args)
    except InputError as exc:
        print(f"learning_curve: error: {exc}", file=sys.stderr)
        return 2
    if not args.saved:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    rows = summary(results)
    print(markdown(rows))
    if args.plot:
        plot(rows, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
