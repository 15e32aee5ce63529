"""XML-Q presets × backend × device (issue 22): one row per trained XML-Q bundle, from its
manifest and from scoring it here, plus the cost of a training step of any preset.

Rows (``--model NAME=DIR``, XML-Q bundles made by ``qcat train xmlq`` on the demo corpus):
preset, the backend and device it trained on (the trainer's own line), epochs (best / run), wall
seconds per epoch (training time over epochs run, each epoch's validation scoring included),
simulated test PR@1, real-title and real-2tok top-1 (validation and test halves), bundle MiB and
single-query latency (compiled path, one-thread onnxruntime session, p50 / p99 over the 2,000
real-text queries of ``bench_single_query.py``, 3 passes).

``--time-steps PRESET`` builds that preset on the demo vocabulary and labels and times training
steps of 256 queries under this process's Keras backend (after a warm-up epoch of 2 steps): what an
epoch would cost here, for a preset too slow to train here to convergence.

    python benchmarks/bench_xmlq.py --model small=/tmp/x22/small --model medium=/tmp/x22/medium
    python benchmarks/bench_xmlq.py --time-steps paper --steps 12
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_real_text import matched_on, parse_models, query_sets  # noqa: E402
from bench_single_query import per_query_ms, real_text_queries  # noqa: E402

from qcat.measure.metrics import pr_at_k  # noqa: E402

K = 5
COLUMNS = ("preset", "trained on", "epochs best/run", "s/epoch", "sim PR@1", "real-title val", "real-title test",
           "real-2tok val", "real-2tok test", "bundle MiB", "1-query ms p50/p99")


def bundle_mib(directory: Path) -> float:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 2**20


def describe_training(manifest: dict) -> dict:
    """What the manifest says about the run: preset, options, backend line, epochs, seconds."""
    config, metrics = manifest["config"], manifest["metrics"]
    history = metrics.get("history", [])
    options = [name for name, on in (("aug", config.get("data", {}).get("augmentation")),
                                     ("skip-gram", config.get("init_embeddings", "random") != "random"),
                                     ("short forms", config.get("query_short_forms"))) if on]
    trained_here = len(history) - metrics.get("resumed_after_epoch", 0)  # a resumed run's seconds are its own epochs
    return {
        "preset": config.get("preset", "?") + (f" + {', '.join(options)}" if options else ""),
        "trained on": metrics.get("backend", "?").split(", ", 1)[-1],  # "tensorflow 2.21.0 on 1 x cpu"
        "epochs best/run": f"{metrics.get('best_epoch', '?')} / {len(history)}",
        "s/epoch": metrics["train_seconds"] / trained_here if trained_here > 0 else None,
    }


def score_bundle(directory: Path, corpus, dataset, queries: list[str]) -> dict:
    from qcat.classifier import Classifier

    classifier = Classifier.load(directory).compile()
    model = classifier.model
    row = describe_training(json.loads((directory / "manifest.json").read_text()))
    row["sim PR@1"] = pr_at_k(matched_on(model, dataset.test), 1)
    for split, label in (("validation", "val"), ("test", "test")):
        sets = query_sets(corpus, dataset, split)
        for name in ("real-title", "real-2tok"):
            row[f"{name} {label}"] = pr_at_k(matched_on(model, sets[name]), 1)
    row["bundle MiB"] = bundle_mib(directory)
    times = per_query_ms(lambda query: model.predict_one(query, K), queries)
    row["1-query ms p50/p99"] = f"{np.percentile(times, 50):.3f} / {np.percentile(times, 99):.3f}"
    return row


def cell(value) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) and value < 10 else (f"{value:.1f}" if isinstance(value, float) else str(value))


def time_steps(preset: str, steps: int) -> None:
    """Seconds per training step of ``preset`` at batch 256 on the demo's vocabulary and labels."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from qcat.models.query_encoding import RESERVED
    from qcat.training.data.corpus import Corpus
    from qcat.training.xmlq.model import PRESETS, build_xmlq
    from qcat.training.xmlq.train import Batches, XMLQConfig, backend_and_device, compile_for, prepare

    dataset = Corpus.open().dataset("base")
    config = XMLQConfig(preset=preset)
    prepared = prepare(dataset, config)
    network = build_xmlq(RESERVED + len(prepared.vocabulary), len(prepared.labels), PRESETS[preset])
    trainable = compile_for(config, network, len(prepared.train_tokens))
    data = Batches(prepared.train_tokens, prepared.train_labels, len(prepared.labels), 256, seed=0)
    trainable.fit(data, epochs=1, steps_per_epoch=2, verbose=0)  # compile and warm up
    started = time.perf_counter()
    trainable.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    per_step = (time.perf_counter() - started) / steps
    n_steps = len(data)
    print(f"{preset}: {network.count_params():,} parameters, {per_step:.3f} s per 256-query step on "
          f"{backend_and_device()} (load average {os.getloadavg()[0]:.1f}); an epoch is {n_steps} steps: "
          f"{per_step * n_steps / 60:.1f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR", help="an XML-Q bundle (repeatable)")
    parser.add_argument("--time-steps", choices=("small", "medium", "paper"), default=None,
                        help="time training steps of this preset instead")
    parser.add_argument("--steps", type=int, default=12, help="with --time-steps: steps timed (default 12)")
    args = parser.parse_args()
    if args.time_steps:
        time_steps(args.time_steps, args.steps)
        return
    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    dataset = corpus.dataset("base")
    queries = real_text_queries()
    rows = {}
    for name, directory in parse_models(args.model).items():
        rows[name] = score_bundle(directory, corpus, dataset, queries)
        print(name, json.dumps(rows[name]), flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f}\n")
    print("| model | " + " | ".join(COLUMNS) + " |\n|" + "---|" * (len(COLUMNS) + 1))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(cell(row.get(column)) for column in COLUMNS) + " |")


if __name__ == "__main__":
    main()
