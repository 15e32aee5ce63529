"""Judged queries as training data (issue 47, ``qcat train ... --judged FILE``).

A graded gold file (``qcat judge export --gold``) grades (query, category) pairs 3 Exact,
2 Acceptable, 1 Related or 0 Wrong. Several files are read through the input layer
(:func:`qcat.measure.graded_gold.read_graded_gold`, errors naming ``--judged FILE:LINE``), their
categories resolved against the training taxonomy (a category it lacks, or a node that is not a
leaf, is refused with its file and line), and merged: a pair two files grade differently is
refused naming both lines.

What the pairs become (:func:`with_judged`):

- Exact: a training pair of ``weight`` clicks; Acceptable: of ``weight`` x
  :data:`ACCEPTABLE_SHARE` clicks (added to the click log's own clicks of the pair, if any;
  a query new to the data counts at least :data:`qcat.training.data.dataset.MIN_SEARCHES`
  searches, so at weight 10 an exact pair is as relevant to XReg as a category every search clicks).
- Wrong (only with ``negatives=True``, XReg): the pair is taken out of the training table, clicks
  and all: its relevance is 0 and the category is no positive of the query; the query keeps its
  other categories and its searches (the other pairs' relevance is unchanged).
- Related: neither.

Every judged query (whatever its grades) trains: one the data's validation or test split held moves
to train (counted), and :func:`without_judged` takes them out of every validation set choices are
made on (the real-text sets too), so no choice is made on a query trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from qcat.errors import InputError, shown
from qcat.measure.graded_gold import read_graded_gold
from qcat.taxonomy import Taxonomy
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.data.dataset import SPLITS, Dataset, merge_pairs, subset_queries

EXACT, ACCEPTABLE, WRONG = 3, 2, 0
ACCEPTABLE_SHARE = 0.5  # an acceptable pair counts half the clicks of an exact one
# --judged-weight's bounds (issue 53 item 1): an exact pair's pseudo-clicks (an acceptable pair's half, added to
# the log's own clicks) held exactly by a float32 click table (whole numbers up to 2**24 = 16,777,216) and far
# from its overflow (1e39 overflowed it); at the bottom an acceptable pair still counts 0.005 clicks.
MIN_JUDGED_WEIGHT, MAX_JUDGED_WEIGHT = 0.01, 1_000_000.0
FLAG = "--judged"


@dataclass(frozen=True)
class JudgedFile:
    """One ``--judged`` file, as the manifest records it: by name and sha256 (never the trainer's
    directories, :func:`qcat.training.data.provenance.named_file`)."""

    path: str  # as given, for messages; not recorded
    sha256: str
    queries: int
    pairs: int  # exact and acceptable
    negatives: int  # wrong

    def as_dict(self) -> dict:
        from qcat.training.data.provenance import named_file

        return named_file(self.path, self.sha256) | {"queries": self.queries, "pairs": self.pairs,
                                                     "negatives": self.negatives}


@dataclass(frozen=True)
class Judged:
    """The judged files merged: normalized query -> leaf id -> grade."""

    grades: dict[str, dict[str, int]]
    files: tuple[JudgedFile, ...]
    notes: tuple[str, ...] = ()  # merges, repeated rows and files given twice: said once (issue 53 item 6)

    @property
    def queries(self) -> frozenset[str]:
        return frozenset(self.grades)

    def positive_pairs(self, weight: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(queries, categories, clicks) of every exact and acceptable pair at ``weight``."""
        rows = [(q, c, weight if g == EXACT else weight * ACCEPTABLE_SHARE)
                for q, grades in self.grades.items() for c, g in grades.items() if g >= ACCEPTABLE]
        queries, categories, clicks = zip(*rows) if rows else ((), (), ())
        return (np.asarray(queries, dtype=object), np.asarray(categories, dtype=object),
                np.asarray(clicks, dtype=np.float64))

    def negatives(self) -> frozenset[tuple[str, str]]:
        """The (query, category) pairs graded wrong."""
        return frozenset((q, c) for q, grades in self.grades.items() for c, g in grades.items() if g == WRONG)

    def exact(self) -> dict[str, list[str]]:
        """Normalized query -> its exact categories (in file order), for queries that have one."""
        out = {q: [c for c, g in grades.items() if g == EXACT] for q, grades in self.grades.items()}
        return {q: cats for q, cats in out.items() if cats}

    def describe(self) -> str:
        graded = [g for grades in self.grades.values() for g in grades.values()]  # merged: a pair counted once
        pairs, negatives = sum(g >= ACCEPTABLE for g in graded), sum(g == WRONG for g in graded)
        return (f"judged: {len(self.grades):,} queries from {len(self.files)} file(s) ({pairs:,} exact or acceptable "
                f"pairs, {negatives:,} graded wrong)")


def read_judged(paths: list[Path], taxonomy: Taxonomy) -> Judged:
    """The graded gold files ``paths`` checked against ``taxonomy`` and merged (module docstring)."""
    grades: dict[str, dict[str, int]] = {}
    where: dict[tuple[str, str], str] = {}
    files, notes, read, said = [], [], {}, set()
    forms: dict[str, list[str]] = {}  # normalized query -> its written forms across the files
    for path in paths:
        gold = read_graded_gold(path, flag=FLAG, say=None)
        if gold.sha256 in read:
            notes.append(f"{FLAG} {path} is the same file as {FLAG} {read[gold.sha256]} (sha256 {gold.sha256[:12]}…): "
                         "read, counted and recorded once")
            continue
        read[gold.sha256] = path
        notes += gold.notes()
        said.update(gold.merged)
        for query, written in gold.forms.items():
            ours = forms.setdefault(query, [])
            ours += [form for form in written if form not in ours]
        gold = gold.check_against(taxonomy, "the training taxonomy")
        for query, graded in gold.grades.items():
            ours = grades.setdefault(query, {})
            for category, grade in graded.items():
                here = gold.where(query, category)
                if category in ours and ours[category] != grade:
                    raise InputError(f"{here}: query {shown(query)}: category {shown(category)} graded {grade}, but "
                                     f"{where[(query, category)]} grades it {ours[category]}: give files that agree")
                ours[category] = grade
                where.setdefault((query, category), here)
        all_grades = [g for graded in gold.grades.values() for g in graded.values()]
        files.append(JudgedFile(str(path), gold.sha256, len(gold.grades),
                                sum(g >= ACCEPTABLE for g in all_grades), sum(g == WRONG for g in all_grades)))
    across = {q: f for q, f in forms.items() if len(f) > 1 and q not in said}
    if across:
        example = " / ".join(map(shown, next(iter(across.values()))[:3]))
        notes.append(f"{FLAG}: {len(across):,} quer{'y' if len(across) == 1 else 'ies'} written differently in "
                     f"different files merged into one (e.g. {example}): queries are matched normalized")
    return Judged(grades, tuple(files), tuple(notes))


def is_judged(queries: np.ndarray, judged: Judged) -> np.ndarray:
    """Which of ``queries`` (normalized) are judged."""
    return np.fromiter((q in judged.grades for q in queries), dtype=bool, count=len(queries))


def drop_pairs(table: ClickTable, pairs: frozenset[tuple[str, str]]) -> ClickTable:
    """``table`` without the (query, category) ``pairs`` (queries and their searches kept)."""
    keep = np.fromiter(((table.queries[q], table.categories[c]) not in pairs
                        for q, c in zip(table.pair_query.tolist(), table.pair_category.tolist())),
                       dtype=bool, count=len(table))
    return replace(table, pair_query=table.pair_query[keep], pair_category=table.pair_category[keep],
                   clicks=table.clicks[keep], impressions=table.impressions[keep])


def with_judged(dataset: Dataset, judged: Judged, weight: float, negatives: bool = False) -> tuple[Dataset, dict]:
    """``dataset`` with the judged pairs in its training split (module docstring) and the counts:
    judged queries moved from validation and from test, pairs added, negative pairs removed."""
    if not (np.isfinite(weight) and MIN_JUDGED_WEIGHT <= weight <= MAX_JUDGED_WEIGHT):
        raise InputError(f"--judged-weight {weight:g}: must be a number from {MIN_JUDGED_WEIGHT:g} to "
                         f"{MAX_JUDGED_WEIGHT:,.0f} (pseudo-clicks a float32 click table holds exactly)")
    moved = is_judged(dataset.table.queries, judged)
    counts = {f"moved_from_{name}": int((moved & (dataset.split == SPLITS.index(name))).sum())
              for name in ("validation", "test")}
    split = np.where(moved, np.int8(0), dataset.split).astype(np.int8)
    queries, categories, clicks = judged.positive_pairs(weight)
    table = merge_pairs(dataset.table, queries, categories, clicks)
    new_split = np.zeros(len(table.queries), dtype=np.int8)  # a query new to the data trains
    new_split[np.searchsorted(table.queries, dataset.table.queries)] = split
    counts["pairs_added"] = len(queries)
    counts["negatives_removed"] = 0
    if negatives:
        before = len(table)
        table = drop_pairs(table, judged.negatives())
        counts["negatives_removed"] = before - len(table)
    return Dataset(dataset.taxonomy, table, new_split, dataset.seed), counts


def without_judged(sets: dict, judged: Judged) -> tuple[dict, dict[str, int]]:
    """Validation sets (name -> (table, weight)) without the judged queries, and how many each lost."""
    out, removed = {}, {}
    for name, (table, weight) in sets.items():
        drop = is_judged(table.queries, judged)
        removed[name] = int(drop.sum())
        out[name] = (subset_queries(table, ~drop) if drop.any() else table, weight)
    return out, removed
