"""Setting up a judging session (eBay §4.2.3): queries, one third each from head, torso and tail
of the latest log's demand, and for each query the top 5 listings of the same search with the
baseline classifier and with the target classifier, placed left/right at random.

- :func:`build_queries` samples the queries and runs the golden harness's search
  (:class:`qcat.evaluation.golden.search.MiniSearch` over the full catalog, the paper's "full
  inventory");
- :func:`store_session` writes a session and its result lists in one transaction (tests use it
  directly with hand-made lists). Judges get queries in the stored order, which
  :func:`build_queries` shuffles (seeded) so that segments are interleaved;
- :func:`change_members` names a session's judges (``qcat judge members``): then only they see it
  and get its queries (:func:`qcat.judging.grading.assignment.may_judge`); a session naming none
  is open to every active judge.

Queries for which neither system returns a listing have nothing to judge: they are passed
over (and counted) and the next sampled query of the segment takes their place.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
from sqlalchemy import delete, exists, func, insert, select

from qcat.errors import InputError
from qcat.judging.grading.judges import check_name, find_judge
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    SESSION_KINDS,
    Judge,
    JudgingSession,
    ResultItem,
    ResultList,
    SessionJudge,
    SessionQuery,
)
from qcat.progress import task

SEGMENTS = ("head", "torso", "tail")
TOP_N = 5
DEFAULT_QUERIES = 4500
SEARCH_BATCH = 2048  # queries searched at once: bounds the memory of a session of any size


@dataclass(frozen=True)
class Listing:
    listing_id: str
    title: str = ""
    category: str = ""
    brand: str | None = None  # None: not known
    price: float | None = None  # as in the catalog, which names no currency; None: not known
    image_url: str | None = None  # imported result lists (qcat.judging.grading.imports) only
    link: str | None = None


UNKNOWN_BRANDS = {"", "unknown"}


def known_brand(brand: object) -> str | None:
    """The catalog's brand, or None where it has none (empty, or the literal "Unknown")."""
    text = str(brand).strip() if brand is not None else ""
    return None if text.lower() in UNKNOWN_BRANDS else text


def known_price(price: object) -> float | None:
    """The catalog's price, or None where it has none (NaN, negative or not a number)."""
    try:
        value = float(price)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


@dataclass(frozen=True)
class QuerySpec:
    text: str
    segment: str
    baseline: list[Listing]
    target: list[Listing]
    impressions: float = 0.0


@dataclass
class BuiltQueries:
    queries: list[QuerySpec]
    stats: dict = field(default_factory=dict)


def split_evenly(total: int, parts: int = 3) -> list[int]:
    """``total`` as ``parts`` near-equal counts, the larger ones first (4500 -> 1500 each)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


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
    from qcat.normalize import tokenize
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


def judge_facing_name(session_id: int, display_name: str | None) -> str:
    """The session as judges see it: its display name, else "Session ID" (never its name, which
    may say which models are compared)."""
    return display_name or f"Session {session_id}"


def default_name(baseline: str, target: str | None) -> str:
    """"BASELINE vs TARGET, time"; one model (a category session of one): "categories of MODEL, time"."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    if not target:
        return f"categories of {Path(baseline).name}, {stamp}"
    return f"{Path(baseline).name} vs {Path(target).name}, {stamp}"


def check_session_name_free(store: Store, name: str, display_name: str | None = None) -> str:
    """The checked name, or an error if a session already has it or the display name (run before
    the slow work)."""
    name = check_name(name, "session name")
    with store.transaction() as session:
        _check_name_free(session, name)
        if display_name is not None:
            _check_display_name_free(session, check_name(display_name, "session display name"))
    return name


def _check_name_free(session, name: str) -> None:
    if session.scalar(select(JudgingSession.id).where(JudgingSession.name == name)) is not None:
        raise InputError(f"a judging session named {name!r} already exists: choose another --name")


def _check_display_name_free(session, display_name: str) -> None:
    if session.scalar(select(JudgingSession.id).where(JudgingSession.display_name == display_name)) is not None:
        raise InputError(f"a judging session already has the display name {display_name!r}: judges could not tell "
                         "them apart; choose another --display-name")


def store_session(store: Store, name: str, baseline_model: str, target_model: str, queries: list[QuerySpec],
                  judges_per_query: int = 3, seed: int = 0, corpus: str = "", settings: dict | None = None,
                  display_name: str | None = None, kind: str = "results") -> int:
    """Write a session with its queries and both result lists per query; returns its id.

    The baseline's side is drawn per query from ``numpy.random.default_rng(seed)`` and stored.
    ``display_name`` is what judges see (default "Session ID"). ``kind="categories"``: the lists
    are the models' top categories (:mod:`qcat.judging.grading.categories`); ``target_model`` ""
    for a session of one model, which then has no target lists."""
    name = check_name(name, "session name")
    if display_name is not None:
        display_name = check_name(display_name, "session display name")
    if judges_per_query < 1:
        raise InputError(f"judges per query must be at least 1, got {judges_per_query}")
    if kind not in SESSION_KINDS:
        raise InputError(f"unknown session kind {kind!r}; expected one of {', '.join(SESSION_KINDS)}")
    systems = ("baseline", "target") if target_model or kind == "results" else ("baseline",)
    if not queries:
        raise InputError("a judging session needs at least one query")
    texts = [q.text for q in queries]
    if len(set(texts)) != len(texts):
        raise InputError("a session lists every query once: duplicate queries given")
    for q in queries:
        if not q.text.strip():
            raise InputError("a session query is empty")
        if q.segment not in SEGMENTS:
            raise InputError(f"query {q.text!r}: unknown segment {q.segment!r}; expected one of {', '.join(SEGMENTS)}")
        for group in (q.baseline, q.target):
            if len(group) > TOP_N or len({item.listing_id for item in group}) != len(group):
                raise InputError(f"query {q.text!r}: a result list holds at most {TOP_N} distinct listings")
    baseline_left = np.random.default_rng(seed).random(len(queries)) < 0.5
    with store.transaction() as session:
        _check_name_free(session, name)
        if display_name is not None:
            _check_display_name_free(session, display_name)
        record = JudgingSession(name=name, display_name=display_name, baseline_model=str(baseline_model), target_model=str(target_model),
                                corpus=corpus, judges_per_query=judges_per_query, seed=seed,
                                settings=json.dumps(settings or {}), kind=kind)
        session.add(record)
        session.flush()
        session.execute(insert(SessionQuery), [
            {"session_id": record.id, "position": i, "text": q.text, "segment": q.segment,
             "impressions": float(q.impressions), "baseline_side": "left" if left else "right", "claims": 0}
            for i, (q, left) in enumerate(zip(queries, baseline_left))])
        query_ids = dict(session.execute(select(SessionQuery.position, SessionQuery.id)
                                         .where(SessionQuery.session_id == record.id)).all())
        list_rows = []
        for i, left in enumerate(baseline_left):
            list_rows.append({"query_id": query_ids[i], "system": "baseline", "model": str(baseline_model),
                              "side": "left" if left else "right"})
            if "target" in systems:
                list_rows.append({"query_id": query_ids[i], "system": "target", "model": str(target_model),
                                  "side": "right" if left else "left"})
        session.execute(insert(ResultList), list_rows)
        list_ids = {(q, s): i for i, q, s in session.execute(
            select(ResultList.id, ResultList.query_id, ResultList.system)
            .join(SessionQuery, SessionQuery.id == ResultList.query_id).where(SessionQuery.session_id == record.id))}
        items = [{"list_id": list_ids[(query_ids[i], system)], "position": rank, "listing_id": item.listing_id,
                  "title": item.title, "category": item.category, "brand": known_brand(item.brand),
                  "price": known_price(item.price), "image_url": item.image_url, "link": item.link}
                 for i, q in enumerate(queries) for system, group in (("baseline", q.baseline), ("target", q.target))
                 for rank, item in enumerate(group, start=1)]
        if items:
            session.execute(insert(ResultItem), items)
        return record.id


def find_session(session, key: str | int) -> JudgingSession:
    """A session by id or by name; :class:`InputError` when none matches."""
    text = str(key).strip()
    record = None
    if text.isdigit():
        record = session.get(JudgingSession, int(text))
    if record is None:
        record = session.scalar(select(JudgingSession).where(JudgingSession.name == text))
    if record is None:
        raise InputError(f"judging session {text!r} does not exist (`qcat judge sessions` lists them)")
    return record


def change_members(store: Store, key: str | int, add: list[str] = (), remove: list[str] = ()) -> tuple[str, list[str]]:
    """Add and remove judges (by name) of a session; returns its name and its judges afterwards."""
    with store.transaction() as session:
        record = find_session(session, key)
        for name in add:
            judge = find_judge(session, name)
            if not session.scalar(select(exists().where(SessionJudge.session_id == record.id,
                                                        SessionJudge.judge_id == judge.id))):
                session.add(SessionJudge(session_id=record.id, judge_id=judge.id))
        for name in remove:
            judge = find_judge(session, name)
            session.execute(delete(SessionJudge).where(SessionJudge.session_id == record.id,
                                                       SessionJudge.judge_id == judge.id))
        session.flush()
        names = list(session.scalars(select(Judge.name).join(SessionJudge, SessionJudge.judge_id == Judge.id)
                                     .where(SessionJudge.session_id == record.id).order_by(Judge.name)))
        return record.name, names


def find_query(session, key: str | int, session_id: int | None = None) -> SessionQuery:
    """A session query by id, else by its (normalized) text, in one session or in the only session
    that has it; :class:`InputError` when none or several match."""
    text = str(key).strip()
    in_session = [SessionQuery.session_id == session_id] if session_id is not None else []
    if text.isdigit():
        query = session.scalar(select(SessionQuery).where(SessionQuery.id == int(text), *in_session))
        if query is not None:
            return query
    matches = session.scalars(select(SessionQuery).where(SessionQuery.text == text, *in_session)).all()
    if len(matches) > 1:
        raise InputError(f"query {text!r} is in {len(matches)} sessions: say which with --session")
    if not matches:
        raise InputError(f"no query {text!r}{' in that session' if session_id is not None else ''}: give its id "
                         "(report.json, `qcat judge export --csv`) or its text as stored (normalized)")
    return matches[0]


def session_overview(store: Store) -> list[dict]:
    """Every session with its query count and how many queries have all their judges (gold
    questions counted apart, as ``gold``)."""
    from qcat.judging.store.models import Assignment

    with store.sessions() as session:
        records = session.scalars(select(JudgingSession).order_by(JudgingSession.id)).all()
        out = []
        for record in records:
            sizes = dict(session.execute(select(SessionQuery.gold, func.count())
                                         .where(SessionQuery.session_id == record.id).group_by(SessionQuery.gold)).all())
            n, gold = sizes.get(False, 0), sizes.get(True, 0)
            done = session.scalar(
                select(func.count()).select_from(
                    select(Assignment.query_id).join(SessionQuery, SessionQuery.id == Assignment.query_id)
                    .where(Assignment.session_id == record.id, Assignment.status == "done", ~SessionQuery.gold)
                    .group_by(Assignment.query_id).having(func.count() >= record.judges_per_query).subquery()))
            out.append({"id": record.id, "name": record.name,
                        "display_name": judge_facing_name(record.id, record.display_name), "baseline": record.baseline_model,
                        "target": record.target_model, "kind": record.kind, "queries": n, "gold": gold, "complete": done,
                        "judges_per_query": record.judges_per_query, "created": record.created_at})
        return out
