"""Golden data: human (or simulated) judgments of (query, listing) pairs (eBay §4.2.2).

A judgment row holds a normalized query, a listing id, a binary relevance (0/1), an
optional grade 0–3 (Off-topic, Acceptable, Good, Excellent; -1 when absent), the judge
and whether the row was simulated rather than judged by a person.

Several judges may judge the same pair; :meth:`GoldenSet.pairs` aggregates them: the
pair is relevant when at least half of its judgments say so, and its grade is the mean
of the grades given (eBay §4.2.3 averages three judges).
"""

from __future__ import annotations

import csv
import gzip
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcat.errors import InputError

GRADE_NAMES = ("Off-topic", "Acceptable", "Good", "Excellent")
NO_GRADE = -1
RELEVANT_GRADE = 2  # Good or Excellent counts as relevant where only a grade is known
MAX_EXAMPLES = 5
CSV_COLUMNS = ("query", "listing_id", "relevance", "grade", "judge", "simulated")


@dataclass
class ImportReport:
    """Rows read, kept and skipped (per reason, with the first few examples)."""

    source: str
    rows_read: int = 0
    rows_kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, where: str) -> None:
        self.skipped[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append(where)

    def format(self) -> str:
        lines = [f"{self.source}: {self.rows_read:,} judgments read, {self.rows_kept:,} kept, "
                 f"{sum(self.skipped.values()):,} skipped"]
        for reason, count in self.skipped.most_common():
            lines.append(f"  skipped {count:,}: {reason} (e.g. {'; '.join(self.examples[reason])})")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"source": self.source, "rows_read": self.rows_read, "rows_kept": self.rows_kept,
                "skipped": dict(self.skipped), "examples": self.examples}


@dataclass(frozen=True)
class GoldenPairs:
    """One row per distinct (query, listing): aggregated labels."""

    query: np.ndarray  # object, normalized
    listing_id: np.ndarray  # object
    relevance: np.ndarray  # int8 0/1
    grade: np.ndarray  # float64 mean grade, NaN where no judge gave one
    judgments: np.ndarray  # int32, how many judgments were aggregated


@dataclass(frozen=True)
class GoldenSet:
    query: np.ndarray  # object, normalized queries
    listing_id: np.ndarray  # object
    relevance: np.ndarray  # int8 0/1
    grade: np.ndarray  # int8 0..3, NO_GRADE where absent
    judge: np.ndarray  # object
    simulated: np.ndarray  # bool
    report: ImportReport | None = None

    def __len__(self) -> int:
        return len(self.query)

    @property
    def has_grades(self) -> bool:
        return bool(np.any(self.grade != NO_GRADE))

    def pairs(self) -> GoldenPairs:
        keys = np.char.add(np.char.add(self.query.astype(str), "\t"), self.listing_id.astype(str))
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        judgments = np.bincount(inverse, minlength=len(unique))
        relevant_votes = np.bincount(inverse, weights=self.relevance, minlength=len(unique))
        graded = self.grade != NO_GRADE
        grade_sum = np.bincount(inverse[graded], weights=self.grade[graded], minlength=len(unique))
        grade_count = np.bincount(inverse[graded], minlength=len(unique))
        with np.errstate(invalid="ignore", divide="ignore"):
            grade = np.where(grade_count > 0, grade_sum / np.maximum(grade_count, 1), np.nan)
        return GoldenPairs(
            query=self.query[first],
            listing_id=self.listing_id[first],
            relevance=(2 * relevant_votes >= judgments).astype(np.int8),
            grade=grade,
            judgments=judgments.astype(np.int32),
        )

    def save_csv(self, path: str | Path) -> None:
        """Write the set in qcat's golden CSV format (gzip when the name ends in .gz)."""
        from qcat.console.output import atomic_file

        path = Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        # Into a temporary sibling, renamed when complete; an OSError names ``path`` in one line.
        with atomic_file(path, flag=None) as staging, opener(staging, "wt", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(CSV_COLUMNS)
            for row in zip(self.query, self.listing_id, self.relevance, self.grade, self.judge, self.simulated):
                q, listing, relevance, grade, judge, simulated = row
                writer.writerow([q, listing, int(relevance), "" if grade == NO_GRADE else int(grade), judge,
                                 int(bool(simulated))])


def from_rows(rows: list[tuple[str, str, int, int, str, bool]], report: ImportReport) -> GoldenSet:
    """A golden set from validated rows ``(query, listing_id, relevance, grade, judge, simulated)``,
    dropping repeats of (query, listing, judge) by a named judge after the first (counted in
    ``report``); rows without a judge are all kept, as judgments of unknown judges."""
    seen: set[tuple[str, str, str]] = set()
    kept = []
    for row in rows:
        key = (row[0], row[1], row[4])
        if row[4] and key in seen:
            report.skip("the same judge judged this (query, listing) again", f"{row[0]!r} / {row[1]!r} / {row[4]!r}")
            continue
        seen.add(key)
        kept.append(row)
    report.rows_kept = len(kept)
    if not kept:
        raise InputError(f"{report.source}: no usable judgments\n{report.format()}")
    columns = list(zip(*kept))
    return GoldenSet(
        query=np.array(columns[0], dtype=object),
        listing_id=np.array(columns[1], dtype=object),
        relevance=np.array(columns[2], dtype=np.int8),
        grade=np.array(columns[3], dtype=np.int8),
        judge=np.array(columns[4], dtype=object),
        simulated=np.array(columns[5], dtype=bool),
        report=report,
    )
