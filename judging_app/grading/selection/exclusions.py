"""The queries a session with ``--select`` never asks again: those already judged in the store (a
judgment in any session, or a gold question with known grades) and those a graded gold file lists
(``--exclude-gold FILE``, repeatable). Matched on the normalized query
(:func:`qcat.text.normalize.normalize`): ``TV`` judged once is ``tv`` too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlalchemy import exists, or_, select

from qcat.judging.store.models import Judgment, SessionQuery
from qcat.text.normalize import normalize

JUDGED = "judged in the store"


@dataclass(frozen=True)
class NeverAsk:
    """Normalized queries never to ask, by reason: :data:`JUDGED`, then each ``--exclude-gold`` file."""

    reasons: dict[str, frozenset[str]] = field(default_factory=dict)

    def mask(self, texts: Sequence[str]) -> tuple[np.ndarray, dict[str, int]]:
        """Which of ``texts`` to leave out, and how many for each reason (a query left out for an
        earlier reason is not counted again under a later one)."""
        normalized = [normalize(str(t)) for t in texts]
        out = np.zeros(len(normalized), dtype=bool)
        counts: dict[str, int] = {}
        for reason, queries in self.reasons.items():
            hit = np.fromiter((q in queries for q in normalized), dtype=bool, count=len(normalized))
            counts[reason] = int((hit & ~out).sum())
            out |= hit
        return out, counts


def judged_queries(store) -> frozenset[str]:
    """Every query (normalized) of the store's sessions that has a judgment, or is a gold question."""
    judged = exists().where(Judgment.query_id == SessionQuery.id)
    with store.sessions() as session:
        texts = session.scalars(select(SessionQuery.text).where(or_(SessionQuery.gold, judged)).distinct()).all()
    return frozenset(normalize(t) for t in texts)


def never_ask(store, gold_files: Sequence[Path] = (), judged: bool = True) -> NeverAsk:
    """The store's judged queries (when ``judged``) and each ``--exclude-gold`` file's queries, read
    through the input layer (:func:`qcat.measure.graded_gold.read_graded_gold`)."""
    from qcat.measure.graded_gold import read_graded_gold

    reasons: dict[str, frozenset[str]] = {}
    if judged:
        reasons[JUDGED] = judged_queries(store)
    for path in gold_files:
        gold = read_graded_gold(path, flag="--exclude-gold")
        reasons[f"listed in --exclude-gold {path}"] = frozenset(gold.queries)
    return NeverAsk(reasons)


def say_left_out(counts: dict[str, int]) -> str:
    """``left out 12 queries judged in the store, 3 listed in --exclude-gold gold.tsv``."""
    return "left out " + ", ".join(f"{n:,} quer{'y' if n == 1 else 'ies'} {reason}" for reason, n in counts.items()) \
        + ": never asked again"
