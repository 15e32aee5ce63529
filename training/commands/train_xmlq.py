"""``qcat train xmlq``: the XML-Q network trained on a click table (eBay §3.3), with its data
augmentation (§3.4) and multi-worker strategy."""

from __future__ import annotations

import argparse
import json
import sys
import time

from qcat.errors import InputError
from qcat.training.commands.bundles import fit_nodes, print_real_text, save_bundle
from qcat.training.commands.data_flags import data_from_args, record_confusable
from qcat.training.commands.judged import check_judged_flags, fit_on_judged_data


def run_train_xmlq(args: argparse.Namespace) -> int:
    import os

    if args.snm_k > args.snm_sampled:
        raise InputError(f"--snm-k ({args.snm_k}) must not exceed --snm-sampled ({args.snm_sampled}): the hardest "
                         f"k of the B sampled negatives are kept")
    data = data_from_args(args)  # data flags are checked before TensorFlow is imported (~5 s)
    if args.augment:
        if args.catalog is not None:
            raise InputError("--augment draws from a corpus's candidate period; it does not combine with --catalog")
        augment_steps(args)
        if args.judged:  # augmentation re-splits the data by query and would put judged queries back
            raise InputError("--augment does not combine with --judged yet: augment without judged queries, or "
                             "train on them without --augment")
    check_judged_flags(args)  # a missing or malformed judged file fails before TensorFlow is imported
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # C++ info and warnings; Python errors still surface
    checkpoint = args.out.parent / f"{args.out.name}.checkpoints"
    if args.resume and not checkpoint.is_dir():
        raise InputError(f"--resume: no checkpoint directory {checkpoint} (the trainer writes it after every epoch)")
    from qcat.training.selection.calibrate import describe_fit, fit_calibration
    from qcat.training.selection.objective import check_trainable
    from qcat.training.selection.table_metrics import evaluate_pr

    try:
        import keras

        from qcat.training.xmlq.checkpoint import CheckpointError
        from qcat.training.xmlq.export import ExportError, bundle_model, describe_export_plan, export_plan
        from qcat.training.xmlq.quantize import AgreementError, describe_quantization, quantized_model
        from qcat.training.xmlq.train import XMLQConfig, backend_and_device, prepare, train
    except ImportError as exc:
        raise InputError(f"qcat train xmlq needs Keras 3 and a backend ({exc}): pip install 'qcat[train]' and one of "
                         f"tensorflow, 'tensorflow[and-cuda]', 'jax[cuda12]' (KERAS_BACKEND names it)") from None
    strategy = distribution_for(keras.backend.backend(), args.batch_size) if args.distributed else None
    print(f"training on {backend_and_device()}")
    print(describe_export_plan(export_plan(), checkpoint))  # before training: a missing exporter is named now

    started = time.perf_counter()
    try:
        config = XMLQConfig(
            preset=args.preset, loss=args.loss, rnn=args.rnn, cosine=args.cosine, epochs=args.epochs,
            batch_size=args.batch_size, patience=args.patience, seed=args.seed, min_token_count=args.min_token_count,
            init_embeddings=args.init_embeddings, skipgram_epochs=args.skipgram_epochs,
            query_short_forms=args.query_short_forms,
            snm={"sampled": args.snm_sampled, "top_k": args.snm_k, "kind": args.snm_kind, "phi": args.snm_phi},
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    augmentation, short_forms = {}, {}
    form_queries: set[str] = set()  # recorded as seen (qcat.training.data.provenance), with every fit's forms
    titles = None
    if config.init_embeddings == "skipgram":
        from qcat.training.xmlq.embedding_init import simulator_titles

        titles = simulator_titles(data[0])

    def fit_one(dataset, sets):
        check_trainable(dataset, sets, "XML-Q")
        train_table, weights = None, None
        if args.augment:
            dataset, train_table, weights, report = augmented_dataset(args, dataset)
            augmentation.update(report)
            print("augmentation: " + json.dumps({k: v for k, v in report.items() if k != "steps"}))
        typed = train_table if train_table is not None else dataset.train  # before any short form
        queries = typed.queries
        if args.query_short_forms:
            from qcat.training.catalog.query_short_forms import held_out_texts, with_short_forms

            train_table, weights, report = with_short_forms(typed, weights, dataset.seed, held_out_texts(data[0]))
            short_forms.update(report)
            form_queries.update(train_table.queries[len(queries):].tolist())  # appended after the originals
            print("query short forms: " + json.dumps(report))
        prepared = prepare(dataset, config, train=train_table, train_weights=weights, sets=sets)
        print(f"dataset: {len(prepared.train_tokens):,} train queries, vocabulary {len(prepared.vocabulary):,}, "
              f"{len(prepared.labels):,} labels ({time.perf_counter() - started:.1f} s)")
        embedding = {"init": "random"}
        if config.init_embeddings == "skipgram":
            from qcat.training.xmlq.embedding_init import describe, skipgram_embeddings
            from qcat.training.xmlq.model import PRESETS

            prepared.initial_embeddings, embedding = skipgram_embeddings(
                prepared.vocabulary, queries, titles, PRESETS[config.preset].embedding, config.skipgram_epochs,
                config.seed)
            print(describe(embedding))
        try:
            network, summary = train(prepared, config, checkpoint=checkpoint, verbose=1 if sys.stdout.isatty() else 2,
                                     strategy=strategy, resume=args.resume)
        except CheckpointError as exc:
            raise InputError(f"--resume: {exc}") from None
        summary["embedding_init"] = embedding
        try:
            model = bundle_model(network, prepared.vocabulary, prepared.labels, dataset.taxonomy,
                                 config=summary.pop("config"), metrics=summary)
        except ExportError as exc:
            raise InputError(f"{exc}\nThe trained network is in {checkpoint}: run the same command with --resume "
                             f"where an exporter is installed to export it and write {args.out}") from None
        # Before calibration (fitted by the caller on the model returned): it calibrates the network that ships.
        try:
            return quantized_model(model, args.quantize, {name: table.queries for name, (table, _) in sets.items()},
                                   args.min_agreement)
        except AgreementError as exc:
            raise InputError(f"{exc} (the trained network stays in {checkpoint}: rerun with --resume and another "
                             f"--quantize to export it without training)") from None

    model, dataset, source, sets, judged = fit_on_judged_data(args, data, fit_one, "XML-Q", grid=False)
    if augmentation:
        source["augmentation"] = augmentation
    if short_forms:
        source["query_short_forms"] = short_forms
    model.config["data"] = source
    record_confusable(args, model, dataset.taxonomy)
    model.metrics["data"] = source
    summary = model.metrics
    model.calibration = fit_calibration(model, sets)
    print(describe_fit(model.calibration))
    model.metrics["test"] = evaluate_pr(model, dataset.test)
    from qcat.training.data.provenance import fingerprints

    save_bundle(model, args.out, dataset, ([fingerprints(sorted(form_queries))] if form_queries else [])
                + judged.also_seen(), **judged.save_options(args), nodes=fit_nodes(model, sets))
    print(f"best epoch {summary['best_epoch']}: validation {json.dumps(summary['validation'])}")
    print("test (onnxruntime) " + json.dumps(model.metrics["test"]))
    print_real_text(model, sets)
    print(describe_quantization(model.metrics["quantization"]))
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s (checkpoint {checkpoint})")
    return 0


def distribution_for(backend: str, batch_size: int):
    """``--distributed``: under TensorFlow, MultiWorkerMirroredStrategy across the workers of
    $TF_CONFIG; under JAX, Keras' DataParallel over this machine's devices; else refused."""
    if backend == "tensorflow":
        return multi_worker_strategy()
    if backend == "jax":
        from qcat.training.xmlq.distributed import data_parallel, describe_data_parallel

        try:
            distribution = data_parallel(batch_size)
        except ValueError as exc:
            raise InputError(f"--distributed: {exc}") from None
        print(describe_data_parallel(distribution))
        return distribution
    raise InputError(f"--distributed needs KERAS_BACKEND=tensorflow (tf.distribute, several workers) or jax "
                     f"(Keras' DataParallel, this machine's devices), not {backend}")


def multi_worker_strategy():
    """MultiWorkerMirroredStrategy from $TF_CONFIG (created before any other TensorFlow op,
    as TensorFlow requires)."""
    import os

    import tensorflow as tf

    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", ""))
        workers, task = cluster["cluster"]["worker"], cluster["task"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise InputError('--distributed needs $TF_CONFIG, e.g. {"cluster": {"worker": ["host1:port", '
                         '"host2:port"]}, "task": {"type": "worker", "index": 0}}') from None
    print(f"distributed: worker {task.get('index')} of {len(workers)} ({', '.join(workers)})")
    return tf.distribute.MultiWorkerMirroredStrategy()


def augment_steps(args: argparse.Namespace) -> list[str]:
    """The steps ``--augment`` names, checked with the flags they need (before any work)."""
    from qcat.training.data.augment import STEPS

    steps = [s.strip() for s in args.augment.split(",") if s.strip()]
    if unknown := [s for s in steps if s not in STEPS]:
        raise InputError(f"unknown augmentation step(s) {unknown}; expected some of {', '.join(STEPS)}")
    if args.log is not None:
        raise InputError("--augment needs a corpus (base and candidate periods), not --log")
    if args.period not in (None, "base"):
        raise InputError("--augment trains on the base period and draws from the candidate period: drop --period")
    if "worst" in steps and args.worst_model is None:
        raise InputError("the worst step needs --worst-model, a model trained on the base set")
    return steps


def augmented_dataset(args: argparse.Namespace, dataset, candidate=None):
    """The base dataset with augmented training queries; each query's sample weight is the
    largest repeat count of its pairs (a brand-step query weighs 50). ``candidate``: the corpus's
    candidate period on the dataset's taxonomy, where the caller has read it already."""
    import numpy as np

    from qcat.classifier import load_model
    from qcat.training.data.augment import augment, misclassification_rates
    from qcat.training.data.corpus import Corpus
    from qcat.training.data.dataset import Dataset
    from qcat.training.simulator.simulate import catalog_brand_queries

    steps = augment_steps(args)
    corpus = Corpus.open(args.corpus)
    candidate = corpus.ingest("candidate", dataset.taxonomy).table if candidate is None else candidate
    rates = rate_categories = None
    if "worst" in steps:
        if args.worst_model is None:
            raise InputError("the worst step needs --worst-model, a model trained on the base set")
        model = load_model(args.worst_model)
        train = dataset.train
        top = model.predict(list(train.queries), 1).labels[:, 0]
        top_ids = [model.labels[i] if i >= 0 else None for i in top]
        rates, rate_categories = misclassification_rates(top_ids, train), train.categories
    brands = catalog_brand_queries(corpus.catalog()) if "brand" in steps else None
    result = augment(dataset.table, candidate, steps, brands=brands, brand_repeat=args.brand_repeat,
                     misclassification_rate=rates, rate_categories=rate_categories, split_seed=dataset.seed)
    augmented = Dataset.from_table(result.table, dataset.taxonomy, seed=dataset.seed)
    query_weight = np.zeros(len(result.table.queries))
    np.maximum.at(query_weight, result.table.pair_query, result.weights)
    in_train = augmented.split == 0
    return augmented, augmented.train, query_weight[in_train], result.report
