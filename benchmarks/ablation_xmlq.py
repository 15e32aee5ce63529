"""XML-Q ablation on the demo corpus, beside eBay's Tables 2, 3 and 4.

Run: python benchmarks/ablation_xmlq.py --out /tmp/ablation [--epochs 8]   (about 30 min on 2 cores)

Trains five XML-Q variants on the base period (small preset), scores them with
``qcat evaluate``'s pipeline on the test split, and prints:

- Table 2: the contribution of each component, our deltas beside the paper's: soft-F1 loss
  (XML-CNN with BCE -> with soft F1), + RNN, + cosine decay;
- Table 3: XML-CNN* (soft F1, no RNN) against XML-Q (with augmentation);
- Table 4: hybrid(cutoff 1..4) - NB per head/torso/tail, in accuracy-like PR@1, P, R, F1.

Model bundles, the evaluation report and ``ablation.json`` are written under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from qcat.classifier import default_model_dir, load_model  # noqa: E402
from qcat.evaluation.evaluate import evaluate  # noqa: E402
from qcat.models.hybrid import HybridModel  # noqa: E402
from qcat.training.selection.table_metrics import evaluate_pr  # noqa: E402

VARIANTS = {  # name -> (XMLQConfig options, augmentation steps)
    "XML-CNN": ({"loss": "bce", "rnn": False, "cosine": False}, ""),
    "XML-CNN*": ({"loss": "soft-f1", "rnn": False, "cosine": False}, ""),
    "+RNN": ({"loss": "soft-f1", "rnn": True, "cosine": False}, ""),
    "+cosine": ({"loss": "soft-f1", "rnn": True, "cosine": True}, ""),
    "XML-Q": ({"loss": "soft-f1", "rnn": True, "cosine": True}, "rare,brand,worst"),
}
TABLE2 = [("F1 loss", "XML-CNN", "XML-CNN*", (41.43, -17.43, 22.95, 6.74, 2.80, -0.22)),
          ("Add RNN", "XML-CNN*", "+RNN", (1.51, 0.03, 0.69, 1.24, 1.22, 1.38)),
          ("Cos decay", "+RNN", "+cosine", (2.39, 2.72, 2.58, 2.15, 1.86, 1.54))]
TABLE3 = {"XML-CNN*": (61.01, 55.09, 57.90, 64.79, 71.28, 78.89), "XML-Q": (72.16, 73.68, 72.91, 76.57, 81.75, 87.75)}
TABLE4_HYBRID_1 = {"head": (0.3, 1.1, 1.0), "torso": (0.0, 1.9, 1.6), "tail": (0.3, 2.6, 2.2)}  # δP, δR, δF1
COLUMNS = ("P", "R", "F1", "PR@1", "PR@3", "PR@10")


def train_variant(name: str, options: dict, steps: str, epochs: int, out: Path) -> Path:
    from qcat.training.commands.train_xmlq import augmented_dataset
    from qcat.training.data.corpus import Corpus
    from qcat.training.xmlq.export import bundle_model
    from qcat.training.xmlq.train import XMLQConfig, prepare, train

    directory = out / name.replace("*", "-star").replace("+", "plus-")
    if (directory / "manifest.json").exists():
        return directory
    dataset = Corpus.open().dataset("base")
    config = XMLQConfig(epochs=epochs, **options)
    train_table = weights = None
    if steps:
        args = argparse.Namespace(augment=steps, log=None, period="base", corpus=None, brand_repeat=50,
                                  worst_model=default_model_dir())
        dataset, train_table, weights, _ = augmented_dataset(args, dataset)
    prepared = prepare(dataset, config, train=train_table, train_weights=weights)
    started = time.perf_counter()
    network, summary = train(prepared, config, log=lambda m: print(f"  {name}: {m}"), verbose=0)
    model = bundle_model(network, prepared.vocabulary, prepared.labels, dataset.taxonomy,
                         config=summary.pop("config"), metrics=summary)
    model.metrics["test"] = evaluate_pr(model, dataset.test)
    model.save(directory)
    print(f"{name}: trained in {time.perf_counter() - started:.0f} s, test {model.metrics['test']}")
    return directory


def row(report: dict, name: str, segment: str = "all") -> dict:
    return next(m for m in report["models"] if m["name"] == name)["segments"][segment]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dirs = {name: train_variant(name, options, steps, args.epochs, args.out) for name, (options, steps) in VARIANTS.items()}
    nb = load_model(default_model_dir() / "nb")  # the shipped hybrid's NB part
    xmlq = load_model(dirs["XML-Q"])
    for cutoff in (1, 2, 3, 4):
        HybridModel(nb=nb, longs=(xmlq,), cutoff=cutoff, taxonomy=nb.taxonomy.merge(xmlq.taxonomy),
                    config={}, metrics={}).save(args.out / f"hybrid-{cutoff}")
    names = ["NB"] + list(dirs) + [f"hybrid-{c}" for c in (1, 2, 3, 4)]
    paths = [default_model_dir() / "nb"] + list(dirs.values()) + [args.out / f"hybrid-{c}" for c in (1, 2, 3, 4)]
    report = evaluate(paths, names, progress=print)
    (args.out / "ablation.json").write_text(json.dumps(report, indent=2, default=float))

    print("\nTable 2: contributions (our δ in % points | paper's δ)")
    print(f"{'':10}" + "".join(f"{c:>16}" for c in COLUMNS))
    for label, before, after, paper in TABLE2:
        ours = [100 * (row(report, after)[c] - row(report, before)[c]) for c in COLUMNS]
        print(f"{label:10}" + "".join(f"{o:+7.2f} | {p:+6.2f}" for o, p in zip(ours, paper)))
    print("\nTable 3: ours | paper (%)")
    for name in ("XML-CNN*", "XML-Q"):
        print(f"{name:10}" + "".join(f"{100 * row(report, name)[c]:7.2f} | {p:6.2f}" for c, p in zip(COLUMNS, TABLE3[name])))
    print("\nTable 4: hybrid - NB per segment, δ in % points (paper's hybrid cutoff 1: δP, δR, δF1)")
    for cutoff in (1, 2, 3, 4):
        for segment in ("head", "torso", "tail"):
            ours = [100 * (row(report, f"hybrid-{cutoff}", segment)[c] - row(report, "NB", segment)[c])
                    for c in ("PR@1", "P", "R", "F1")]
            paper = TABLE4_HYBRID_1[segment] if cutoff == 1 else None
            print(f"cutoff {cutoff} {segment:6} δPR@1 {ours[0]:+6.2f}  δP {ours[1]:+6.2f}  δR {ours[2]:+6.2f}  "
                  f"δF1 {ours[3]:+6.2f}" + (f"   paper δP {paper[0]:+.1f} δR {paper[1]:+.1f} δF1 {paper[2]:+.1f}" if paper else ""))


if __name__ == "__main__":
    main()
