"""``qcat train ...``: training model bundles (``qcat data ...`` is :mod:`qcat.training.commands.data`;
``qcat train xmlq`` runs :mod:`~qcat.training.commands.train_xmlq`, ``qcat train rerank``
:mod:`~qcat.training.commands.rerank`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from qcat.cli import MAX_THREADS, float_at_least, float_in, int_at_least, positive_float, share
from qcat.console.output import OutputLock
from qcat.errors import InputError
from qcat.training.commands.bundles import check_bundle_out, fit_nodes, print_real_text, save_bundle, terminate_cleanly
from qcat.training.commands.data_flags import (
    add_data_flags,
    data_args_from,
    data_from_args,
    load_dataset,
    print_objective,
    record_confusable,
)
from qcat.training.commands.judged import (
    add_judged_flags,
    check_parts_judged,
    fit_on_judged_data,
    judged_for_selection,
)
from qcat.training.commands.train_xmlq import run_train_xmlq


def build_parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``qcat {command}`` (the CLI reference is generated from it)."""
    from qcat.cli import ArgumentParser

    parser = ArgumentParser(prog=f"qcat {command}")
    _add_train_commands(parser.add_subparsers(dest="action", metavar="ACTION", required=True))
    return parser


def main(command: str, argv: list[str]) -> int:
    args = build_parser(command).parse_args(argv)
    check_bundle_out(args.out)
    # Taken before any work and held to the end: a second run into the same --out is
    # refused at once instead of both training and the last one's bundle winning.
    with OutputLock(args.out), terminate_cleanly():
        check_bundle_out(args.out)  # again: a run that held the lock may just have written it
        return args.run(args)


# -- qcat train ------------------------------------------------------------------------


def _add_train_commands(sub: argparse._SubParsersAction) -> None:
    nb = sub.add_parser("nb", help="train the Naive Bayes backend (eBay §3.2)")
    add_data_flags(nb)
    add_judged_flags(nb)
    nb.set_defaults(run=run_train_nb)

    xmlq = sub.add_parser("xmlq", help="train the XML-Q CNN-RNN (eBay §3.3) and export it to ONNX")
    add_data_flags(xmlq)
    add_judged_flags(xmlq, "xmlq")
    net = xmlq.add_argument_group("network and training")
    net.add_argument("--preset", choices=("small", "medium", "paper"), default="small",
                     help="layer widths: small (1/8 of the paper's, CPU; default), medium (1/4), paper (Figure 1)")
    net.add_argument("--loss", choices=("soft-f1", "bce", "snm"), default="soft-f1")
    net.add_argument("--no-rnn", dest="rnn", action="store_false", help="max pooling instead of the GRUs (XML-CNN*)")
    net.add_argument("--no-cosine", dest="cosine", action="store_false", help="constant learning rate 1e-3")
    net.add_argument("--epochs", type=int_at_least(1, 10_000), default=8, help="at most this many epochs, 1..10000 (default 8)")
    net.add_argument("--batch-size", type=int_at_least(1, 1 << 20), default=256, help="queries per batch (default 256)")
    net.add_argument("--patience", type=int_at_least(1), default=2, help="epochs without a better validation objective before stopping")
    net.add_argument("--min-token-count", type=int_at_least(1), default=2,
                     help="tokens in fewer training queries are read as unknown (default 2)")
    net.add_argument("--seed", type=int_at_least(0), default=0)
    net.add_argument("--distributed", action="store_true",
                     help="KERAS_BACKEND=jax: Keras' DataParallel over this machine's devices (--batch-size a "
                          "multiple of their count); tensorflow: MultiWorkerMirroredStrategy across the workers named "
                          "in $TF_CONFIG (run the same command on every worker, each with its own task index)")
    net.add_argument("--resume", action="store_true",
                     help="go on from the checkpoint in OUT.checkpoints/ (written after every epoch) with the same "
                          "data and settings; --epochs and --patience may grow")
    export = xmlq.add_argument_group("export")
    export.add_argument("--quantize", choices=("none", "fp16", "int8", "int8-dynamic"), default="none",
                        help="store model.onnx's weights as float16 (half the size) or int8 (a quarter; computes in "
                             "float32), or quantize dynamically (int8 weights and activations); default none")
    export.add_argument("--min-agreement", type=share(), default=0.995,
                        help="refuse a quantized network whose top-1 label agrees with the float one on fewer "
                             "validation queries than this share, in [0, 1] (default 0.995)")
    aug = xmlq.add_argument_group("data augmentation (eBay §3.4; needs a corpus with a candidate period)")
    aug.add_argument("--augment", default="", metavar="STEPS",
                     help="comma-separated steps from rare, brand, worst (default: none)")
    aug.add_argument("--brand-repeat", type=int_at_least(1, 10_000), default=50, help="times the brand step repeats a query (default 50)")
    aug.add_argument("--worst-model", type=Path, default=None,
                     help="a model trained on the base set; the worst step takes its worst categories on base train")
    own = xmlq.add_argument_group("beyond the paper (docs: guide/training.md, \"XML-Q\")")
    own.add_argument("--init-embeddings", choices=("random", "skipgram"), default="random",
                     help="random (the paper's, default) or skipgram: start the embedding from skip-gram vectors "
                          "trained here on the training queries and the corpus's catalog titles (held-out listings "
                          "left out)")
    own.add_argument("--skipgram-epochs", type=int_at_least(1, 1000), default=5,
                     help="passes of skip-gram over the text with --init-embeddings skipgram (default 5)")
    own.add_argument("--query-short-forms", action="store_true",
                     help="every training query of 4+ tokens also trains as its first 2 and first 3 tokens "
                          "(its categories, sample weight 0.5); not the catalog's --short-forms")
    snm = xmlq.add_argument_group("stochastic negative mining (--loss snm)")
    snm.add_argument("--snm-sampled", type=int_at_least(1), default=64, help="B: negatives sampled per query")
    snm.add_argument("--snm-k", type=int_at_least(1), default=8, help="k: hardest sampled negatives kept")
    snm.add_argument("--snm-kind", choices=("powl", "bowl"), default="powl")
    snm.add_argument("--snm-phi", choices=("hinge", "logistic"), default="hinge")
    xmlq.set_defaults(run=run_train_xmlq)

    xreg = sub.add_parser("xreg", help="train XReg (label trees of relevance-weighted regressors, WSDM 2020)")
    add_data_flags(xreg)
    add_judged_flags(xreg)
    hp = xreg.add_argument_group("XReg hyperparameters (defaults: the paper's)")
    hp.add_argument("--trees", type=int_at_least(1, 100), default=3, help="T: trees in the ensemble, 1..100 (default 3)")
    hp.add_argument("--beam", type=int_at_least(1, 10_000), default=10, help="P: beam width of pointwise inference (default 10)")
    hp.add_argument("--leaf-size", type=int_at_least(2), default=100, help="M: most labels in a leaf (default 100)")
    hp.add_argument("--C", dest="C", type=positive_float(), default=10.0, help="C: regressor cost (default 10)")
    hp.add_argument("--factor", type=positive_float(), default=4.0, help="F: labelwise inference factor (default 4)")
    hp.add_argument("--alpha", type=share(), default=0.8, help="XReg-t: weight of the XReg score, in [0, 1] (default 0.8)")
    hp.add_argument("--gamma", type=positive_float(), default=30.0, help="XReg-t: tail classifier gamma (default 30)")
    hp.add_argument("--shortlist", type=int_at_least(1), default=100, help="XReg-t: labels re-ranked per query (default 100)")
    hp.add_argument("--rerank", action="store_true", help="serve XReg-t (tail re-ranking) by default")
    hp.add_argument("--prune", type=float_at_least(0), default=0.1, help="drop regressor weights with |w| below this (default 0.1)")
    hp.add_argument("--seed", type=int_at_least(0), default=0)
    hp.add_argument("--threads", type=int_at_least(1, MAX_THREADS), default=1,
                    help=f"train this many tree nodes at once, 1..{MAX_THREADS} (default 1; the model does not "
                         f"depend on it)")
    xreg.set_defaults(run=run_train_xreg)

    hybrid = sub.add_parser("hybrid", help="combine an NB bundle with an XML-Q or XReg bundle by query length (eBay §3.1), "
                                           "choosing the long-query backend and cutoff on the validation objective")
    hybrid.add_argument("--nb", type=Path, required=True, help="NB model bundle")
    hybrid.add_argument("--xmlq", type=Path, default=None, help="XML-Q model bundle (a long-query candidate)")
    hybrid.add_argument("--xreg", type=Path, default=None, help="XReg model bundle (a long-query candidate)")
    hybrid.add_argument("--long-backend", choices=("xmlq", "xreg", "xreg+xmlq"), default=None,
                        help="use this long side instead of choosing among those given (xreg+xmlq: both blended, "
                             "XML-Q's share chosen from 0.25, 0.5, 0.75)")
    hybrid.add_argument("--cutoff", type=int, choices=(1, 2, 3, 4), default=None,
                        help="queries of at most this many tokens go to NB (default: chosen from 1-4)")
    hybrid.add_argument("--blend", type=float_in(0, 1, high_open=True), default=None,
                        help="NB's weight in a longer query's score, 0 = the paper's routing (default: chosen "
                             "from 0, 0.2, 0.3, 0.5)")
    hybrid.add_argument("--objective", choices=("strict", "lenient"), default="strict",
                        help="choose on strict PR@1 (default) or on lenient top-1, which credits answers the confusable "
                             "map pairs with the gold (needs --confusable FILE or an NB part that recorded one)")
    add_data_flags(hybrid)
    add_judged_flags(hybrid, "hybrid")
    hybrid.set_defaults(run=run_train_hybrid)
    from qcat.training.commands.nodes import add_nodes_command
    from qcat.training.commands.rerank import add_rerank_command

    add_rerank_command(sub)
    add_nodes_command(sub)


def run_train_nb(args: argparse.Namespace) -> int:
    from qcat.training.nb import trainer as nb_trainer
    from qcat.training.selection.calibrate import describe_fit
    from qcat.training.selection.table_metrics import evaluate_pr

    started = time.perf_counter()
    data = data_from_args(args)
    # One grid per catalog setting or judged weight: the table of those is printed instead.
    quiet = args.catalog is not None or (bool(args.judged) and args.judged_weight is None)

    def fit_one(dataset, sets):
        print(f"dataset: {len(dataset.table.queries):,} queries, {len(dataset.table):,} pairs, "
              f"{len(dataset.table.categories):,} categories ({time.perf_counter() - started:.1f} s)")
        if not quiet:
            print_objective(sets)
        return nb_trainer.fit(
            dataset,
            progress=None if quiet else lambda t, a, s, per_set: print(
                f"  threshold {t:g} alpha {a:g}: objective {s:.4f} ("
                + ", ".join(f"{name} {value:.4f}" for name, value in per_set.items()) + ")"),
            sets=sets,
        )

    model, dataset, source, sets, judged = fit_on_judged_data(args, data, fit_one, "NB")
    model.config["data"] = source
    record_confusable(args, model, dataset.taxonomy)
    model.metrics["test"] = evaluate_pr(model, dataset.test)
    save_bundle(model, args.out, dataset, judged.also_seen(), **judged.save_options(args), nodes=fit_nodes(model, sets))
    print(model.metrics["tuning_decision"]["summary"])
    verb = "chose" if model.metrics["tuning_decision"]["decided_by_validation"] else "kept the default"
    print(f"{verb} threshold {model.config['threshold']:g}, alpha {model.config['alpha']:g} "
          f"(validation objective {model.metrics['validation_objective']:.4f})")
    print(describe_fit(model.calibration))
    print("validation " + json.dumps(model.metrics["validation"]))
    print("test       " + json.dumps(model.metrics["test"]))
    print_real_text(model, sets)
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s")
    return 0


def run_train_xreg(args: argparse.Namespace) -> int:
    data = data_from_args(args)
    from qcat.training.selection.calibrate import describe_fit, fit_calibration
    from qcat.training.selection.objective import check_trainable
    from qcat.training.selection.table_metrics import evaluate_pr
    from qcat.training.xreg.trainer import XRegConfig, fit

    started = time.perf_counter()
    try:
        config = XRegConfig(trees=args.trees, beam=args.beam, leaf_size=args.leaf_size, C=args.C, factor=args.factor,
                            alpha=args.alpha, gamma=args.gamma, shortlist=args.shortlist, rerank=args.rerank,
                            prune=args.prune, seed=args.seed, threads=args.threads)
    except ValueError as exc:
        raise InputError(str(exc)) from None

    def fit_one(dataset, sets):
        print(f"dataset: {len(dataset.table.queries):,} queries, {len(dataset.table):,} pairs, "
              f"{len(dataset.table.categories):,} categories ({time.perf_counter() - started:.1f} s)")
        check_trainable(dataset, sets, "XReg")
        return fit(dataset, config, progress=lambda message: print("  " + message))

    model, dataset, source, sets, judged = fit_on_judged_data(args, data, fit_one, "XReg", negatives=True)
    model.calibration = fit_calibration(model, sets)
    print(describe_fit(model.calibration))
    model.config["data"] = source
    record_confusable(args, model, dataset.taxonomy)
    for name, rerank in (("xreg", False), ("xreg-t", True)):
        scored = model.with_options(rerank=rerank)
        model.metrics[f"validation_{name}"] = evaluate_pr(scored, dataset.validation)
        model.metrics[f"test_{name}"] = evaluate_pr(scored, dataset.test)
    save_bundle(model, args.out, dataset, judged.also_seen(), **judged.save_options(args), nodes=fit_nodes(model, sets))
    size = sum(f.stat().st_size for f in args.out.iterdir() if f.is_file())
    print(f"{len(model.labels):,} labels, {model.features.dimension:,} features, {model.metrics['weights']:,} weights "
          f"(|w| >= {config.prune:g}), bundle {size / 1e6:.1f} MB")
    for name in ("xreg", "xreg-t"):
        print(f"{name:<7} validation {json.dumps(model.metrics[f'validation_{name}'])}  "
              f"test {json.dumps(model.metrics[f'test_{name}'])}")
    print_real_text(model, sets)
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s"
          f" (serving {'XReg-t' if config.rerank else 'XReg'} by default)")
    return 0


def print_selection_row(sets):
    """Prints the selection table's header; returns the printer of its rows (a single part
    answering every query is printed as ``NB alone``; the stated default is marked)."""
    print("long side   shares     cutoff  blend  objective  " + "  ".join(f"PR@1 {name}" for name in sets))

    def row_line(row: dict) -> None:
        figures = f"{row['objective']:>9.4f}  " + "  ".join(
            f"{row[f'pr@1 {name}']:>{len(name) + 5}.4f}" for name in sets)
        mark = "  (the default)" if row.get("default") else ""
        if row.get("route_to", "hybrid") != "hybrid":
            setting = f"{row['route_to'].upper() if row['route_to'] == 'nb' else row['route_to']} alone"
            print(f"{setting:<39}{figures}{mark}")
            return
        print(f"{row['long_backend']:<10}  {'/'.join(f'{s:.2f}' for s in row['long_shares']):<9}  {row['cutoff']:>6}  "
              f"{row['blend']:>5.2f}  {figures}{mark}")

    return row_line


def describe_hybrid(hybrid) -> str:
    """What a hybrid does with a query, in words."""
    if hybrid.route_to != "hybrid":
        return f"{'NB' if hybrid.route_to == 'nb' else hybrid.route_to} answers every query"
    short = f"NB answers queries of at most {hybrid.cutoff} token(s), longer ones get "
    if not hybrid.blended:
        return short + hybrid.long_backend
    return short + hybrid.mix()


def merged_taxonomy(nb, longs: dict, paths: dict):
    """The taxonomy of a hybrid: its parts' (subsets of one taxonomy file) together."""
    from qcat.errors import QcatError

    taxonomy = nb.taxonomy
    for name, long in longs.items():
        try:
            taxonomy = taxonomy.merge(long.taxonomy)
        except QcatError as exc:
            raise InputError(f"the taxonomies of the NB bundle and {paths[name]} disagree: {exc}") from None
    return taxonomy


def run_train_hybrid(args: argparse.Namespace) -> int:
    from qcat.classifier import load_model
    from qcat.models.calibration import calibrated_sources
    from qcat.models.hybrid import CUTOFFS
    from qcat.taxonomy.confusable import CONFIG_KEY, load_confusable, recorded_map
    from qcat.training.selection.calibrate import describe_fit
    from qcat.training.selection.objective import BLENDS, forget, remember, select_hybrid
    from qcat.training.selection.table_metrics import evaluate_pr

    candidates = {name: getattr(args, name) for name in ("xmlq", "xreg") if getattr(args, name) is not None}
    if args.long_backend is not None:
        missing = [name for name in args.long_backend.split("+") if name not in candidates]
        if missing:
            raise InputError(f"--long-backend {args.long_backend} needs " + " and ".join(f"--{n} DIR" for n in missing))
        candidates = {name: candidates[name] for name in args.long_backend.split("+")}
    if not candidates:
        raise InputError("give the long-query model: --xmlq DIR and/or --xreg DIR")
    from qcat.bundles.bundle import read_manifest
    from qcat.training.data.provenance import check_same_data, check_same_source, read_seen_fingerprints

    manifests = {"--nb": read_manifest(args.nb)} | {f"--{n}": read_manifest(p) for n, p in candidates.items()}
    for flag, manifest in manifests.items():
        if manifest.backend != flag[2:]:
            raise InputError(f"{flag} {manifest.directory} is a {manifest.backend} bundle")
    recorded = check_same_data(manifests)
    data_args_from(args, recorded, args.nb)
    data = data_from_args(args)
    check_same_source(recorded, data[1], f"the parts (--nb {args.nb})")
    nb = remember(load_model(args.nb))  # the selection, calibration and summaries ask the parts the same batches
    longs = {name: remember(load_model(path)) for name, path in candidates.items()}
    dataset, source, sets = load_dataset(args, data)
    dataset, sets, judged = judged_for_selection(args, dataset, sets)
    check_parts_judged(manifests, judged)
    if judged.record:
        source = source | {"judged": judged.record}
    seen = [read_seen_fingerprints(path) for path in [args.nb, *candidates.values()]]
    print_objective(sets)
    cutoffs = (args.cutoff,) if args.cutoff else CUTOFFS
    blends = (args.blend,) if args.blend is not None else BLENDS
    confusable = load_confusable(args.confusable, dataset.taxonomy) if args.confusable is not None else recorded_map(nb)
    if args.objective == "lenient" and confusable is None:
        raise InputError("--objective lenient needs a confusable map: give --confusable FILE (qcat data audit writes one)")
    if args.objective == "lenient":
        print(f"choosing on lenient top-1 with {confusable.describe()}")
    hybrid = select_hybrid(nb, longs, sets, merged_taxonomy(nb, longs, candidates), cutoffs, blends,
                           config={"nb": str(args.nb)} | {n: str(p) for n, p in candidates.items()} | {"data": source},
                           progress=print_selection_row(sets), only=args.long_backend,
                           confusable=confusable if args.objective == "lenient" else None)
    if confusable is not None:  # --confusable, or the map the NB part was trained with
        hybrid.config[CONFIG_KEY] = confusable.to_config()
    hybrid.metrics["test"] = evaluate_pr(hybrid, dataset.test)
    nodes = fit_nodes(hybrid, sets)  # before forget: the parts answer the validation sets from memory
    save_bundle(forget(hybrid), args.out, dataset, [f for f in seen if f is not None] + judged.also_seen(),
                **judged.save_options(args), nodes=nodes)
    decision = hybrid.metrics["selection"]["decision"]
    print(decision["summary"])
    verb = "chose" if decision["decided_by_validation"] else "kept the setting fixed by flags" \
        if decision["fixed_by_flags"] else "kept the default"
    print(f"{verb}: {describe_hybrid(hybrid)}")
    print(describe_fit(hybrid.calibration) + f" (calibrated sources with the parts': "
          f"{', '.join(calibrated_sources(hybrid)) or 'none'})")
    print("test " + json.dumps(hybrid.metrics["test"]))
    print_real_text(hybrid, sets)
    print(f"wrote hybrid {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
