"""Category sessions (issue 39): judges grade the categories one or two classifiers propose for a
query, so that a team learns how often the top category is acceptable to a person.

A session stores, per query, each model's top-k categories as that model's result list
(``result_items.listing_id`` the category id, ``title`` and ``category`` its full path;
:func:`qcat.judging.grading.sessions.store_session` writes them). The judge sees one list, the
*union* of the models' categories, in an order drawn for that judge and query
(:func:`qcat.judging.grading.assignment.shown_order`), and never which model proposed which: the grade of a category proposed by
both counts for both. Grades: 3 exact, 2 acceptable, 1 related, 0 wrong
(:data:`qcat.judging.store.models.CATEGORY_GRADE_NAMES`).

The queries come from a file of sampled traffic (:func:`read_traffic`: a query per line, a repeated
line one more impression, or a table with a ``query`` column and ``impressions`` or ``segment``) or
from a corpus's click log, a third each from head, torso and tail by impressions
(:func:`build_category_queries`). Queries for which no model answers a category are passed over
and counted. With ``precision`` (``--precision P``), each model's node answer at P joins its
categories (:mod:`qcat.judging.grading.nodes`).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from qcat.console.progress import task
from qcat.errors import InputError, shown
from qcat.inputs import COMMENTS_NONE, Column, FileSchema
from qcat.judging.grading.nodes import node_answers, node_classifiers, node_stats, say_nodes, with_node
from qcat.judging.grading.selection.exclusions import NeverAsk, say_left_out
from qcat.judging.grading.selection.rank import rank, selection_record
from qcat.judging.grading.selection.wording import CANDIDATES, say_selection, say_short_segment
from qcat.judging.grading.sessions import SEGMENTS, BuiltQueries, Listing, QuerySpec, split_evenly

DEFAULT_TOP_K = 3
MAX_TOP_K = 5  # the panel shows at most 2 x 5 categories a query


TRAFFIC_TABLE = FileSchema(
    kind="traffic", flag="--traffic", delimiter=",", delimiters={".tsv": "\t"}, comments=COMMENTS_NONE,
    columns=(Column("query", "query", True, "a query as searched"),
             Column("impressions", "number", False, "its searches in the sample (over 0)", 0),
             Column("segment", "choice", False, "head, torso or tail", choices=SEGMENTS)))
TRAFFIC_LINES = FileSchema(kind="traffic", flag="--traffic", delimiter=None, header="none", comments=COMMENTS_NONE,
                           columns=(Column("query", "query", True, "a query as searched; a repeated line is one "
                                                                   "more impression"),))


def read_traffic(path: Path, default_segment: str | None = None,
                 note: Callable[[str], None] = lambda message: None) -> list[tuple[str, float, str | None]]:
    """``(query as first written, impressions, segment or None)`` per distinct normalized query of a
    traffic file: judges see a query as it was searched (``Basmati rice & dal``), and every form that
    normalizes alike (``TV``, ``tv``) adds to its impressions.

    A ``.csv``/``.tsv`` file is a table (:data:`TRAFFIC_TABLE`: a ``query`` column, optionally
    ``impressions`` and ``segment``); any other file is one query per line, each line one impression
    (:data:`TRAFFIC_LINES`; a line starting with ``#`` is a query). Read through the input layer
    (:mod:`qcat.inputs`); errors name the file and line, and queries written several ways (``TV``,
    `` tv``) are one query, the merge said through ``note``."""
    from qcat.inputs import data_suffix, read_table

    schema = TRAFFIC_TABLE if data_suffix(Path(path)) in (".csv", ".tsv") else TRAFFIC_LINES
    table = read_table(path, schema, "--traffic")
    impressions: Counter = Counter()
    segments: dict[str, str] = {}
    for row in table.rows:
        query = row.query.normalized
        count = 1.0 if row.values.get("impressions") is None else float(row["impressions"])
        if count <= 0:
            raise InputError(f"{table.where(row.line)}: impressions {count:g} is not a positive number")
        impressions[query] += count
        segment = row.values.get("segment")
        if segment is not None and segments.setdefault(query, str(segment)) != segment:
            raise InputError(f"{table.where(row.line)}: query {shown(row.query.text)} is {segment} here and "
                             f"{segments[query]} above")
    repeated = len(table.rows) - len(impressions)
    if repeated:
        merged = table.merged
        note(f"--traffic {table.path}: {len(table.rows):,} rows, {len(impressions):,} distinct queries once normalized"
             + (f" ({len(merged):,} written several ways, e.g. {' / '.join(map(shown, next(iter(merged.values()))[:3]))})"
                if merged else ""))
    if segments and len(segments) < len(impressions):
        missing = next(q for q in impressions if q not in segments)
        raise InputError(f"--traffic {path}: query {shown(missing)} has no segment while others have one: give every "
                         "query a segment, or none (then segments come from impressions)")
    return [(table.forms[query][0], float(count), segments.get(query, default_segment))
            for query, count in impressions.items()]


def _segments(traffic: list[tuple[str, float, str | None]], path: Path) -> np.ndarray:
    """Segment index per query: the file's, else by impressions (head/torso/tail shares of demand).
    Impressions that are all the same cannot rank queries into segments: refused, saying what to give."""
    from qcat.measure.segments import segment_by_impressions

    if all(segment is not None for _, _, segment in traffic):
        return np.array([SEGMENTS.index(segment) for _, _, segment in traffic], dtype=np.int64)
    counts = np.array([count for _, count, _ in traffic], dtype=np.float64)
    if len(traffic) > 1 and np.all(counts == counts[0]):
        raise InputError(f"--traffic {path}: every query has the same impressions ({counts[0]:g}), so head, torso and "
                         "tail cannot come from them: repeat a query once per search (or give an impressions or "
                         "segment column), or put every query in one segment with --default-segment")
    return segment_by_impressions(counts).astype(np.int64)


def build_category_queries(model_dirs: Sequence[Path], top_k: int = DEFAULT_TOP_K, n_queries: int | None = None,
                           corpus_dir=None, period: str = "base", seed: int = 0,
                           traffic: Path | None = None, default_segment: str | None = None,
                           progress: Callable[[str], None] = lambda message: None,
                           include_training: bool = False, select: str | None = None,
                           never: NeverAsk | None = None, precision: float | None = None) -> BuiltQueries:
    """The session's queries (a third per segment when ``n_queries`` is given; every traffic query
    otherwise) and each model's top ``top_k`` categories (:func:`qcat.measure.judged.top_k_categories`,
    the answers ``qcat evaluate --gold`` takes too). ``corpus_dir``: a corpus directory (None: the
    demo corpus) or an opened corpus, such as a user's click log
    (:class:`qcat.training.data.corpus.LogCorpus`), whose log the queries are drawn from.

    Queries drawn from a log leave out every query a model trained or was tuned on (its bundle's
    fingerprints, :mod:`qcat.training.data.provenance`) unless ``include_training``; a traffic file
    is taken as given. Either way ``stats["seen_in_training"]`` records, per model, which of the
    session's queries it saw in training (None: its bundle records none), for the report.

    ``select`` (:mod:`qcat.judging.grading.selection`): None, a seeded sample as always; with a
    budget ``n_queries``, ``random`` a seeded sample and ``uncertain`` or ``disagree`` the first of
    each segment's ranking, the budget split over the segments the pool holds. ``never``: queries never to ask (already judged), left out of the pool and counted;
    ``stats["selection"]`` records how the sample was made, for the report.

    ``precision``: each model's node answer at that precision joins its list (after its top
    categories, or marking the one it is; :mod:`qcat.judging.grading.nodes`), and
    ``stats["nodes"]`` records how many queries got one; a model without a node calibration is refused."""
    from qcat.classifier import load_model
    from qcat.evaluation.evaluate import check_labels, taxonomy_with_other_leaves
    from qcat.evaluation.golden.query_sets import log_demand
    from qcat.measure.judged import top_k_categories
    from qcat.measure.segments import segment_by_impressions
    from qcat.training.data.corpus import Corpus, LogCorpus
    from qcat.training.data.provenance import read_seen_fingerprints, seen_mask

    if not 1 <= top_k <= MAX_TOP_K:
        raise InputError(f"--top-k must lie in 1..{MAX_TOP_K} (judges see at most {MAX_TOP_K} categories a model), "
                         f"got {top_k}")
    if not 1 <= len(model_dirs) <= 2:
        raise InputError(f"a category session judges one or two models, got {len(model_dirs)} --model")
    started = time.perf_counter()
    classifiers = node_classifiers(model_dirs) if precision is not None else None
    models = [c.model for c in classifiers] if classifiers else [load_model(directory) for directory in model_dirs]
    # A traffic file needs no corpus: the first model's taxonomy names the categories.
    corpus = (corpus_dir if isinstance(corpus_dir, LogCorpus) else Corpus.open(corpus_dir)
              if traffic is None or corpus_dir is not None else None)
    # As qcat evaluate builds it: the Other leaves that the internal-node rule adds are categories.
    taxonomy = taxonomy_with_other_leaves(corpus.taxonomy(), models) if corpus is not None else models[0].taxonomy
    which = (f"the taxonomy of --log {corpus.log}" if isinstance(corpus, LogCorpus) else "the corpus taxonomy"
             if corpus is not None else f"the first model's taxonomy ({model_dirs[0]})")
    for directory, model in zip(model_dirs, models):
        check_labels(model, taxonomy, Path(directory), which)
    seen = [read_seen_fingerprints(directory) for directory in model_dirs]
    if traffic is not None:
        rows = read_traffic(traffic, default_segment, progress)
        texts = np.array([query for query, _, _ in rows], dtype=object)
        counts = np.array([count for _, count, _ in rows], dtype=np.float64)
        segment = _segments(rows, traffic)
        source = {"traffic": str(traffic), "traffic_queries": len(rows)}
    else:
        demand = log_demand(corpus, period)
        texts, counts = np.asarray(demand.queries, dtype=object), np.asarray(demand.impressions, dtype=np.float64)
        segment = segment_by_impressions(counts).astype(np.int64)
        source = ({"log": str(corpus.log), "taxonomy_file": str(corpus.taxonomy_path)} if isinstance(corpus, LogCorpus)
                  else {"corpus": str(corpus.directory), "period": period})
    progress(f"{len(texts):,} queries to sample from ({time.perf_counter() - started:.1f} s)")
    trained = np.zeros(len(texts), dtype=bool)  # queries left out: a model trained on them
    if traffic is None and not include_training:
        for directory, fingerprints in zip(model_dirs, seen):
            if fingerprints is None:
                progress(f"warning: {directory} records no training queries, so the queries it trained on cannot "
                         "be left out")
            else:
                trained |= seen_mask([str(q) for q in texts], fingerprints)
    left_out, left_counts = never.mask(texts) if never is not None else (np.zeros(len(texts), dtype=bool), {})
    if left_counts:
        progress(say_left_out(left_counts))
    # --select (random too) splits the budget over the segments the pool holds; without it, a third each as always
    ranking = (rank(select, texts, counts, segment, models, n_queries, seed, trained | left_out)
               if select is not None and n_queries is not None else None)
    rng = np.random.default_rng(seed)
    wanted = (ranking.wanted if ranking is not None else
              dict(zip(SEGMENTS, split_evenly(n_queries))) if n_queries is not None else {})
    stats: dict = {"kind": "categories", "top_k": top_k, "models": [str(d) for d in model_dirs], **source,
                   "requested": {}, "available": {}, "sampled": {}, "no_answer_skipped": {},
                   "training_queries": "included" if traffic is not None or include_training else "left out",
                   "training_left_out": {}}
    queries: list[QuerySpec] = []
    total = sum(wanted.values()) if wanted else len(texts)
    whose = "both models'" if len(models) == 2 else "the model's"
    with task(f"taking {whose} top categories for the session's queries", total) as advance:
        for s, name in enumerate(SEGMENTS):
            members = np.nonzero(segment == s)[0]
            held, never_n = len(members), int((left_out[members] & ~trained[members]).sum())
            stats["training_left_out"][name] = int(trained[members].sum())
            members = members[~trained[members] & ~left_out[members]]
            if ranking is not None:
                members = ranking.order[name]
            elif wanted:
                members = members[rng.permutation(len(members))]
            want = wanted.get(name, len(members))
            stats["available"][name], stats["requested"][name] = int(len(members)), want
            kept: list[QuerySpec] = []
            skipped, start = 0, 0
            while len(kept) < want and start < len(members):
                chunk = members[start: start + max(64, 2 * (want - len(kept)))]
                start += len(chunk)
                chunk_texts = [str(q) for q in texts[chunk]]
                answers = [top_k_categories(model, chunk_texts, top_k) for model in models]
                nodes = [node_answers(c, chunk_texts, precision) for c in classifiers] if classifiers else None
                for i, row in enumerate(chunk):
                    if len(kept) == want:
                        break
                    lists = [[Listing(c, taxonomy.path_of(c), taxonomy.path_of(c)) for c in a[i]] for a in answers]
                    if not any(lists):
                        skipped += 1
                        continue
                    if nodes is not None:
                        lists = [with_node(group, answered[i], taxonomy, c.taxonomy)
                                 for group, answered, c in zip(lists, nodes, classifiers)]
                    kept.append(QuerySpec(chunk_texts[i], name, lists[0], lists[1] if len(lists) > 1 else [],
                                          float(counts[row])))
                    advance()
            if len(kept) < want and wanted:
                chosen = (select, len(members)) if ranking is not None and select in CANDIDATES else None
                progress(say_short_segment(name, held, stats["training_left_out"][name], never_n, chosen, skipped,
                                           len(kept), want))
            stats["sampled"][name], stats["no_answer_skipped"][name] = len(kept), skipped
            queries += kept
    if not queries and not sum(stats["available"].values()):
        raise InputError("no query left to judge: every query of the pool is left out"
                         + (f" ({say_left_out(left_counts)})" if left_counts else "")
                         + (" or has no disagreement" if select == "disagree" else ""))
    if not queries:
        raise InputError("no query left to judge: the models answer no category for any of the queries")
    queries = [queries[i] for i in rng.permutation(len(queries))]
    stats["selection"] = selection_record(select, n_queries, seed, len(texts), left_counts, model_dirs, models)
    if stats["selection"].get("scores") == "raw":
        progress(f"warning: {model_dirs[0]} has no calibration: --select uncertain ranked its raw scores")
    if ranking is not None:
        stats["selection"]["candidates"] = dict(stats["available"])
    if select in ("uncertain", "disagree"):
        progress(say_selection(stats["selection"], len(queries)))
    if precision is not None:
        stats["nodes"] = node_stats(queries, precision, model_dirs)
        say_nodes(stats["nodes"], progress)
    stats["seen_in_training"] = seen_in_training([q.text for q in queries], seen)
    say_training(stats, model_dirs, progress)
    stats["seconds_building"] = round(time.perf_counter() - started, 2)
    progress(f"{len(queries):,} queries ({', '.join(f'{k} {v:,}' for k, v in stats['sampled'].items())}) with "
             f"{whose} top {top_k} in {time.perf_counter() - started:.1f} s")
    return BuiltQueries(queries, stats)


def seen_in_training(texts: list[str], seen: list) -> list[dict]:
    """Per model, which of the session's queries it saw in training: ``{"queries", "seen",
    "seen_queries"}`` (``seen`` None when its bundle records no fingerprints)."""
    from qcat.training.data.provenance import seen_mask

    out = []
    for fingerprints in seen:
        mask = seen_mask(texts, fingerprints)
        out.append({"queries": len(texts), "seen": None, "seen_queries": []} if mask is None else
                   {"queries": len(texts), "seen": int(mask.sum()),
                    "seen_queries": [t for t, hit in zip(texts, mask) if hit]})
    return out


def say_training(stats: dict, model_dirs: Sequence[Path], progress: Callable[[str], None]) -> None:
    """Say which training queries were left out of the sample, and how many of the session's
    queries each model saw in training."""
    left_out = stats["training_left_out"]
    if stats["training_queries"] == "left out":
        progress(f"left out {sum(left_out.values()):,} queries that a model trained on ("
                 + ", ".join(f"{name} {n:,}" for name, n in left_out.items())
                 + "): the session holds none of them (--include-training-queries keeps them)")
    for directory, entry in zip(model_dirs, stats["seen_in_training"]):
        seen = "unknown (its bundle records no training queries)" if entry["seen"] is None else f"{entry['seen']:,}"
        progress(f"{directory}: {seen} of the session's {entry['queries']:,} queries seen in training")

