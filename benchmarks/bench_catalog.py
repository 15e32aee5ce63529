"""The catalog as a training source (issue 23): log only, catalog only and both, and a row per
short-form rule, on the demo corpus, in one run.

Every model is the demo's NB + XReg hybrid (:func:`qcat.training.commands.build_demo.build_hybrid`: NB tuned
on the objective, XReg with |w| >= 1, the hybrid's cutoff and blend chosen on the objective):

- ``log only``: the simulated log's base period (``--log-only DIR``: a bundle built by
  ``qcat data build-demo --model-only --catalog-source log``, else built here);
- ``log + catalog``: plus the demo catalog's listings and short forms, the weights and rules
  chosen per part on the validation objective (``--both DIR``: a bundle built by
  ``qcat data build-demo --model-only --catalog-source both``, else built here);
- ``catalog only``: the catalog alone (cold start; its own held-out titles validate beside
  the real-text sets): ``--catalog-only DIR``, a hybrid of ``qcat train nb|xreg --catalog
  demo/qcat_demo/corpus/catalog.csv.gz --catalog-only`` (XReg ``--prune 1``), else built here;
- ``log + titles``: the chosen title weights, no short forms; and one row per short-form rule:
  each part's chosen title and short weights (a short weight of 1 where a part chose none)
  with that rule alone, built here.

Each is scored on the simulated test split, ``real-title`` and ``real-2tok`` test and the 18
``real-queries``: PR@1 and PR@3 (top-1 / top-3), each with a paired sign-flip permutation test
against ``log only`` over the same queries (two-sided p, 20,000 draws, seeded).
``real-2tok`` is cut as the ``lead2`` rule cuts titles: a gain there from ``lead2`` may be
the cut, not the shoppers' queries (compare ``real-queries``, small as it is).

    nice -n 19 env NUMBA_NUM_THREADS=1 python benchmarks/bench_catalog.py --work /tmp/catalog_bench \\
        --log-only /tmp/demo_log --both /tmp/demo_both [--catalog-only /tmp/cold-hybrid] --out catalog_bench.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

SETS = ("simulated", "real-title", "real-2tok", "real-queries")
DRAWS = 20_000


def evaluation_sets(corpus) -> dict:
    """Name -> test table: the simulated test split and the real-text test sets."""
    taxonomy = corpus.taxonomy()
    sets = {"simulated": corpus.dataset("base").test}
    for name in ("real-title", "real-2tok", "real-queries"):
        sets[name] = corpus.query_set(name, "test", taxonomy)
    return sets


def per_query(model, table, k: int = 3) -> dict[str, np.ndarray]:
    """Per query of ``table``: PR@1, PR@3, the top-1 score and the query's token count."""
    from qcat.measure.predict import predict_matched
    from qcat.training.data.dataset import truth_matrix

    matched = predict_matched(model, table.queries, table.categories, truth_matrix(table), k)
    n_true = np.maximum(matched.n_true, 1)
    return {"pr@1": matched.hits[:, :1].sum(axis=1) / np.minimum(1, n_true),
            "pr@3": matched.hits[:, :3].sum(axis=1) / np.minimum(3, n_true),
            "top1": matched.hits[:, 0].astype(np.float64),
            "score": np.where(matched.labels[:, 0] >= 0, matched.scores[:, 0], -np.inf),
            "tokens": np.fromiter((q.count(" ") + 1 for q in table.queries), dtype=np.int64, count=len(table.queries))}


def paired_p(a: np.ndarray, b: np.ndarray, draws: int = DRAWS, seed: int = 0) -> float:
    """Two-sided p of a paired sign-flip permutation test of mean(a - b) = 0."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    d = d[d != 0]
    if not len(d):
        return 1.0
    observed = abs(d.sum())
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(draws, len(d)))
    return float(((np.abs(signs @ d) >= observed - 1e-9).sum() + 1) / (draws + 1))


def load_or_build(name: str, directory: Path | None, work: Path, build) -> tuple[object, Path, float | None]:
    from qcat.classifier import load_model
    from qcat.training.commands.bundles import save_bundle

    if directory is not None:
        return load_model(directory), directory, None
    target = work / name.replace(" ", "_").replace("+", "and")
    if target.exists():
        return load_model(target), target, None
    started = time.perf_counter()
    hybrid, dataset, also_seen, nodes = build()
    seconds = time.perf_counter() - started
    save_bundle(hybrid, target, dataset, also_seen, nodes=nodes)
    return load_model(target), target, seconds


def chosen_settings(bundle: Path) -> dict[str, dict]:
    """Each part's chosen catalog settings, from its manifest."""
    out = {}
    for part in ("nb", "xreg"):
        data = json.loads((bundle / part / "manifest.json").read_text())["config"]["data"]
        out[part] = data["catalog_training"]["settings"]
    return out


def main(argv=None) -> int:
    from qcat.training.catalog.data import CatalogData
    from qcat.training.catalog.short_forms import RULES
    from qcat.training.commands.build_demo import build_hybrid, hybrid_objective
    from qcat.training.data.corpus import Corpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="directory for the bundles built here")
    parser.add_argument("--log-only", type=Path, default=None)
    parser.add_argument("--both", type=Path, default=None)
    parser.add_argument("--catalog-only", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True, help="JSON of every figure")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)

    corpus = Corpus.open()
    catalog = corpus.path("catalog")

    def data(catalog_only=False):
        return CatalogData(catalog, corpus, catalog_only=catalog_only, period="base")

    models = {}
    models["log only"] = load_or_build("log only", args.log_only, args.work, lambda: build_hybrid(corpus))
    models["log + catalog"] = load_or_build("log + catalog", args.both, args.work, lambda: build_hybrid(corpus, data()))
    models["catalog only"] = load_or_build("catalog only", args.catalog_only, args.work,
                                           lambda: build_hybrid(corpus, data(True)))
    chosen = chosen_settings(models["log + catalog"][1])
    print("log + catalog chose: " + json.dumps(chosen))

    def fixed(short_weight=None, rules=None):
        return {part: {"title_weight": s["title_weight"],
                       "short_weight": short_weight if short_weight is not None else (s["short_weight"] or 1.0),
                       "rules": rules if rules is not None else ()} for part, s in chosen.items()}

    models["log + titles"] = load_or_build("log + titles", None, args.work,
                                           lambda: build_hybrid(corpus, data(), fixed(0.0, ())))
    for rule in RULES:
        models[f"log + {rule}"] = load_or_build(f"log + {rule}", None, args.work,
                                                lambda rule=rule: build_hybrid(corpus, data(), fixed(None, (rule,))))

    tables = evaluation_sets(corpus)
    results, scored = {}, {}
    for name, (model, directory, seconds) in models.items():
        scored[name] = {set_name: per_query(model, table) for set_name, table in tables.items()}
        manifest = json.loads((directory / "manifest.json").read_text())
        results[name] = {"bundle": str(directory), "build_seconds": seconds,
                         "validation_objective": hybrid_objective(manifest["metrics"]),
                         "chosen": manifest["metrics"]["selection"]["chosen"],
                         "catalog": {part: json.loads((directory / part / "manifest.json").read_text())["config"]["data"]
                                     .get("catalog_training", {}).get("settings") for part in ("nb", "xreg")}}
        for set_name in SETS:
            values = scored[name][set_name]
            base = scored["log only"][set_name]
            results[name][set_name] = {
                "queries": int(len(values["pr@1"])),
                **{metric: round(100 * float(values[metric].mean()), 2) for metric in ("pr@1", "pr@3")},
                **({} if name == "log only" else
                   {f"p {metric}": paired_p(values[metric], base[metric]) for metric in ("pr@1", "pr@3")})}
        print(name + ": " + json.dumps({s: results[name][s] for s in SETS}))
    args.out.write_text(json.dumps({"models": results}, indent=1) + "\n")
    print(markdown(results))
    return 0


def markdown(results: dict) -> str:
    lines = ["| model | objective | " + " | ".join(f"{s} top-1 / top-3" for s in SETS) + " |",
             "|---|---:|" + "---:|" * len(SETS)]
    for name, row in results.items():
        cells = []
        for s in SETS:
            cell = f"{row[s]['pr@1']:.2f} / {row[s]['pr@3']:.2f}"
            if "p pr@1" in row[s]:
                cell += f" (p {row[s]['p pr@1']:.2g} / {row[s]['p pr@3']:.2g})"
            cells.append(cell)
        lines.append(f"| {name} | {row['validation_objective']:.4f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
