"""``qcat evaluate``'s pipeline: a corpus split and model bundles in, a report dict out.

The evaluation set is one split (by default ``test``) of a corpus period; its label
space is the corpus taxonomy's leaves. Head/torso/tail are cut over the evaluated
queries' impressions (30/30/40 of impressions, eBay §4.2.2). Propensities use the label
counts of the same period's training split (Jain et al. §5), with A and B either the
defaults or fitted to how often the click threshold hides a clicked category
(:func:`fit_from_corpus`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse as sp

from qcat.classifier import load_model
from qcat.console.progress import task
from qcat.errors import InputError
from qcat.evaluation.gold import add_unseen_gold, compare_gold, describe, score_gold
from qcat.evaluation.metrics import reliability
from qcat.evaluation.nodes import no_nodes_note, node_classifier, node_sets, score_nodes
from qcat.evaluation.propensity import PropensityModel, fit_propensity, label_counts
from qcat.evaluation.report import SIMULATED
from qcat.evaluation.scoring import (
    ScoringOptions,
    add_unseen_scores,
    differing_sets,
    pr_curve,
    score_model,
    summarize,
)
from qcat.measure.graded_gold import GradedGold
from qcat.measure.hierarchy import NodeTable
from qcat.measure.leniency import Leniency
from qcat.measure.predict import predict_matched
from qcat.measure.segments import DEFAULT_SHARES, LENGTH_BINS, SEGMENTS, segment_by_impressions, segment_by_length
from qcat.models.calibration import calibrated_sources
from qcat.models.model import Model
from qcat.taxonomy import OTHER_LEAF, Taxonomy
from qcat.taxonomy.confusable import ConfusableMap, load_confusable, recorded_map
from qcat.training.data.corpus import Corpus, LogCorpus
from qcat.training.data.dataset import Dataset, subset_queries
from qcat.training.data.provenance import format_overlap, overlap, read_seen_fingerprints, unseen_by_every
from qcat.training.selection.table_metrics import label_space, truth_over

PREDICTION_K = 10


@dataclass(frozen=True)
class EvaluationSet:
    """The queries of one split with their clicked categories as sparse truth."""

    queries: np.ndarray  # normalized query strings
    label_ids: np.ndarray  # taxonomy ids: the truth's columns
    truth: sp.csr_matrix  # (queries, labels): clicks
    segment: np.ndarray  # head/torso/tail index per query
    length_bin: np.ndarray  # index into LENGTH_BINS per query
    train_label_counts: np.ndarray  # N_l over the training split, per label
    n_train: int
    source: dict


def evaluation_set(dataset: Dataset, split: str, source: dict) -> EvaluationSet:
    labels = label_space(dataset.taxonomy, dataset.table.categories)
    index = {label: i for i, label in enumerate(labels)}
    part = dataset.part(split)
    train = dataset.train
    if len(part.queries) == 0:
        raise InputError(f"the {split} split of {source.get('corpus')} has no queries")
    return EvaluationSet(
        queries=part.queries,
        label_ids=labels,
        truth=truth_over(part, index),
        segment=segment_by_impressions(np.nan_to_num(part.query_impressions), DEFAULT_SHARES),
        length_bin=segment_by_length(part.query_tokens_count()),
        train_label_counts=label_counts(truth_over(train, index)),
        n_train=len(train.queries),
        source=source | {"split": split, "queries": len(part.queries)},
    )


def fit_from_corpus(corpus: Corpus, period: str, dataset: Dataset, evaluation: EvaluationSet) -> PropensityModel:
    """Fit A, B: on the training split, a category is *observed* for a query when its
    clicks pass the corpus click threshold, and *complete* when it has any click."""
    taxonomy = dataset.taxonomy
    every_click = corpus.ingest(period, taxonomy, min_clicks=1).table
    complete_train = subset_queries(
        every_click, Dataset.from_table(every_click, taxonomy, seed=dataset.seed).split == 0
    )
    index = {label: i for i, label in enumerate(evaluation.label_ids)}
    missing = sorted(set(complete_train.categories) - set(index))
    if missing:
        raise InputError(f"categories {missing[:3]} have clicks but are not in the label space")
    complete = label_counts(truth_over(complete_train, index))
    # N is the observed training set's size, the N the fitted model is then applied with.
    return fit_propensity(evaluation.train_label_counts, complete, max(evaluation.n_train, 1))


def with_other_leaves_of(dataset: Dataset, models: list[Model]) -> Dataset:
    """The dataset with the ``Other`` leaves the models answer (:func:`taxonomy_with_other_leaves`)."""
    taxonomy = taxonomy_with_other_leaves(dataset.taxonomy, models)
    return dataset if taxonomy is dataset.taxonomy else replace(dataset, taxonomy=taxonomy)


def taxonomy_with_other_leaves(taxonomy: Taxonomy, models: list[Model]) -> Taxonomy:
    """``taxonomy`` with the ``Other`` leaves the models answer (added under internal nodes by the
    internal-node rule, :meth:`qcat.taxonomy.Taxonomy.with_other_leaves`) that it does not name
    itself. ``qcat evaluate`` and category sessions build their taxonomy with it."""
    parents = set()
    for model in models:
        for label in model.labels:
            if label in taxonomy or label not in model.taxonomy:
                continue
            parent = model.taxonomy.parent(label)
            if parent in taxonomy and not taxonomy.is_leaf(parent) \
                    and model.taxonomy.paths[model.taxonomy.index(label)][-1] == OTHER_LEAF:
                parents.add(parent)
    return taxonomy.with_other_leaves(sorted(parents))[0] if parents else taxonomy


def check_labels(model: Model, taxonomy: Taxonomy, directory: Path, which: str = "the corpus taxonomy") -> None:
    """Every model label must be a category of ``taxonomy`` (``which`` names it) with the same path."""
    wrong = [label for label in model.labels
             if label not in taxonomy or model.taxonomy.path_of(label) != taxonomy.path_of(label)]
    if wrong:
        raise InputError(f"model {directory} predicts categories that {which} lacks or names differently, "
                         f"e.g. {wrong[:3]}: was it trained on another taxonomy?")


def real_set_truth(corpus: Corpus, name: str, split: str, labels: np.ndarray, taxonomy: Taxonomy) -> tuple[np.ndarray, sp.csr_matrix]:
    """A real-text set's queries and truth over the evaluation's label space."""
    table = corpus.query_set(name, split, taxonomy)
    return table.queries, truth_over(table, {label: i for i, label in enumerate(labels)})


def choose_query_sets(corpus: Corpus, split: str, requested: list[str] | None) -> tuple[list[str], list[str]]:
    """The query sets to report (the simulated split first) and notes on sets left out."""
    available = [SIMULATED] + list(corpus.real_sets())
    unknown = [name for name in requested or [] if name not in available]
    if unknown:
        raise InputError(f"--query-set {unknown[0]}: corpus {corpus.directory} has {', '.join(available)}")
    chosen = [name for name in available if name in (requested or available)]
    notes = []
    if split not in ("validation", "test"):
        left_out = [name for name in chosen if name in ("real-title", "real-2tok")]
        if requested and left_out:
            raise InputError(f"the {' and '.join(left_out)} set(s) have validation and test splits, not {split!r}")
        chosen = [name for name in chosen if name not in left_out]
        notes += [f"{name} has no {split} split: left out" for name in left_out]
    return chosen, notes


def with_first_stages(model_dirs: list, names: list[str], loaded: list) -> tuple[list, list[str], list]:
    """Each re-ranker (``qcat train rerank``) followed by its own first stage, named
    ``NAME first stage``, so the report shows what the second stage changed (unless that
    bundle is given already)."""
    given = {Path(d).resolve() for d in model_dirs}
    dirs, out_names, models = [], [], []
    for directory, name, model in zip(model_dirs, names, loaded):
        dirs.append(directory), out_names.append(name), models.append(model)
        first = Path(directory) / "first"
        if model.backend == "rerank" and first.resolve() not in given:
            dirs.append(first), out_names.append(f"{name} first stage"), models.append(model.first)
    return dirs, out_names, models


def confusable_for(model: Model, given: ConfusableMap | None, corpus) -> tuple[ConfusableMap | None, str]:
    """The confusable map lenient top-1 uses for ``model`` and where it came from: ``--confusable``,
    else the map the bundle recorded, else the one the corpus ships (None: lenient not reported)."""
    if given is not None:
        return given, "--confusable"
    recorded = recorded_map(model)
    if recorded is not None:
        return recorded, "recorded in the bundle"
    shipped = corpus.confusable() if hasattr(corpus, "confusable") else None
    return shipped, "shipped with the corpus"


def evaluate(model_dirs: list[Path], names: list[str] | None = None, corpus_dir: "Path | Corpus | LogCorpus | None" = None,
             period: str = "base", split: str = "test", options: ScoringOptions = ScoringOptions(),
             fit: bool = False, propensity: PropensityModel | None = None, query_sets: list[str] | None = None,
             progress: Callable[[str], None] = lambda message: None, confusable: Path | None = None,
             gold: GradedGold | None = None, gold_k: int | None = None) -> dict:
    """Score every model on the split's head/torso/tail and on the corpus's real-text query
    sets, and return the report as a JSON-ready dict. Beside the strict figures it reports
    lenient top-1 (with ``confusable``, a map file, or the map the bundle recorded or the corpus
    ships) and the severe-error rate (:mod:`qcat.measure.leniency`). With ``gold`` (a graded gold,
    :mod:`qcat.evaluation.gold`), each model's top ``gold_k`` (default: the file's) on its queries
    is scored against people's grades too: the report's ``gold`` block and each model's ``gold``
    (and, after the first, ``gold_paired``). A model whose bundle has a node calibration has its
    node answers measured (:mod:`qcat.evaluation.nodes`: each model's ``nodes``; None and a note
    for a model without one)."""
    if not model_dirs:
        raise InputError("give at least one --model")
    names = list(names or [])
    if len(names) > len(model_dirs):
        raise InputError(f"{len(names)} names for {len(model_dirs)} models")
    names += [Path(d).resolve().name for d in model_dirs[len(names):]]
    if len(set(names)) != len(names):
        raise InputError(f"model names must differ, got {names}: name them with --name")
    started = time.perf_counter()
    loaded = [load_model(directory) for directory in model_dirs]  # verified before any data is read
    model_dirs, names, loaded = with_first_stages(list(model_dirs), names, loaded)
    corpus = corpus_dir if isinstance(corpus_dir, (Corpus, LogCorpus)) else Corpus.open(corpus_dir)
    chosen, notes = choose_query_sets(corpus, split, query_sets)
    taxonomy = taxonomy_with_other_leaves(corpus.taxonomy(), loaded)
    for model, directory in zip(loaded, model_dirs):  # a model on another taxonomy fails before the log is read
        check_labels(model, taxonomy, Path(directory))
    dataset = with_other_leaves_of(corpus.dataset(period), loaded)
    given = None if confusable is None else load_confusable(confusable, dataset.taxonomy)
    evaluation = evaluation_set(dataset, split, corpus.source(period))
    gold_block = None
    if gold is not None:
        gold, gold_block = describe(gold, dataset.taxonomy, gold_k)
    real = {name: real_set_truth(corpus, name, split, evaluation.label_ids, dataset.taxonomy)
            for name in chosen if name != SIMULATED}
    progress(f"{evaluation.source['queries']:,} {split} queries, {len(evaluation.label_ids):,} labels"
             + "".join(f"; {name} {len(queries):,} queries" for name, (queries, _) in real.items())
             + f" ({time.perf_counter() - started:.1f} s)")
    node_table, nodes_on = NodeTable.build(dataset.taxonomy), node_sets(evaluation if SIMULATED in chosen else None, real)
    if fit:
        propensity = fit_from_corpus(corpus, period, dataset, evaluation)
        progress(f"fitted propensity A={propensity.a:.3f} B={propensity.b:.3f}")
    propensity = propensity or PropensityModel()
    inverse = propensity.inverse(evaluation.train_label_counts, max(evaluation.n_train, 1))
    models, gold_base = [], None
    seens, matched_of, judged_of = [], [], []  # per model, for the figures on queries no model saw
    with task("scoring models", len(loaded)) as advance:
        for name, directory, model in zip(names, model_dirs, loaded):
            entry = {"name": name, "directory": str(directory), "backend": model.backend,
                     "calibrated": calibrated_sources(model)}
            seen = read_seen_fingerprints(directory)
            seens.append(seen)
            matched_of.append({})
            entry["overlap"] = training_overlap(seen, evaluation, real, chosen)
            notes += overlap_notes(name, entry["overlap"])
            confusable_map, origin = confusable_for(model, given, corpus)
            entry["confusable"] = None if confusable_map is None else {
                "source": confusable_map.source, "sha256": confusable_map.sha256, "pairs": len(confusable_map),
                "origin": origin}
            leniency = Leniency.build(evaluation.label_ids, dataset.taxonomy, confusable_map)
            if SIMULATED in chosen:
                tick = time.perf_counter()
                matched = predict_matched(model, evaluation.queries, evaluation.label_ids, evaluation.truth, PREDICTION_K)
                entry["predict_seconds"] = time.perf_counter() - tick
                matched_of[-1]["all"] = matched
                scores = score_model(matched, evaluation.segment, evaluation.length_bin, _weights(inverse, matched), options,
                                     leniency)
                raw = predict_matched(model.uncalibrated(), evaluation.queries, evaluation.label_ids, evaluation.truth, PREDICTION_K)
                scores.segments["all"]["ECE raw"] = reliability(raw, options.reliability_bins).expected_calibration_error
                entry |= scores.to_json()
                progress(f"{name}: PR@1 {scores.segments['all']['PR@1']:.4f} (predicted in {entry['predict_seconds']:.1f} s; "
                         f"{format_overlap(entry['overlap']['all'])})")
                progress(f"{name}: {leniency_line(scores.segments['all'])}")
            if gold is not None:
                judged = score_gold(model, gold, dataset.taxonomy, gold_block["k"], seen)
                judged_of.append(judged)
                entry["gold"] = judged["figures"]
                gold_block["seen_in_training"][name] = judged["figures"]["all"]["seen_in_training"]
                if gold_base is None:
                    gold_base = judged
                else:
                    entry["gold_paired"] = compare_gold(gold_base, judged, gold)
            entry["query_sets"] = {}
            for set_name, (queries, truth) in real.items():
                matched = predict_matched(model, queries, evaluation.label_ids, truth, PREDICTION_K)
                matched_of[-1][set_name] = matched
                summary = summarize(matched, _weights(inverse, matched), options, leniency)
                raw = predict_matched(model.uncalibrated(), queries, evaluation.label_ids, truth, PREDICTION_K)
                summary["ECE raw"] = reliability(raw, options.reliability_bins).expected_calibration_error
                summary["PR@1 curve"] = pr_curve(matched)
                entry["query_sets"][set_name] = summary
                progress(f"{name}: {set_name} PR@1 {summary['PR@1']:.4f}, ECE {summary['ECE raw']:.3f} raw -> "
                         f"{summary['ECE']:.3f} calibrated ({format_overlap(entry['overlap'][set_name])})")
                progress(f"{name}: {set_name} {leniency_line(summary)}")
            classifier = node_classifier(model, directory)  # None: the bundle has no node calibration
            entry["nodes"] = None if classifier is None else score_nodes(
                classifier, node_table, evaluation.label_ids, nodes_on, lambda message: progress(f"{name}: {message}"))
            notes += [no_nodes_note(name, directory)] if classifier is None else []
            models.append(entry)
            advance()
    queries_of = {"all": evaluation.queries} | {name: queries for name, (queries, _) in real.items()}
    notes += add_unseen(models, seens, queries_of, matched_of, gold, judged_of, progress)
    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": evaluation.source,
        "query_sets": chosen,
        "notes": notes,
        "segments": {name: int((evaluation.segment == s).sum()) for s, name in enumerate(SEGMENTS)},
        "real_sets": {name: {"queries": len(queries), "split": "all" if name == "real-queries" else split}
                      for name, (queries, _) in real.items()},
        "length_bins": list(LENGTH_BINS),
        "options": {"threshold": options.threshold, "k": options.k, "prediction_k": PREDICTION_K},
        "propensity": {"A": propensity.a, "B": propensity.b, "fitted": propensity.fitted,
                       "N": evaluation.n_train},
        "models": models,
    } | ({} if gold_block is None else {"gold": gold_block})


def add_unseen(models: list[dict], seens: list, queries_of: dict, matched_of: list[dict], gold: GradedGold | None,
               judged_of: list[dict], progress: Callable[[str], None]) -> list[str]:
    """Where the models saw different numbers of a set's queries in training, their headline figures
    on the queries none of them saw, and paired differences on those (issue 53); the report's note."""
    unseen = {s: unseen_by_every(queries_of[s], seens) for s in differing_sets(models) if s in queries_of}
    if unseen:
        add_unseen_scores(models, matched_of, unseen)
        for entry in models:
            for s, figures in entry["unseen"].items():
                paired = entry.get("unseen_paired", {}).get(s)
                progress(f"{entry['name']} on unseen queries ({figures['queries']:,} of the "
                         f"{entry['overlap'][s]['queries']:,} {'simulated split' if s == 'all' else s} queries, those "
                         f"no model saw): PR@1 {figures['PR@1']:.4f}" + ("" if paired is None else
                         f"; δ PR@1 vs {models[0]['name']} {paired['value']:+.4f} ± {paired['se']:.4f} (paired SE)"))
    gold_seen = {m["gold"]["all"]["seen_in_training"]["seen"] for m in models} if gold is not None else set()
    gold_unseen = unseen_by_every(gold.queries, seens) if len(gold_seen) > 1 and None not in gold_seen else None
    if gold_unseen is not None:
        add_unseen_gold(models, judged_of, gold_unseen)
    named = [("simulated split" if s == "all" else s) for s in unseen] + (["--gold"] if gold_unseen is not None else [])
    if not named:
        return []
    return [f"the models saw different numbers of the {' and '.join(named)} queries in training: every headline figure "
            "there is also given on unseen queries (those no model saw), and the paired differences are computed "
            "on those"]


def leniency_line(scores: dict) -> str:
    """Strict and lenient top-1 and the severe-error rates with their standard errors, in one line."""
    def figure(name: str) -> str:
        value, se = scores.get(name), scores.get(name + " SE")
        if value is None:
            return "– (no confusable map)"
        if math.isnan(value):  # no query to average over (e.g. no answer scored >= 0.5): "–", as report.md
            return "–"
        return f"{value:.4f}" + ("" if se is None or math.isnan(se) else f" ± {se:.4f}")

    share = scores["confident share"]
    return (f"top-1 strict {figure('top-1 strict')}, lenient {figure('top-1 lenient')}; severe {figure('severe')}, "
            f"severe among answers scored >= 0.5 {figure('severe confident')} "
            f"({'–' if math.isnan(share) else f'{share:.1%}'} of queries)")


def training_overlap(seen, evaluation: EvaluationSet, real: dict, chosen: list[str]) -> dict:
    """How many evaluated queries the model saw in training, per segment of the simulated
    split (``all`` for the whole split) and per real-text set."""
    sets = {}
    if SIMULATED in chosen:
        sets["all"] = overlap(evaluation.queries, seen)
        for s, segment in enumerate(SEGMENTS):
            sets[segment] = overlap(evaluation.queries[evaluation.segment == s], seen)
    return sets | {name: overlap(queries, seen) for name, (queries, _) in real.items()}


def overlap_notes(name: str, sets: dict) -> list[str]:
    """Report notes on a model's overlap: unknown (one note), or seen queries per query set."""
    if any(entry["seen"] is None for entry in sets.values()):
        return [f"{name} records no training queries (a bundle from before qcat recorded them): its overlap "
                f"with the evaluated queries is unknown"]
    return [f"{name} saw {entry['seen']:,} of the {entry['queries']:,} distinct "
            f"{'evaluated split' if set_name == 'all' else set_name} queries in training ({entry['share']:.1%})"
            for set_name, entry in sets.items() if set_name not in SEGMENTS and entry["seen"]]


def _weights(inverse: np.ndarray, matched) -> np.ndarray:
    """Labels outside the evaluation space are never true: weight them like unseen ones."""
    return np.concatenate([inverse, np.full(matched.truth.shape[1] - len(inverse), inverse.max())])
