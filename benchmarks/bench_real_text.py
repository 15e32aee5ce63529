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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_xreg import best_of, xc_format  # noqa: E402

from qcat.measure.metrics import pr_at_k  # noqa: E402
from qcat.measure.predict import match_to_truth  # noqa: E402
from qcat.measure.segments import SEGMENTS, segment_by_impressions  # noqa: E402
from qcat.model import Predictions  # noqa: E402
from qcat.normalize import tokenize  # noqa: E402

K = 10
SEED = 0
REAL_SETS = ("real-title", "real-2tok", "real-queries")
FASTTEXT = {"loss": "softmax", "wordNgrams": 2, "dim": 100, "epoch": 10, "lr": 0.5, "minCount": 1,
            "bucket": 1_000_000, "thread": 1, "seed": SEED, "verbose": 0}


# -- the peers: qcat's predict protocol (labels, predict(queries, k) -> Predictions) -----------


def normalized(queries: Sequence[str]) -> list[str]:
    return [" ".join(tokenize(q)) for q in queries]


def click_repeats(clicks: np.ndarray) -> np.ndarray:
    """Lines per (query, category) pair in fastText's training file: ceil(log2(1 + clicks))."""
    return np.ceil(np.log2(1.0 + clicks)).astype(np.int64)


@dataclass
class FastTextPeer:
    model: object  # fasttext's _FastText
    labels: tuple[str, ...]  # taxonomy ids in the model's label order

    @classmethod
    def train(cls, table, workdir: Path) -> "FastTextPeer":
        import fasttext

        path = workdir / "fasttext_train.txt"
        with open(path, "w") as out:
            for q, c, n in zip(table.pair_query, table.pair_category, click_repeats(table.clicks)):
                out.write(f"__label__{table.categories[c]} {table.queries[q]}\n" * int(n))
        model = fasttext.train_supervised(input=str(path), **FASTTEXT)
        return cls(model, tuple(name.removeprefix("__label__") for name in model.labels))

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        position = {f"__label__{label}": i for i, label in enumerate(self.labels)}
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for row, text in enumerate(normalized(queries)):
            for j, (probability, name) in enumerate(self.model.f.predict(text + "\n", k, 0.0, "strict")):
                labels[row, j], scores[row, j] = position[name], probability
        return Predictions(labels, scores, ("fasttext",) * len(queries))


@dataclass
class OmikujiPeer:
    model: object  # omikuji.Model
    features: object  # qcat.xreg.TfidfFeatures
    labels: tuple[str, ...]

    @classmethod
    def train(cls, table, workdir: Path) -> "OmikujiPeer":
        import omikuji

        from qcat.training.xreg.features import featurize, fit_tfidf
        from qcat.training.xreg.relevance import relevance_matrix

        used = np.unique(table.pair_category)
        columns = np.full(len(table.categories), -1, dtype=np.int64)
        columns[used] = np.arange(len(used))
        features = fit_tfidf(table.queries)
        path = workdir / "omikuji_train.txt"
        xc_format(path, featurize(features, table.queries), relevance_matrix(table, columns))
        model = omikuji.Model.train_on_data(str(path), omikuji.Model.default_hyper_param(), n_threads=1)
        return cls(model, features, tuple(table.categories[used]))

    def predict(self, queries: Sequence[str], k: int) -> Predictions:
        rows = self.features.transform([tokenize(q) for q in queries])
        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for i in range(rows.n):
            lo, hi = rows.indptr[i], rows.indptr[i + 1]
            pairs = list(zip(rows.indices[lo:hi].tolist(), rows.data[lo:hi].tolist()))
            for j, (label, score) in enumerate(self.model.predict(pairs, beam_size=10, top_k=k) if pairs else []):
                labels[i, j], scores[i, j] = label, score
        return Predictions(labels, scores, ("omikuji",) * len(queries))


PEERS = {"fastText": FastTextPeer, "Omikuji (Parabel)": OmikujiPeer}


# -- bundles ---------------------------------------------------------------------------------


def bundle_train_seconds(directory: Path) -> float | None:
    """``train_seconds`` of a bundle's manifest (in its metrics or at its top level), else the
    sum over the manifests of its parts (subdirectories), else None."""
    manifest = json.loads((directory / "manifest.json").read_text())
    for found in (manifest.get("metrics", {}).get("train_seconds"), manifest.get("train_seconds")):
        if found is not None:
            return float(found)
    parts = [bundle_train_seconds(p) for p in sorted(directory.iterdir()) if (p / "manifest.json").is_file()]
    return sum(parts) if parts and None not in parts else None


# -- scoring ---------------------------------------------------------------------------------


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


PAIRED = {"sim": "sim-test", "real-title": "real-title", "real-2tok": "real-2tok"}
OUTCOMES = ("strict", "lenient", "severe")  # top-1 strict (= PR@1), lenient and severe, paired too


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


# -- output ----------------------------------------------------------------------------------

COLUMNS = ("sim PR@1", "sim head PR@1", "sim torso PR@1", "sim tail PR@1",
           "real-title PR@1", "real-title PR@3", "real-2tok PR@1", "real-2tok PR@3",
           "real-queries PR@1", "real-queries PR@3", "train s", "predict ms/q")
# Strict top-1 is PR@1; lenient credits an answer confusable with the gold; severe: another department.
ERROR_COLUMNS = tuple(f"{s} {kind}" for s in ("sim", "real-title", "real-2tok") for kind in OUTCOMES)


def cell(column: str, value) -> str:
    if value is None:
        return "–"
    if column == "train s":
        return f"{value:.1f}"
    return f"{value:.3f}"


def markdown_table(results: dict[str, dict]) -> str:
    lines = ["| model | " + " | ".join(COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
    lines += [f"| {name} | " + " | ".join(cell(c, row.get(c)) for c in COLUMNS) + " |" for name, row in results.items()]
    return "\n".join(lines)


def mean_se(values: np.ndarray) -> tuple[float, float]:
    values = values[~np.isnan(values)]
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(len(values)))


def paired_rows(per_query: dict[str, dict], baseline: str) -> dict[str, dict]:
    """Each model's PR@1/PR@3 and strict/lenient/severe top-1 minus the baseline's per set, and the
    paired standard error."""
    rows = {}
    base = per_query[baseline]
    for name, sets in per_query.items():
        row = {}
        for short, set_name in PAIRED.items():
            for key in (1, 3, *OUTCOMES):
                if key in sets[set_name] and key in base[set_name]:
                    label = f"{short} PR@{key}" if isinstance(key, int) else f"{short} {key}"
                    row[label] = mean_se(sets[set_name][key] - base[set_name][key])
        rows[name] = row
    return rows


def error_table(per_query: dict[str, dict]) -> str:
    """Strict, lenient and severe top-1 of every model on the paired sets, each ± its standard error."""
    columns = [(short, set_name, kind) for short, set_name in PAIRED.items() for kind in OUTCOMES]
    lines = ["| model | " + " | ".join(f"{short} {kind}" for short, _, kind in columns) + " |",
             "|" + "---|" * (len(columns) + 1)]
    for name, sets in per_query.items():
        cells = []
        for _, set_name, kind in columns:
            cells.append("–" if kind not in sets[set_name] else "{:.4f} ± {:.4f}".format(*mean_se(sets[set_name][kind])))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired_table(rows: dict[str, dict], baseline: str) -> str:
    columns = [c for c in (f"{short} {key}" if key in OUTCOMES else f"{short} PR@{key}"
                           for short in PAIRED for key in (1, 3, *OUTCOMES)) if any(c in row for row in rows.values())]
    lines = [f"| vs {baseline} (difference ± paired SE) | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
    lines += [f"| {name} | " + " | ".join(f"{row[c][0]:+.4f} ± {row[c][1]:.4f}" if c in row else "–" for c in columns)
              + " |" for name, row in rows.items()]
    return "\n".join(lines)


POOLED = ("real-title", "real-2tok")


def pooled_rows(saved: dict) -> dict[str, dict]:
    """Each model's paired difference from the baseline pooled over the real-text test sets (the sets'
    differences weighted by their sizes; the sets are independent samples, so their variances add)."""
    sizes = {name: saved["sets"][name] for name in POOLED}
    total = sum(sizes.values())
    rows = {}
    for model, row in saved["paired"]["rows"].items():
        rows[model] = {}
        for kind in OUTCOMES:
            cells = [row.get(f"{name} {kind}") for name in POOLED]
            if None in cells:
                continue
            mean = sum(sizes[name] * cell[0] for name, cell in zip(POOLED, cells)) / total
            se = float(np.sqrt(sum((sizes[name] * cell[1]) ** 2 for name, cell in zip(POOLED, cells)))) / total
            rows[model][kind] = (mean, se)
    return rows


def print_pooled(path: str) -> None:
    saved = json.loads(Path(path).read_text())
    print(f"| vs {saved['paired']['baseline']}, pooled over {' + '.join(POOLED)} (difference ± paired SE) | "
          + " | ".join(OUTCOMES) + " |")
    print("|" + "---|" * (len(OUTCOMES) + 1))
    for model, row in pooled_rows(saved).items():
        print(f"| {model} | " + " | ".join(f"{row[k][0]:+.4f} ± {row[k][1]:.4f}" if k in row else "–" for k in OUTCOMES)
              + " |")


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
    from qcat.confusable import load_confusable
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
