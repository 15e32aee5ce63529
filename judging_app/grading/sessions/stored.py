"""Sessions in the store: names, writing a session and its result lists in one transaction
(:func:`store_session`), finding a session or a query, members, and the overview."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from sqlalchemy import delete, exists, func, insert, select

from qcat.errors import InputError
from qcat.judging.grading.judges import check_name, find_judge
from qcat.judging.grading.sessions.specs import SEGMENTS, TOP_N, QuerySpec, known_brand, known_price
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    ANSWERS,
    NODE_ANSWERS,
    SESSION_KINDS,
    TOP_ANSWERS,
    Judge,
    JudgingSession,
    ResultItem,
    ResultList,
    SessionJudge,
    SessionQuery,
)


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
            tops = [item.answer in TOP_ANSWERS for item in group]
            if sum(tops) > TOP_N or len({item.listing_id for item in group}) != len(group):
                raise InputError(f"query {q.text!r}: a result list holds at most {TOP_N} distinct listings")
            if (any(item.answer not in ANSWERS for item in group) or sum(i.answer in NODE_ANSWERS for i in group) > 1
                    or tops != sorted(tops, reverse=True) or (kind != "categories" and not all(tops))):
                raise InputError(f"query {q.text!r}: a list holds its top listings, then at most one node answer, "
                                 f"which a category session only has (answers: {', '.join(ANSWERS)})")
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
                  "price": known_price(item.price), "image_url": item.image_url, "link": item.link,
                  "answer": item.answer}
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
