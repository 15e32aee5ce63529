"""qcat bundles against fastText and Omikuji on simulated and real text, in one run.

Both peers train on exactly the demo corpus's base-period train split (``dataset.train``);
every model, peer or qcat bundle (``--model NAME=DIR``, repeatable), is then scored on:

- the simulated test split: PR@1 over all queries and over head / torso / tail
  (``qcat.measure.segments.segment_by_impressions``);
- real text: ``real-title`` and ``real-2tok`` test (whole titles of held-out catalog
  listings and their first two tokens) and the 18 ``real-queries``: PR@1 and PR@3;
- training time (peers: measured here, writing their input files included; bundles:
  ``train_seconds`` from the manifest's metrics or top level, else the sum over its parts'
  manifests, e.g. a hybrid's NB and XReg, else "–");
- prediction time in ms per query: best of 3 runs over the simulated test queries, top 10,
  from the query text (normalizing and featurizing included), one batch call per run
  (Omikuji's Python API predicts one query at a time, so its run is a loop).

The peers:

- fastText (fasttext-wheel) supervised on word unigrams + bigrams (``wordNgrams 2``, no
  character n-grams, as the tf-idf models), 100-d, full softmax, 10 epochs, lr 0.5, chosen
  on the validation splits (simulated validation PR@1 / real-title / real-2tok validation
  PR@1: hierarchical softmax 25 epochs .825/.647/.369 in 36 s, 50 epochs .830/.645/.372;
  softmax 5 epochs .856/.669/.383 in 169 s, 10 epochs .867/.672/.388 in 311 s). One line
  per (train query, category) pair, repeated ``ceil(log2(1 + clicks))`` times: the click
  share shapes the softmax targets without letting a head query with 10,000 clicks drown
  everything else (raw clicks would repeat a line up to 12,913 times; the log gives 2 to 14
  repeats, 594k lines). One thread and a fixed seed, so a rerun trains the same model.
  Its Python ``predict`` breaks on numpy 2, so ``model.f.predict`` is called directly.
- Omikuji (Parabel trees, default hyperparameters, one thread) on the tf-idf unigram +
  bigram rows that qcat's XReg uses (``qcat.training.xreg.features``), one row per train query
  with all its categories as (binary) labels, written as in ``bench_xreg.py``. Omikuji
  takes no seed, so its figures move a little between runs (two runs: simulated PR@1
  .901/.903, real-title PR@1 .727/.733).

    python benchmarks/bench_real_text.py --model NB=demo/qcat_demo/model \\
        --model XReg=/tmp/xreg --model "NB+XReg=/tmp/hybrid" --out real_text.json

``--baseline NAME`` (default: the first ``--model``) adds a second table: each model's difference
from it on the simulated test split and the real-text sets (PR@1 and PR@3), with the paired
standard error over the queries (the standard deviation of the per-query differences / sqrt(n)).

``--skip-peers`` scores the bundles only; ``--real-split validation`` scores real-title and
real-2tok on their validation split (for choosing between variants; report test).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_xreg import best_of

# OmikujiPeer: bench_single_query.py imports it from here
from real_text_peers import FASTTEXT, PEERS, OmikujiPeer  # noqa: F401
from real_text_tables import (
    OUTCOMES,
    error_table,
    markdown_table,
    mean_se,
    paired_rows,
    paired_table,
    print_pooled,
)

from qcat.measure.metrics import pr_at_k
from qcat.measure.predict import match_to_truth
from qcat.measure.segments import SEGMENTS, segment_by_impressions
from qcat.models.model import Predictions

K = 10
REAL_SETS = ("real-title", "real-2tok", "real-queries")


def bundle_train_seconds(directory: Path) -> float | None:
    """``train_seconds`` of a bundle's manifest (in its metrics or at its top level), else the
    sum over the manifests of its parts (subdirectories), else None."""
    manifest = json.loads((directory / "manifest.json").read_text())
    for found in (manifest.get("metrics", {}).get("train_seconds"), manifest.get("train_seconds")):
        if found is not None:
            return float(found)
    parts = [bundle_train_seconds(p) for p in sorted(directory.iterdir()) if (p / "manifest.json").is_file()]
    return sum(parts) if parts and None not in parts else None


def query_sets(corpus, dataset, real_split: str = "test") -> dict:
    """The evaluation tables: the simulated test split and the real-text sets of ``real_split``
    (real-queries has no split)."""
    sets = {"sim-test": dataset.test}
    sets |= {name: corpus.query_set(name, real_split) for name in REAL_SETS}
    return sets


LENIENCY = None  # set in main(): the confusable map and departments (qcat.measure.leniency.Leniency) per set


def labels_of(table) -> np.ndarray:
    """The truth's columns: every leaf of the taxonomy, then the other categories ``table`` names
    (:func:`qcat.training.selection.table_metrics.label_space`), so that an answer the set never has
    as its gold is still known (its department, its pairs)."""
    from qcat.training.selection.table_metrics import label_space

    return label_space(LENIENCY[0], table.categories)


def outcomes_of(matched, table) -> dict[str, np.ndarray]:
    """Per valid query: strict, lenient (where there is a map) and severe top-1 (0/1 each)."""
    from qcat.measure.leniency import Leniency, top1_outcomes

    taxonomy, confusable = LENIENCY
    outcome = top1_outcomes(matched, Leniency.build(labels_of(table), taxonomy, confusable))
    return {name: outcome[name].astype(np.float64) for name in ("strict", "lenient", "severe")
            if outcome[name] is not None}


def matched_on(model, table, predictions: Predictions | None = None):
    """The top K against the truth over :func:`labels_of` (PR@k does not depend on the columns;
    lenient and severe need every answer's category known)."""
    from qcat.training.selection.table_metrics import truth_over

    predictions = predictions or model.predict(list(table.queries), K)
    labels = labels_of(table)
    truth = truth_over(table, {label: i for i, label in enumerate(labels)})
    return match_to_truth(predictions.labels, predictions.scores, model.labels, labels, truth)


def per_query_pr(matched, k: int) -> np.ndarray:
    """PR@k of each query (NaN where it has no true category): what paired errors compare."""
    hits = matched.hits[:, :k].sum(axis=1)
    return np.where(matched.valid, hits / np.maximum(np.minimum(k, matched.n_true), 1), np.nan)


def score(model, sets: dict, simulated_predictions: Predictions, per_query: dict | None = None) -> dict[str, float]:
    """PR@1 on the simulated test split and its segments, PR@1/3 on the real sets; with
    ``per_query``, each query's PR@1 and PR@3 of the paired sets go into it too."""
    test = sets["sim-test"]
    matched = matched_on(model, test, simulated_predictions)
    outcome = outcomes_of(matched, test)
    if per_query is not None:
        per_query["sim-test"] = {k: per_query_pr(matched, k) for k in (1, 3)} | outcome
    segment = segment_by_impressions(np.nan_to_num(test.query_impressions))
    row = {"sim PR@1": pr_at_k(matched, 1)} | {f"sim {name}": float(values.mean()) for name, values in outcome.items()
                                               if name != "strict"}
    row |= {f"sim {name} PR@1": pr_at_k(matched.subset(segment == s), 1) for s, name in enumerate(SEGMENTS)}
    for name in REAL_SETS:
        real = matched_on(model, sets[name])
        outcome = outcomes_of(real, sets[name])
        if per_query is not None:
            per_query[name] = {k: per_query_pr(real, k) for k in (1, 3)} | outcome
        row |= {f"{name} PR@1": pr_at_k(real, 1), f"{name} PR@3": pr_at_k(real, 3)} | {
            f"{name} {kind}": float(values.mean()) for kind, values in outcome.items() if kind != "strict"}
    return row


def timed_predictions(model, queries: list[str]) -> tuple[Predictions, float]:
    """The top K of ``queries`` and the best of 3 batch runs in ms per query."""
    return best_of(lambda: model.predict(queries, K), len(queries))


def evaluate(name: str, model, sets: dict, train_seconds: float | None, per_query: dict | None = None) -> dict:
    predictions, predict_ms = timed_predictions(model, list(sets["sim-test"].queries))
    row = score(model, sets, predictions, per_query) | {"train s": train_seconds, "predict ms/q": predict_ms}
    print(name, json.dumps(row), flush=True)
    return row


def parse_models(specs: list[str]) -> dict[str, Path]:
    models = {}
    for spec in specs:
        name, sep, directory = spec.partition("=")
        if not sep or not name or not directory:
            raise SystemExit(f"--model wants NAME=DIR, got {spec!r}")
        models[name] = Path(directory)
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR", help="a qcat bundle (repeatable)")
    parser.add_argument("--skip-peers", action="store_true", help="score the bundles only")
    parser.add_argument("--real-split", choices=("test", "validation"), default="test",
                        help="split of real-title and real-2tok (default test; validation for model selection)")
    parser.add_argument("--baseline", default=None, metavar="NAME",
                        help="the model (a NAME of --model or a peer) paired errors are taken against (default: the first --model)")
    parser.add_argument("--confusable", default=None, metavar="FILE",
                        help="the confusable map lenient top-1 credits (default: the one the demo corpus ships)")
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--pooled", default=None, metavar="JSON",
                        help="print the paired differences of a saved --out file pooled over real-title and real-2tok, "
                             "and stop")
    args = parser.parse_args()
    if args.pooled:
        print_pooled(args.pooled)
        return
    bundles = parse_models(args.model)
    missing = [] if args.skip_peers else [m for m in ("fasttext", "omikuji") if importlib.util.find_spec(m) is None]
    if missing:  # before minutes of work, not after
        raise SystemExit(f"the peers need {', '.join(missing)}: pip install -e \".[bench]\" (or --skip-peers)")

    from qcat.classifier import load_model
    from qcat.taxonomy.confusable import load_confusable
    from qcat.training.data.corpus import Corpus

    global LENIENCY
    corpus = Corpus.open()
    dataset = corpus.dataset("base")
    confusable = load_confusable(args.confusable, dataset.taxonomy) if args.confusable else corpus.confusable()
    LENIENCY = (dataset.taxonomy, confusable)
    print(f"confusable map: {confusable.describe() if confusable else 'none (lenient not reported)'}", flush=True)
    sets = query_sets(corpus, dataset, args.real_split)
    print("sets: " + ", ".join(f"{name} {len(table.queries):,}" for name, table in sets.items()), flush=True)
    results: dict[str, dict] = {}
    per_query: dict[str, dict] = {}
    workdir = Path(tempfile.mkdtemp(prefix="bench_real_text_"))
    try:
        for name, peer in ({} if args.skip_peers else PEERS).items():
            started = time.perf_counter()
            model = peer.train(dataset.train, workdir)
            results[name] = evaluate(name, model, sets, time.perf_counter() - started, per_query.setdefault(name, {}))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for name, directory in bundles.items():
        results[name] = evaluate(name, load_model(directory), sets, bundle_train_seconds(directory),
                                 per_query.setdefault(name, {}))
    print(markdown_table(results))
    print(error_table(per_query))
    baseline = args.baseline or (next(iter(bundles)) if bundles else None)
    paired = paired_rows(per_query, baseline) if baseline in per_query else {}
    if paired:
        print(paired_table(paired, baseline))
    if args.out:
        errors = {name: {set_name: {kind: mean_se(values[kind]) for kind in OUTCOMES if kind in values}
                         for set_name, values in sets.items()} for name, sets in per_query.items()}
        saved = {"results": results, "paired": {"baseline": baseline, "rows": paired}, "fasttext": FASTTEXT, "k": K,
                 "strict_lenient_severe": errors,
                 "confusable": None if confusable is None else {"source": confusable.source, "sha256": confusable.sha256,
                                                                "pairs": len(confusable)},
                 "real_split": args.real_split,
                 "sets": {name: len(table.queries) for name, table in sets.items()}}
        Path(args.out).write_text(json.dumps(saved, indent=2) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
