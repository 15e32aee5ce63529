"""``qcat data audit --gold FILE``: the confusable map against people's grades (issue 39).

Per query of a graded gold (:mod:`qcat.measure.graded_gold`), its **reference** categories are
those graded 3 (exact); a query with none graded 3 takes its best grade of 2 or more instead,
that is its categories graded 2 (all of them: their grades tie, and no one of them is a better
reference than another). Then:

- a **human-acceptable disagreement** is a reference category and another category graded 3 or 2
  (exact or acceptable) for the same query: an answer people accept that differs from the
  reference. So every two categories graded exact make one (where the map is right most often), and
  on a query without an exact category every two of its acceptable categories do. The map
  **explains** it when it pairs the two categories;
- a map pair is **rejected** on a query when one of its categories is a reference and the other is
  graded 0 (wrong) or 1 (related): people refuse the answer the map would credit.

Pairs are unordered and counted once per query; a query without a category graded 2 or more has
no reference and counts for neither.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from qcat.measure.judged import ACCEPTABLE, EXACT, RELATED


def references(grades: Mapping[str, int]) -> set[str]:
    """A query's reference categories: those graded exact, else those graded acceptable."""
    exact = {c for c, g in grades.items() if g == EXACT}
    return exact or {c for c, g in grades.items() if g == ACCEPTABLE}


def gold_agreement(pairs: Iterable[tuple[str, str]], gold: Mapping[str, Mapping[str, int]],
                   examples: int = 5, name: Callable[[str], str] = str) -> dict:
    """Count the map's ``pairs`` against ``gold`` ({query: {category: grade}}; see the module
    docstring): the human-acceptable disagreements (``disagreements``, on ``disagreement_queries``
    queries, ``distinct_disagreements`` leaf pairs), how many the map explains (``explained``,
    ``explained_share``, ``explained_distinct``), the map's pairs rejected (``rejected`` on
    ``rejected_queries`` queries, ``rejected_pairs`` distinct map pairs) and, of the map's pairs,
    how many both categories of which are graded for some query (``map_pairs_graded``); with up to
    ``examples`` (query, category, category) of each kind, each category as ``name`` gives it (its
    path, from the command)."""
    in_map = {frozenset(p) for p in pairs if p[0] != p[1]}
    found: list[tuple[str, frozenset]] = []
    rejected: list[tuple[str, frozenset]] = []
    graded_pairs: set[frozenset] = set()
    for query, grades in gold.items():
        graded_pairs |= {p for p in in_map if p <= grades.keys()}
        reference = references(grades)
        if not reference:
            continue
        others = reference | {c for c, g in grades.items() if g == ACCEPTABLE}  # two exact ones disagree too
        disagreeing = {frozenset((r, c)) for r in reference for c in others if c != r}
        found += [(query, p) for p in sorted(disagreeing, key=sorted)]
        wrong = {c for c, g in grades.items() if g <= RELATED}
        refused = {frozenset((r, c)) for r in reference for c in wrong} & in_map
        rejected += [(query, p) for p in sorted(refused, key=sorted)]
    explained = [(q, p) for q, p in found if p in in_map]
    missed = [(q, p) for q, p in found if p not in in_map]

    def shown(items: list[tuple[str, frozenset]]) -> list[list[str]]:
        return [[query, *(name(c) for c in sorted(p))] for query, p in items[:examples]]

    return {
        "queries": len(gold), "map_pairs": len(in_map), "map_pairs_graded": len(graded_pairs),
        "disagreements": len(found), "disagreement_queries": len({q for q, _ in found}),
        "distinct_disagreements": len({p for _, p in found}),
        "explained": len(explained), "explained_share": len(explained) / len(found) if found else None,
        "explained_distinct": len({p for _, p in explained}),
        "rejected": len(rejected), "rejected_queries": len({q for q, _ in rejected}),
        "rejected_pairs": len({p for _, p in rejected}),
        "examples": {"explained": shown(explained), "not_explained": shown(missed), "rejected": shown(rejected)},
    }


def agreement_line(found: dict, source: str) -> str:
    """The summary line ``qcat data audit --gold`` prints."""
    share = "–" if found["explained_share"] is None else f"{found['explained_share']:.1%}"
    return (f"against {source} ({found['queries']:,} queries): {found['disagreements']:,} human-acceptable "
            f"disagreements (two exact, or exact vs acceptable) on {found['disagreement_queries']:,} queries; the map "
            f"explains {found['explained']:,} ({share}); people rejected {found['rejected_pairs']:,} of its "
            f"{found['map_pairs']:,} pairs ({plural(found['rejected'], 'time')} on "
            f"{plural(found['rejected_queries'], 'query', 'queries')})")


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"
