"""The golden-data evaluation pipeline (eBay §4.2.2): the same mini search with a baseline
classifier, a target classifier and no classifier (the floor), scored against golden
judgments per head/torso/tail query set; deltas carry bootstrap confidence intervals.

Either classifier may answer by *node* at a precision P instead (``precisions``, the flags
``--baseline-precision``/``--target-precision``): each query's deepest taxonomy node that its
category lies beneath at least P of the time (the bundle's node calibration, ``nodes.json``)
boosts or filters the listings beneath it, and a query without a node is searched as without a
classifier. The report then adds PR@k and, per set, the node's mean depth and the share of
queries without a node."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np

from qcat.classifier import Classifier, load_model
from qcat.console.progress import task
from qcat.errors import InputError
from qcat.evaluation.evaluate import check_labels
from qcat.evaluation.golden.golden_set import GoldenPairs, GoldenSet
from qcat.evaluation.golden.inventory import Inventory, build_inventory
from qcat.evaluation.golden.query_sets import SETS, Demand, QuerySets, sample_query_sets
from qcat.evaluation.golden.search import MiniSearch, NodeAnswers, SearchConfig
from qcat.evaluation.golden.system_metrics import (
    METRICS,
    NODE_METRICS,
    QueryJudgments,
    bootstrap_delta,
    mean_defined,
    per_query_metrics,
)
from qcat.models.calibration.nodes import NODES_FILE, NodeChains, check_precision, level_index
from qcat.taxonomy import Taxonomy
from qcat.text.normalize import tokenize
from qcat.training.data.listings import Catalog
from qcat.training.data.provenance import format_overlap, overlap, read_seen_fingerprints

FLOOR = "no classifier"
ALL = "all"
PRECISION_FLAGS = ("--baseline-precision", "--target-precision")


@dataclass(frozen=True)
class HarnessConfig:
    search: SearchConfig = field(default_factory=SearchConfig)
    per_segment: int = 10_000
    sample_fraction: float = 0.1
    bootstrap: int = 1000
    seed: int = 0
    precisions: tuple[float | None, float | None] = (None, None)  # baseline's, target's: answer by node at P

    def __post_init__(self) -> None:
        if len(self.precisions) != 2:
            raise InputError(f"precisions: one for the baseline and one for the target, got {list(self.precisions)}")
        for flag, precision in zip(PRECISION_FLAGS, self.precisions):
            try:
                check_precision(precision)
            except InputError as exc:
                raise InputError(f"{flag}: {exc}") from None
        if self.per_segment < 1:
            raise InputError(f"queries per segment must be positive, got {self.per_segment}")
        if self.bootstrap < 0:
            raise InputError(f"bootstrap draws must be non-negative, got {self.bootstrap}")
        if not 0 <= self.sample_fraction <= 1:
            raise InputError(f"inventory sample fraction must lie in [0, 1], got {self.sample_fraction}")


def check_names(names: tuple[str, str]) -> None:
    if len(set(names)) != 2 or FLOOR in names:
        raise InputError(f"the two systems need distinct names other than {FLOOR!r}, got {list(names)}")


def query_judgments(pairs: GoldenPairs, queries: np.ndarray, inventory: Inventory) -> QueryJudgments:
    """The golden pairs of ``queries`` (in that order), with their inventory rows."""
    position = {q: i for i, q in enumerate(queries.tolist())}
    query_index = np.array([position.get(q, -1) for q in pairs.query.tolist()], dtype=np.int64)
    keep = np.nonzero(query_index >= 0)[0]
    keep = keep[np.argsort(query_index[keep], kind="stable")]
    row_of = {listing: i for i, listing in enumerate(inventory.listing_id.tolist())}
    doc = np.array([row_of.get(listing, -1) for listing in pairs.listing_id[keep].tolist()], dtype=np.int64)
    counts = np.bincount(query_index[keep], minlength=len(queries))
    return QueryJudgments(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), doc,
                          pairs.relevance[keep], pairs.grade[keep])


def evaluation_sets(pairs: GoldenPairs, demand: Demand | None, config: HarnessConfig) -> tuple[dict[str, np.ndarray], QuerySets | None]:
    """Query sets by segment (and the golden queries without demand), or without demand data
    one set of all golden queries; ``all`` is the union, in set order."""
    if demand is not None:
        sets = sample_query_sets(pairs.query, demand, config.per_segment, config.seed)
        present = {name: q for name, q in sets.queries.items() if len(q)}
        return {**present, ALL: np.concatenate(list(present.values()))}, sets
    queries = np.unique(pairs.query)
    if len(queries) > config.per_segment:
        queries = np.sort(np.random.default_rng(config.seed).choice(queries, config.per_segment, replace=False))
    return {ALL: queries}, None


def summarize(metrics: dict[str, np.ndarray], rows: np.ndarray, names: tuple[str, ...] = METRICS) -> dict:
    out = {name: mean_defined(metrics[name][rows]) for name in names}
    out["queries"] = int(len(rows))
    out["defined"] = {name: int((~np.isnan(metrics[name][rows])).sum()) for name in names}
    out["mean_returned"] = float(metrics["returned"][rows].mean()) if len(rows) else float("nan")
    out["zero_result_share"] = float((metrics["returned"][rows] == 0).mean()) if len(rows) else float("nan")
    out["judged_share"] = mean_defined(metrics["judged_share"][rows])
    return out


def load_checked_models(names: tuple[str, str], directories: tuple[Path, Path], taxonomy: Taxonomy,
                        precisions: tuple[float | None, float | None] = (None, None)) -> dict:
    """``name -> (model, directory, classifier)`` for both systems, each refused unless its
    categories are the corpus taxonomy's, and one given a precision unless its bundle has a node
    calibration (``classifier``: the bundle as a Classifier, to answer by node; None without a
    precision): checked before any golden data is read or simulated."""
    check_names(names)
    models = {}
    for name, directory, precision, flag in zip(names, directories, precisions, PRECISION_FLAGS):
        classifier = None
        if precision is None:
            model = load_model(directory)
        else:
            # Without judged overrides, as load_model: the same model, with its node calibration.
            classifier = Classifier.load(directory, overrides=False)
            if classifier.nodes is None:
                raise InputError(f"{flag} {precision:g}: model bundle {directory} has no node calibration ({NODES_FILE}), "
                                 f"so it cannot answer by node; add one: qcat train nodes --model {directory} --out NEW_DIR")
            model = classifier.model
        check_labels(model, taxonomy, Path(directory))
        models[name] = (model, directory, classifier)
    return models


def node_answers(classifier: Classifier, queries: np.ndarray, precision: float,
                 chains: NodeChains | None = None) -> NodeAnswers:
    """Each query's node at ``precision`` from its chains (:meth:`Classifier.node_chains`, one call of
    the model; pass ``chains`` to reuse them at another precision)."""
    chains = chains if chains is not None else classifier.node_chains(list(queries))
    position = chains.answers(precision)
    taxonomy = classifier.taxonomy
    depth_of = np.array([len(path) for path in taxonomy.paths], dtype=np.int64)
    leaf_of = np.ones(len(taxonomy), dtype=bool)
    leaf_of[[p for p in taxonomy.parents if p >= 0]] = False
    answered = position >= 0
    at = np.maximum(position, 0)
    depth = np.where(answered, depth_of[at], 0)
    probability = np.where(answered, chains.probability[np.arange(len(position)), np.maximum(depth - 1, 0)], 0.0)
    level = level_index(precision)
    unsupported = np.isnan(chains.thresholds[:, level]) if level is not None else np.ones(len(position), dtype=bool)
    return NodeAnswers(np.where(answered, np.array(taxonomy.ids, dtype=object)[at], ""), probability, depth,
                       answered & leaf_of[at], unsupported & ~answered)


def golden_evaluate(golden: GoldenSet, baseline_dir: Path, target_dir: Path, catalog: Catalog, taxonomy: Taxonomy,
                    demand: Demand | None, config: HarnessConfig = HarnessConfig(),
                    names: tuple[str, str] = ("baseline", "target"),
                    progress: Callable[[str], None] = lambda message: None, models: dict | None = None) -> dict:
    """``models``: what :func:`load_checked_models` gave for ``names`` (loaded here when None)."""
    started = time.perf_counter()
    check_names(names)
    models = models or load_checked_models(names, (baseline_dir, target_dir), taxonomy, config.precisions)
    precision_of = {name: p for name, p in zip(names, config.precisions) if p is not None}
    metric_names = NODE_METRICS if precision_of else METRICS
    seen = {name: read_seen_fingerprints(entry[1]) for name, entry in models.items()}
    pairs = golden.pairs()
    inventory = build_inventory(catalog, taxonomy, pairs.listing_id, config.sample_fraction, config.seed)
    sets, query_sets = evaluation_sets(pairs, demand, config)
    queries = sets[ALL]
    judgments = query_judgments(pairs, queries, inventory)
    progress(f"{len(queries):,} queries, {len(judgments.doc):,} judged pairs; inventory {len(inventory):,} listings "
             f"({inventory.golden_listings:,} judged, {inventory.sampled_listings:,} sampled, "
             f"{len(inventory.unsearchable):,} judged listings unsearchable) ({time.perf_counter() - started:.1f} s)")
    if inventory.golden_listings == 0:
        progress("warning: no judged listing is in the catalog: they are all unsearchable, so no system can find one")
    search = MiniSearch(inventory, config.search, taxonomy)
    token_lists = [tokenize(q) for q in queries]
    tick = time.perf_counter()
    with task(f"retrieving candidates for {len(queries):,} queries"):
        candidates = search.retrieve(token_lists)
    timings = {"retrieve": time.perf_counter() - tick}
    per_system, nodes, chains = {}, {}, {}  # chains: by bundle, for one bundle answering at two precisions
    with task(f"searching {len(queries):,} queries", len(names) + 1) as advance:
        for system in (FLOOR, *names):
            tick = time.perf_counter()
            model = None if system == FLOOR else models[system][0]
            if system in precision_of:
                classifier = models[system][2]
                key = Path(models[system][1]).resolve()
                chains[key] = chains[key] if key in chains else classifier.node_chains(list(queries))
                nodes[system] = node_answers(classifier, queries, precision_of[system], chains[key])
                results = search.search(list(queries), token_lists, None, candidates, nodes[system])
            else:
                results = search.search(list(queries), token_lists, model, candidates)
            per_system[system] = per_query_metrics(judgments, results.docs)
            timings[system] = time.perf_counter() - tick
            progress(f"{system}: searched and scored in {timings[system]:.1f} s"
                     + (f" ({format_overlap(overlap(queries, seen[system]))})" if system in seen else ""))
            advance()
    present = [s for s in SETS if s in sets]
    offsets = np.cumsum([0] + [len(sets[s]) for s in present])
    rows_of = {s: np.arange(offsets[i], offsets[i + 1]) for i, s in enumerate(present)} | {ALL: np.arange(len(queries))}
    segments = list(rows_of)
    comparisons = [(names[1], names[0]), (names[0], FLOOR), (names[1], FLOOR)]
    deltas = []
    for first, second in comparisons:
        for segment in segments:
            rows = rows_of[segment]
            entry = {"target": first, "baseline": second, "segment": segment}
            for metric in metric_names:
                delta, low, high = bootstrap_delta(per_system[second][metric][rows], per_system[first][metric][rows],
                                                   config.bootstrap, config.seed)
                entry[metric] = {"delta": delta, "low": low, "high": high}
            deltas.append(entry)
    report = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "golden": {"source": golden.report.source if golden.report else "", "judgments": len(golden),
                   "pairs": int(len(pairs.query)), "queries": int(len(np.unique(pairs.query))),
                   "simulated": bool(golden.simulated.all()), "graded": golden.has_grades,
                   "import": golden.report.to_json() if golden.report else None},
        "demand": demand.source if demand is not None else None,
        "query_sets": query_sets.to_json() if query_sets else {"sampled": {ALL: int(len(queries))},
                                                               "note": "no golden query has demand: one query set"},
        "inventory": inventory.summary(),
        "search": config.search.to_json(),
        "options": {"per_segment": config.per_segment, "bootstrap": config.bootstrap, "seed": config.seed,
                    "metrics": list(metric_names)},
        "systems": [{"name": name, "directory": str(models[name][1]) if name in models else None,
                     "backend": models[name][0].backend if name in models else "bm25",
                     "segments": {segment: summarize(per_system[name], rows_of[segment], metric_names)
                                  for segment in segments}}
                    | ({"overlap": {segment: overlap(queries[rows_of[segment]], seen[name]) for segment in segments}}
                       if name in models else {})
                    for name in (FLOOR, *names)],
        "deltas": deltas,
        "seconds": {**{k: round(v, 2) for k, v in timings.items()}, "total": round(time.perf_counter() - started, 2)},
    }
    if precision_of:  # only then: a report without node answers stays as it was
        report["options"]["precisions"] = dict(zip(("baseline", "target"), config.precisions))
        for system in report["systems"]:
            if system["name"] in nodes:
                answers = nodes[system["name"]]
                system["node"] = {"precision": precision_of[system["name"]],
                                  "segments": {segment: answers.summary(rows_of[segment]) for segment in segments}}
    return report
