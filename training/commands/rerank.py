"""``qcat train rerank --model BUNDLE --out DIR [--catalog FILE] [--candidates K]``: a learned
second stage over a bundle's candidates (issue 32; the model is :mod:`qcat.rerank`, the
learner :mod:`qcat.training.rerank.trainer`).

The data is the one the first stage records (its corpus or log, split and taxonomy): the
ranker learns on its validation sets (the split's validation queries and, for a corpus, the
real-text validation sets) with the settings chosen out of fold on the validation objective;
the test sets are only reported. The neighbour vote indexes ``--catalog FILE``, or the corpus's
own catalog; either way without the listings a corpus holds out for its real-text sets.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from qcat.errors import InputError
from qcat.inputs.paths import check_file

LEAVES = (4, 7)
ROUNDS = (50, 100, 200)
DEFAULT_LEAVES, DEFAULT_ROUNDS = 4, 100  # the setting others must beat by more than 2 paired SE


def add_rerank_command(sub: argparse._SubParsersAction) -> None:
    from qcat.cli import int_at_least

    rerank = sub.add_parser("rerank", help="train a second stage that re-ranks a bundle's candidates (issue 32)")
    rerank.add_argument("--model", type=Path, required=True, help="the first stage's bundle (e.g. the demo hybrid)")
    rerank.add_argument("--catalog", type=Path, default=None, metavar="FILE",
                        help="listings whose titles the neighbour vote searches (default: the corpus's catalog); "
                             "a corpus's held-out listings are always left out")
    rerank.add_argument("--candidates", type=int_at_least(1), default=20, metavar="K",
                        help="the top K of each answer (the first stage, each part) are candidates (default 20)")
    rerank.add_argument("--neighbours", type=int_at_least(1), default=10,
                        help="catalog listings whose categories vote (default 10)")
    rerank.add_argument("--folds", type=int_at_least(2), default=5, help="cross-fitting folds (default 5)")
    rerank.add_argument("--leaves", default=",".join(map(str, LEAVES)),
                        help=f"leaves per tree to choose from (default {','.join(map(str, LEAVES))})")
    rerank.add_argument("--rounds", default=",".join(map(str, ROUNDS)),
                        help=f"boosting rounds to choose from (default {','.join(map(str, ROUNDS))})")
    rerank.add_argument("--out", type=Path, required=True, help="the bundle to write (new or an empty directory)")
    from qcat.training.commands.judged import add_rerank_judged_flags

    add_rerank_judged_flags(rerank)
    rerank.set_defaults(run=run_train_rerank)


def default_setting(leaves_grid: tuple[int, ...], rounds_grid: tuple[int, ...]) -> int:
    """The grid position of the stated default, 4 leaves and 100 rounds (or the grid's first of
    each where it lacks them), in the grid's order (leaves, then rounds)."""
    leaves = DEFAULT_LEAVES if DEFAULT_LEAVES in leaves_grid else leaves_grid[0]
    rounds = DEFAULT_ROUNDS if DEFAULT_ROUNDS in rounds_grid else rounds_grid[0]
    return leaves_grid.index(leaves) * len(rounds_grid) + rounds_grid.index(rounds)


def _numbers(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"{flag} {text!r}: give whole numbers separated by commas") from None
    if not values or min(values) < 2:
        raise InputError(f"{flag} {text!r}: every value must be at least 2")
    return values


def first_stage_data(model_dir: Path):
    """The data the first stage was trained on: (corpus or log, the data block, the dataset, the
    validation sets), read as ``qcat train hybrid`` reads its parts' data."""
    from qcat.bundles.bundle import read_manifest
    from qcat.cli import ArgumentParser
    from qcat.training.commands.data_flags import add_data_flags, data_args_from, data_from_args, load_dataset
    from qcat.training.data.provenance import data_source

    parser = ArgumentParser(prog="qcat train rerank")
    add_data_flags(parser)
    args = parser.parse_args(["--out", "unused"])  # the data flags' defaults
    data_args_from(args, data_source(read_manifest(model_dir)), model_dir)
    data = data_from_args(args)
    dataset, source, sets = load_dataset(args, data)
    return data[0], source, dataset, sets


def neighbour_listings(corpus, catalog_file: Path | None):
    """The catalog the neighbour vote searches and which of its listings it keeps."""
    from qcat.training.data.listings import load_catalog

    base = getattr(corpus, "base", corpus)  # a CatalogData wraps the corpus
    has_catalog = hasattr(base, "meta") and "catalog" in base.meta
    if catalog_file is None:
        if not has_catalog:
            raise InputError("the first stage's data has no catalog: give --catalog FILE (the listings the neighbour "
                             "vote searches)")
        catalog = base.catalog()
        return catalog, base.holdout_split(catalog) == 0, str(base.path("catalog"))
    check_file(catalog_file, "--catalog")
    catalog = load_catalog(catalog_file)
    keep = np.ones(len(catalog), dtype=bool)
    if has_catalog:  # leave out the corpus's held-out listings, by id and by title
        from qcat.text.normalize import normalize

        own = base.catalog()
        held = base.holdout_split(own) != 0
        held_ids, held_titles = set(own.listing_id[held].tolist()), {normalize(t) for t in own.title[held]}
        keep = np.array([i not in held_ids and normalize(t) not in held_titles
                         for i, t in zip(catalog.listing_id.tolist(), catalog.title.tolist())], dtype=bool)
    return catalog, keep, str(catalog_file)


def judged_examples(args: argparse.Namespace, model, clicked, judged, examples, weights) -> tuple[list, list]:
    """``--judged``: the judged queries' examples, one more set the ranker trains on (never chosen on),
    each query weighing ``--judged-weight`` validation queries, and the set's weight (also recorded in
    ``judged.record``); two empty lists without ``--judged``."""
    from qcat.training.commands.judged import DEFAULT_RERANK_JUDGED_WEIGHT, judged_table
    from qcat.training.rerank.data import build_examples

    if judged.judged is None:
        return [], []
    found = build_examples(model, judged_table(clicked, judged.judged), "judged")
    weight = DEFAULT_RERANK_JUDGED_WEIGHT if args.judged_weight is None else args.judged_weight
    per_query = sum(weights) / max(sum(len(ex.queries) for ex in examples), 1)
    judged.record |= {"weight": weight, "chosen_by": "flags" if args.judged_weight is not None else "fixed default",
                      "set_weight": weight * per_query * len(found.queries), "relevant_candidates":
                      int(found.relevant.sum()), "candidates": len(found.relevant)}
    print(f"  judged: {len(found.queries):,} queries train the ranker (each weighing {weight:g} validation queries; "
          f"never chosen on), the right one among the candidates for {found.reachable.mean():.3f}")
    return [found], [judged.record["set_weight"]]


class OutOfFold:
    """A stand-in model whose answers are the re-ranker's out-of-fold rankings: what the
    calibration is fitted on, so it never reads scores of a ranker that trained on the query."""

    def __init__(self, labels, answers: dict[str, tuple[np.ndarray, np.ndarray]], source: str):
        self.labels, self._answers, self._source = labels, answers, source

    def predict(self, queries, k: int):
        from qcat.models.model import Predictions

        labels = np.full((len(queries), k), -1, dtype=np.int32)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for i, query in enumerate(queries):
            top, share = self._answers[str(query)]
            labels[i, :min(k, len(top))], scores[i, :min(k, len(top))] = top[:k], share[:k]
        return Predictions(labels, scores, (self._source,) * len(queries))


def out_of_fold_answers(examples, scores) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per query, its candidates ranked by their out-of-fold scores and their softmax shares."""
    answers = {}
    for ex, score in zip(examples, scores):
        for i, query in enumerate(ex.queries.tolist()):
            lo, hi = ex.ptr[i], ex.ptr[i + 1]
            s = score[lo:hi]
            order = np.lexsort((ex.candidates[lo:hi], ex.first_rank[lo:hi], -s))
            share = np.exp(s - s.max()) if hi > lo else s
            answers[query] = (ex.candidates[lo:hi][order], (share / max(share.sum(), 1e-300))[order])
    return answers


def run_train_rerank(args: argparse.Namespace) -> int:
    from qcat.bundles.bundle import read_manifest
    from qcat.classifier import load_model
    from qcat.console.output import write_directory
    from qcat.rerank.features import feature_names
    from qcat.rerank.model import FIRST_DIR, SOURCE, RerankModel
    from qcat.taxonomy.confusable import CONFIG_KEY
    from qcat.training.commands.bundles import seen_queries
    from qcat.training.commands.data_flags import print_objective
    from qcat.training.commands.judged import check_judged_flags, check_parts_judged, judged_for_selection
    from qcat.training.data.provenance import read_seen_fingerprints, write_seen_queries
    from qcat.training.rerank.data import build_examples, label_prior, neighbour_index
    from qcat.training.rerank.trainer import BASE_PARAMS, crossfit, export_trees, no_leak_check, stack, train_booster
    from qcat.training.selection.calibrate import describe_fit, fit_calibration
    from qcat.training.selection.decide import clears, decide, in_paired_se, paired_difference, told_apart_worse
    from qcat.training.selection.table_metrics import evaluate_pr

    started = time.perf_counter()
    check_judged_flags(args)
    leaves_grid, rounds_grid = _numbers(args.leaves, "--leaves"), _numbers(args.rounds, "--rounds")
    if read_manifest(args.model).backend == "rerank":
        raise InputError(f"--model {args.model} is a re-ranker already: give its first stage ({args.model}/first)")
    first = load_model(args.model)
    corpus, source, clicked, sets = first_stage_data(args.model)
    dataset, sets, judged = judged_for_selection(args, clicked, sets)
    check_parts_judged({"--model": read_manifest(args.model)}, judged)  # its judged queries trained the first stage
    print_objective(sets)
    catalog, keep, catalog_name = neighbour_listings(corpus, args.catalog)
    index, counts = neighbour_index(catalog, keep, first.labels, first.taxonomy)
    print(f"neighbour vote: BM25 over {counts['listings']:,} listing titles of {catalog_name} "
          f"({counts['held_out_left_out']:,} held-out listings left out)")
    model = RerankModel(first=first, index=index, prior=label_prior(clicked.train, first.labels), trees=None,
                        taxonomy=first.taxonomy, config={}, metrics={}, depth=args.candidates, neighbours=args.neighbours)
    names_of_features = list(feature_names(model.answers))
    examples = [build_examples(model, table, name) for name, (table, _) in sets.items()]
    weights = [weight for _, weight in sets.values()]
    extra, extra_weights = judged_examples(args, model, clicked, judged, examples, weights)  # trained on, never chosen on
    trained, trained_weights = examples + extra, weights + extra_weights
    no_leak_check(trained, args.folds)
    for ex in examples:
        print(f"  {ex.name}: {len(ex.queries):,} queries, {len(ex.relevant) / max(len(ex.queries), 1):.1f} candidates "
              f"a query, the right one among them for {ex.reachable.mean():.3f}")
    first_hits = [ex.top1_hit(-ex.first_rank) for ex in examples]
    first_objective = sum(w * h.mean() for w, h in zip(weights, first_hits))
    print(f"first stage: validation objective {first_objective:.4f} (" + ", ".join(
        f"{ex.name} {h.mean():.4f}" for ex, h in zip(examples, first_hits)) + ")")
    table, names, outcomes, oof_by = [], [], [], []
    set_weights = {ex.name: w for ex, w in zip(examples, weights)}
    for leaves in leaves_grid:
        params = BASE_PARAMS | {"num_leaves": leaves, "min_data_in_leaf": 100}
        oof = crossfit(trained, params, rounds_grid, args.folds, names_of_features, trained_weights)
        for rounds in rounds_grid:
            hits = [ex.top1_hit(score) for ex, score in zip(examples, oof[rounds])]
            value = sum(w * h.mean() for w, h in zip(weights, hits))
            row = {"leaves": leaves, "rounds": rounds, "objective": round(value, 5)} | {
                f"pr@1 {ex.name}": round(h.mean(), 5) for ex, h in zip(examples, hits)} | {
                f"paired se {ex.name}": round(float((h - b).std(ddof=1) / np.sqrt(max(len(h), 2))), 5)
                for ex, h, b in zip(examples, hits, first_hits)}
            table.append(row)
            names.append(f"{leaves} leaves, {rounds} rounds")
            outcomes.append({ex.name: h for ex, h in zip(examples, hits)})
            oof_by.append((leaves, rounds, oof[rounds]))
            print("  out of fold: " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    default = default_setting(leaves_grid, rounds_grid)
    decision = decide(names, outcomes, set_weights, default)
    decision.annotate(table)
    print(decision.summary())
    leaves, rounds, oof_scores = oof_by[decision.chosen]
    value = table[decision.chosen]["objective"]
    gain, gain_se = paired_difference(outcomes[decision.chosen], {ex.name: h for ex, h in zip(examples, first_hits)},
                                      set_weights)
    versus_first = {"difference": round(gain, 5), "paired_se": round(gain_se, 5),
                    "told_apart": clears(gain, gain_se)}
    print(f"chose {leaves} leaves, {rounds} rounds: objective {value:.4f} out of fold (first stage {first_objective:.4f}, "
          f"{gain:+.4f} ± {gain_se:.4f} paired SE)")
    if not versus_first["told_apart"]:
        verdict = ("finds the re-ranker worse than its first stage" if told_apart_worse(gain, gain_se) else
                   "cannot tell the re-ranker from its first stage")
        print(f"warning: validation ({decision.queries:,} queries) {verdict} ({gain:+.4f} ± {gain_se:.4f}, "
              f"{in_paired_se(gain, gain_se)}): prefer the first stage", file=sys.stderr)
    stacked = stack(trained, args.folds, trained_weights)
    params = BASE_PARAMS | {"num_leaves": leaves, "min_data_in_leaf": 100}
    booster = train_booster(stacked.rows, stacked.relevant, stacked.group_sizes, stacked.weight, params, rounds,
                            names_of_features)
    trees = export_trees(booster, len(names_of_features))
    gains = booster.feature_importance(importance_type="gain")
    gain = {name: round(float(g / max(gains.sum(), 1e-300)), 4) for name, g in zip(names_of_features, gains)}
    calibration = fit_calibration(OutOfFold(first.labels, out_of_fold_answers(examples, oof_scores), SOURCE), sets)
    model = replace(model, trees=trees, calibration=calibration,
                    config={"first_stage": str(args.model),
                            "data": source | ({"judged": judged.record} if judged.record else {}), "neighbour_catalog": catalog_name,
                            "neighbour_listings": counts, "learner": "lightgbm lambdarank",
                            "params": {k: v for k, v in params.items() if k != "verbose"} | {"rounds": rounds},
                            "folds": args.folds} | (  # the first stage's confusable map, if it recorded one
                        {CONFIG_KEY: first.config[CONFIG_KEY]} if CONFIG_KEY in getattr(first, "config", {}) else {}),
                    metrics={"selection": {"chosen": {"leaves": leaves, "rounds": rounds},
                                           "first_stage_objective": round(first_objective, 5),
                                           "decision": decision.to_json(),
                                           "versus_first_stage": versus_first, "table": table},
                             "feature_gain": gain})
    model.metrics["test"] = evaluate_pr(model, dataset.test)
    seen = read_seen_fingerprints(args.model)

    # Its learner and its calibration trained on every validation set's queries (real-text ones too).
    learned_on = seen_queries(dataset) + [str(q) for table, _ in sets.values() for q in table.queries]
    also_seen = ([seen] if seen is not None else []) + judged.also_seen()

    def write(directory: Path) -> None:  # as save_bundle, and the first stage keeps its record too
        write_seen_queries(directory, learned_on, also_seen)
        if seen is not None:  # the first stage keeps its own record, so `qcat evaluate` reports its overlap too
            write_seen_queries(directory / FIRST_DIR, [], [seen])
        model.save(directory)

    write_directory(Path(args.out), write)
    print(describe_fit(calibration))
    print("feature gain: " + ", ".join(f"{n} {g:.3f}" for n, g in sorted(gain.items(), key=lambda x: -x[1])[:10]))
    print("test " + json.dumps(model.metrics["test"]))
    print(f"wrote rerank {args.out} in {time.perf_counter() - started:.0f} s")
    return 0
