"""Go/no-go probe of the re-ranker (issue 32): does a learned second stage over the demo model's
candidates gain on the validation objective, out of fold?

Builds the candidates and features of the validation sets (simulated, real-title, real-2tok)
from the shipped demo model's parts and a BM25 vote over the demo catalog's training listings
(held-out listings excluded), cross-fits LightGBM lambdarank (5 folds by the query's first two
tokens) and prints each set's PR@1: first stage, re-ranked out of fold, and the oracle (the
right leaf among the candidates).

    python benchmarks/probe_rerank.py [--sim-limit 6000] [--out probe.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from qcat.bundles.demo import demo_model_dir  # noqa: E402
from qcat.classifier import load_model  # noqa: E402
from qcat.rerank.features import feature_names  # noqa: E402
from qcat.rerank.model import RerankModel  # noqa: E402
from qcat.training.data.corpus import Corpus  # noqa: E402
from qcat.training.data.dataset import subset_queries  # noqa: E402
from qcat.training.rerank.data import build_examples, label_prior, neighbour_index  # noqa: E402
from qcat.training.rerank.trainer import BASE_PARAMS, crossfit, no_leak_check  # noqa: E402
from qcat.training.selection.objective import WEIGHTS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sim-limit", type=int, default=0, help="use a seeded sample of this many simulated validation queries")
    parser.add_argument("--rounds", default="50,100,200,400")
    parser.add_argument("--leaves", type=int, default=31)
    parser.add_argument("--set-weights", default="", help="each set's share of the training signal, e.g. 0.2,0.4,0.4 "
                        "(0 leaves a set out of training); default: by queries")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    first = load_model(demo_model_dir())
    corpus = Corpus.open()
    catalog = corpus.catalog()
    index, counts = neighbour_index(catalog, corpus.holdout_split(catalog) == 0, first.labels, first.taxonomy)
    dataset = corpus.dataset("base")
    model = RerankModel(first=first, index=index, prior=label_prior(dataset.train, first.labels), trees=None,
                        taxonomy=first.taxonomy, config={}, metrics={})
    print(f"index: {counts}; {time.perf_counter() - started:.0f} s")
    simulated = dataset.validation
    if args.sim_limit and args.sim_limit < len(simulated.queries):
        keep = np.zeros(len(simulated.queries), bool)
        keep[np.random.default_rng(0).choice(len(keep), args.sim_limit, replace=False)] = True
        simulated = subset_queries(simulated, keep)
    tables = {"simulated": simulated, "real-title": corpus.query_set("real-title", "validation", dataset.taxonomy),
              "real-2tok": corpus.query_set("real-2tok", "validation", dataset.taxonomy)}
    examples = []
    for name, table in tables.items():
        ex = build_examples(model, table, name)
        examples.append(ex)
        print(f"{name}: {len(ex.queries):,} queries, {len(ex.relevant):,} candidates "
              f"({len(ex.relevant) / max(len(ex.queries), 1):.1f} per query); {time.perf_counter() - started:.0f} s")
    no_leak_check(examples)
    rounds = tuple(int(r) for r in args.rounds.split(","))
    params = BASE_PARAMS | {"num_leaves": args.leaves}
    set_weights = [float(w) for w in args.set_weights.split(",")] if args.set_weights else None
    oof = crossfit(examples, params, rounds, names=list(feature_names(model.answers)), set_weights=set_weights)
    report = {"sets": {}, "rounds": {}}
    for ex in examples:
        first_hit = ex.top1_hit(-ex.first_rank)
        report["sets"][ex.name] = {"queries": len(ex.queries), "first_stage_pr@1": round(first_hit.mean(), 4),
                                   "oracle_pr@1": round(ex.reachable.mean(), 4)}
    for r in rounds:
        per_set = {}
        for s, ex in enumerate(examples):
            hit = ex.top1_hit(oof[r][s])
            base = ex.top1_hit(-ex.first_rank)
            diff = hit - base
            per_set[ex.name] = {"pr@1": round(hit.mean(), 4), "gain": round(diff.mean(), 4),
                                "paired_se": round(diff.std(ddof=1) / np.sqrt(len(diff)), 4)}
        objective = sum(WEIGHTS[n] * v["pr@1"] for n, v in per_set.items())
        base_objective = sum(WEIGHTS[n] * report["sets"][n]["first_stage_pr@1"] for n in per_set)
        report["rounds"][r] = {"objective": round(objective, 4), "first_stage_objective": round(base_objective, 4),
                               "sets": per_set}
        print(f"rounds {r}: objective {objective:.4f} (first stage {base_objective:.4f}); "
              + "; ".join(f"{n} {v['pr@1']:.4f} ({v['gain']:+.4f} ± {v['paired_se']:.4f})" for n, v in per_set.items()))
    print(json.dumps(report["sets"]))
    print(f"done in {time.perf_counter() - started:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
