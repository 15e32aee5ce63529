"""What a judge sees of one query: the groups of listings of a result session, or the one group
of categories of a category session (the union of the models' top categories, each once, in an
order drawn per judge), never which system proposed what. :func:`screen` reads it from the store;
the grading panel draws it (:mod:`qcat.judging.grading.desk`) and a submission is checked against
it (:mod:`qcat.judging.grading.judgments`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select

from qcat.errors import InputError
from qcat.judging.store.models import JudgingSession, ResultItem, ResultList, SessionQuery


@dataclass(frozen=True)
class Shown:
    """One listing as the judge sees it."""

    listing_id: str
    position: int
    title: str
    category: str
    brand: str | None = None
    price: float | None = None
    image_url: str | None = None
    link: str | None = None


@dataclass(frozen=True)
class QueryScreen:
    """What a judge sees for one query: the left and right groups, never which system is which."""

    query_id: int
    text: str
    left: list[Shown]
    right: list[Shown]
    kind: str = "results"  # categories: one group of categories, on the left

    def expected(self) -> set[tuple[str, str]]:
        """Every (listing, side) that gets a grade (a listing in both groups on both sides)."""
        return {(item.listing_id, side) for side, group in (("left", self.left), ("right", self.right)) for item in group}

    def shared(self) -> set[str]:
        """The listings shown in both groups: the judge grades each once, for both sides."""
        return {item.listing_id for item in self.left} & {item.listing_id for item in self.right}


def shown_order(categories: Sequence, seed: int, query_id: int, judge_id: int | None) -> list:
    """The categories of a query in the order one judge sees them: a permutation drawn from
    (session seed, query, judge), the same each time that judge sees the query. Without a judge
    (checking a submission) the stored order."""
    if judge_id is None:
        return list(categories)
    order = np.random.default_rng([seed, query_id, judge_id]).permutation(len(categories))
    return [categories[i] for i in order]


def screen(session, query_id: int, judge_id: int | None = None) -> QueryScreen:
    """What a judge sees of a query. A category session shows one group, on the left: the union of
    the models' categories (a category in both lists once), in ``judge_id``'s own order
    (:func:`shown_order`), numbered as shown."""
    query = session.get(SessionQuery, query_id)
    if query is None:
        raise InputError(f"query {query_id!r} does not exist")
    groups: dict[str, list[Shown]] = {"left": [], "right": []}
    rows = session.execute(
        select(ResultList.side, ResultItem.listing_id, ResultItem.position, ResultItem.title, ResultItem.category,
               ResultItem.brand, ResultItem.price, ResultItem.image_url, ResultItem.link)
        .join(ResultItem, ResultItem.list_id == ResultList.id)
        .where(ResultList.query_id == query_id).order_by(ResultList.system, ResultItem.position)).all()
    record = session.get(JudgingSession, query.session_id)
    if record.kind == "categories":
        union: dict[str, tuple[str, str, str]] = {}  # each category once (rows: the baseline's list first)
        for _, listing_id, _, title, category, *_ in rows:
            union.setdefault(listing_id, (listing_id, title, category))
        shown = shown_order(list(union.values()), record.seed, query.id, judge_id)
        return QueryScreen(query.id, query.text, [Shown(c, i, title, category) for i, (c, title, category)
                                                  in enumerate(shown, start=1)], [], "categories")
    for side, *shown in sorted(rows, key=lambda row: (row[0], row[2])):
        groups[side].append(Shown(*shown))
    return QueryScreen(query.id, query.text, groups["left"], groups["right"])
