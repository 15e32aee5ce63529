"""A session's queries from two classifiers (eBay §4.2.3): sampled a third per head/torso/tail
segment of the log's demand and searched with both (:func:`build_queries`), or taken from
imported result lists (:func:`select_imported`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from qcat.console.progress import task
from qcat.errors import InputError
from qcat.judging.grading.sessions.specs import (
    DEFAULT_QUERIES,
    SEARCH_BATCH,
    SEGMENTS,
    TOP_N,
    BuiltQueries,
    Listing,
    QuerySpec,
    known_brand,
    known_price,
    split_evenly,
)


def build_queries(baseline_dir: Path, target_dir: Path, n_queries: int = DEFAULT_QUERIES, corpus_dir: Path | None = None,
                  period: str = "base", seed: int = 0, search_config=None,
                  progress: Callable[[str], None] = lambda message: None,
                  differing_top: int | None = None) -> BuiltQueries:
    """Sample ``n_queries`` (a third per segment) and search each with both classifiers;
    ``differing_top``: pass over (and count) queries whose top ``differing_top`` listings are the
    same in both lists, as queries without results are."""
    from qcat.classifier import load_model
    from qcat.evaluation.evaluate import check_labels
    from qcat.evaluation.golden.inventory import build_inventory
    from qcat.evaluation.golden.query_sets import log_demand
    from qcat.evaluation.golden.search import MiniSearch, SearchConfig
    from qcat.measure.segments import segment_by_impressions
    from qcat.text.normalize import tokenize
    from qcat.training.data.corpus import Corpus

    if n_queries < len(SEGMENTS):
        raise InputError(f"--queries must be at least {len(SEGMENTS)} (one per segment), got {n_queries}")
    started = time.perf_counter()
    search_config = search_config or SearchConfig(top_n=TOP_N)
    if search_config.top_n != TOP_N:
        raise InputError(f"judges see the top {TOP_N} listings per group, got a search returning {search_config.top_n}")
    corpus = Corpus.open(corpus_dir)
    taxonomy, catalog = corpus.taxonomy(), corpus.catalog()
    models = []
    for directory in (baseline_dir, target_dir):
        model = load_model(directory)
        check_labels(model, taxonomy, Path(directory))
        models.append(model)
    demand = log_demand(corpus, period)
    if n_queries > len(demand.queries):
        progress(f"--queries {n_queries:,}: the {period} period's log holds {len(demand.queries):,} queries; "
                 f"sampling from all of them")
        n_queries = max(len(demand.queries), len(SEGMENTS))
    segment = segment_by_impressions(demand.impressions)
    progress(f"demand: {len(demand.queries):,} queries in the {period} period "
             f"({time.perf_counter() - started:.1f} s)")
    inventory = build_inventory(catalog, taxonomy, catalog.listing_id, sample_fraction=0.0, seed=seed)
    search = MiniSearch(inventory, search_config)
    paths = {c: taxonomy.path_of(c) for c in set(inventory.category.tolist())}
    catalog_row = {listing: row for row, listing in enumerate(catalog.listing_id.tolist())}
    progress(f"inventory: the full catalog, {len(inventory):,} listings ({time.perf_counter() - started:.1f} s)")

    def listing(d: int) -> Listing:
        row = catalog_row[inventory.listing_id[d]]
        return Listing(str(inventory.listing_id[d]), str(inventory.title[d]), paths[inventory.category[d]],
                       known_brand(catalog.brand[row]), known_price(catalog.price[row]))

    def listings(docs: np.ndarray) -> list[Listing]:
        return [listing(d) for d in docs if d >= 0]

    rng = np.random.default_rng(seed)
    queries: list[QuerySpec] = []
    stats = {"requested": {}, "available": {}, "sampled": {}, "no_results_skipped": {}}
    if differing_top is not None:
        stats.update(differing_top=differing_top, identical_skipped={})
    with task("searching both systems for the session's queries", n_queries) as advance:
        for s, (name, wanted) in enumerate(zip(SEGMENTS, split_evenly(n_queries))):
            members = np.nonzero(segment == s)[0]
            members = members[rng.permutation(len(members))]
            stats["requested"][name], stats["available"][name] = wanted, int(len(members))
            kept, skipped, identical, start = [], 0, 0, 0
            while len(kept) < wanted and start < len(members):
                chunk = members[start: start + min(SEARCH_BATCH, max(64, int(1.2 * (wanted - len(kept))) + 16))]
                start += len(chunk)
                texts = [str(q) for q in demand.queries[chunk]]
                token_lists = [tokenize(q) for q in texts]
                candidates = search.retrieve(token_lists)
                lists = [search.search(texts, token_lists, model, candidates).docs for model in models]
                for i, row in enumerate(chunk):
                    if len(kept) == wanted:
                        break
                    if (lists[0][i] < 0).all() and (lists[1][i] < 0).all():
                        skipped += 1
                        continue
                    spec = QuerySpec(texts[i], name, listings(lists[0][i]), listings(lists[1][i]),
                                     float(demand.impressions[row]))
                    if differing_top is not None and same_top(spec, differing_top):
                        identical += 1
                        continue
                    kept.append(spec)
                    advance()
            if len(kept) < wanted:
                progress(f"warning: the {name} segment has only {len(kept):,} queries with results "
                         f"({len(members):,} in the log), fewer than the {wanted:,} asked for")
            stats["sampled"][name], stats["no_results_skipped"][name] = len(kept), skipped
            if differing_top is not None:
                stats["identical_skipped"][name] = identical
            queries += kept
    # Judging order: segments interleaved at random, so a half-judged session covers all three.
    queries = [queries[i] for i in rng.permutation(len(queries))]
    stats.update(corpus=str(corpus.directory), period=period, search=search_config.to_json(),
                 seconds_building=round(time.perf_counter() - started, 2))
    progress(f"searched: {len(queries):,} queries ({', '.join(f'{k} {v:,}' for k, v in stats['sampled'].items())}) "
             f"in {time.perf_counter() - started:.1f} s")
    return BuiltQueries(queries, stats)


def same_top(query: QuerySpec, n: int) -> bool:
    """Whether both systems show the same top ``n`` listings in the same order (a tie by construction)."""
    return [item.listing_id for item in query.baseline[:n]] == [item.listing_id for item in query.target[:n]]


def select_imported(queries: list[QuerySpec], n_queries: int | None, seed: int = 0,
                    differing_top: int | None = None) -> BuiltQueries:
    """The queries of a session from imported result lists: those whose top ``differing_top``
    differ (when given; the others are counted per segment as ``identical_skipped``, ties the
    report counts without graders), then, when ``n_queries`` is given, a seeded sample of a third
    per segment (:func:`split_evenly`), in a seeded order that interleaves the segments."""
    rng = np.random.default_rng(seed)
    stats: dict = {"source": "imported", "requested": {}, "available": {}, "sampled": {}}
    if differing_top is not None:
        stats.update(differing_top=differing_top, identical_skipped={s: 0 for s in SEGMENTS})
    kept: list[QuerySpec] = []
    wanted = dict(zip(SEGMENTS, split_evenly(n_queries))) if n_queries is not None else {}
    for name in SEGMENTS:
        members = [q for q in queries if q.segment == name]
        if differing_top is not None:
            differing = [q for q in members if not same_top(q, differing_top)]
            stats["identical_skipped"][name] = len(members) - len(differing)
            members = differing
        stats["available"][name] = len(members)
        if name in wanted:
            stats["requested"][name] = wanted[name]
            members = [members[i] for i in sorted(rng.permutation(len(members))[:wanted[name]])]
        stats["sampled"][name] = len(members)
        kept += members
    if not kept:
        raise InputError("no query left to judge" + (f": every query shows the same top {differing_top} listings in "
                                                    "both systems" if differing_top is not None else ""))
    return BuiltQueries([kept[i] for i in rng.permutation(len(kept))], stats)


