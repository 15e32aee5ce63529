"""Graded gold files: queries with the categories people judged for them (issue 39).

A tab-separated file, one (query, category) a line, with a header line naming its columns:

- ``query``: the query as judged (normalized, as the judging store keeps it);
- ``category``: a taxonomy node id (a path such as ``Home > Beds`` is accepted and resolved
  against the taxonomy by :func:`check_against`);
- ``grade``: 0 wrong, 1 related, 2 acceptable, 3 exact (:mod:`qcat.measure.judged`);
- ``segment`` (optional): head, torso or tail, for per-segment figures.

Further columns (``category_path``, ``mean_grade``, ``judges``) are for people and ignored here;
``#`` starts a comment line, and a comment ``# key: value`` before the header is kept in
:attr:`GradedGold.meta` (the export writes ``top_k``, the k its judges saw per model, and
``session``). ``qcat judge export --gold FILE`` of a category session writes one
(:func:`write_graded_gold`); ``qcat evaluate --gold FILE`` and ``qcat data audit --gold FILE``
read it. A category a file does not list for a query is not judged (neither acceptable nor wrong).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from qcat.errors import InputError, shown
from qcat.lines import decoded_lines, split_line
from qcat.measure.judged import GRADE_NAMES
from qcat.measure.segments import SEGMENTS
from qcat.paths import check_file
from qcat.taxonomy import Taxonomy

REQUIRED = ("query", "category", "grade")
WRITTEN = ("query", "category", "grade", "segment", "category_path", "mean_grade", "judges")


@dataclass(frozen=True)
class GradedGold:
    """Per query (in file order), its graded categories; ``segments`` where the file names them."""

    grades: dict[str, dict[str, int]]
    segments: dict[str, str] = field(default_factory=dict)
    source: str = ""
    sha256: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    lines: dict[tuple[str, str], int] = field(default_factory=dict)  # (query, category as written) -> line
    flag: str = "--gold"  # the flag that named the file, for errors

    def top_k(self, default: int = 5) -> int:
        """The k the judges saw per model (``# top_k: K``), else ``default``."""
        value = self.meta.get("top_k", "")
        return int(value) if value.isdigit() and int(value) > 0 else default

    @property
    def queries(self) -> list[str]:
        return list(self.grades)

    def __len__(self) -> int:
        return len(self.grades)

    def describe(self) -> str:
        graded = sum(len(g) for g in self.grades.values())
        return f"{self.source} ({len(self):,} queries, {graded:,} graded categories, sha256 {self.sha256[:12]})"

    def where(self, query: str, category: str) -> str:
        """``FLAG FILE:LINE`` of a (query, category) row (without the line for a gold not read from a file)."""
        line = self.lines.get((query, category))
        return f"{self.flag} {self.source}" + ("" if line is None else f":{line}")

    def check_against(self, taxonomy: Taxonomy, which: str = "the taxonomy") -> "GradedGold":
        """The gold with every category as a taxonomy node id; an :class:`InputError` naming the
        file, line and category of the first one the taxonomy (called ``which`` in the error) lacks."""
        resolved: dict[str, dict[str, int]] = {}
        lines: dict[tuple[str, str], int] = {}
        for query, grades in self.grades.items():
            out: dict[str, int] = {}
            for category, grade in grades.items():
                node = category if category in taxonomy else taxonomy.resolve(category)
                if node is None:
                    raise InputError(f"{self.where(query, category)}: query {shown(query)}: category "
                                     f"{shown(category)} is not in {which} (give a node id or its full path)")
                if node in out and out[node] != grade:
                    raise InputError(f"{self.where(query, category)}: query {shown(query)}: category {shown(node)} is "
                                     f"graded twice ({out[node]} and {grade})")
                out[node] = grade
                if (query, category) in self.lines:
                    lines.setdefault((query, node), self.lines[(query, category)])
            resolved[query] = out
        return GradedGold(resolved, self.segments, self.source, self.sha256, self.meta, lines, self.flag)


def read_graded_gold(path: str | Path, flag: str = "--gold") -> GradedGold:
    """A graded gold file, checked line by line (errors name the file and line)."""
    path = check_file(path, flag)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot read it ({exc.__class__.__name__})") from None
    meta: dict[str, str] = {}
    rows = []  # (line number, its cells)
    for number, line, why in decoded_lines(data.removeprefix(b"\xef\xbb\xbf")):
        if line is not None and line.startswith("#"):
            key, colon, value = line[1:].partition(":")
            if colon and not rows and key.strip().isidentifier():
                meta.setdefault(key.strip(), value.strip())
            continue
        cells = None if line is None else split_line(line, "\t")
        if cells is None:
            raise InputError(f"{flag} {path}:{number}: {why or 'not well-formed (a quote not closed on its line)'}")
        if line.strip():
            rows.append((number, cells))
    if not rows:
        raise InputError(f"{flag} {path}: no header and no rows (want the columns {', '.join(REQUIRED)})")
    header_line, header = rows[0][0], [name.strip() for name in rows[0][1]]
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise InputError(f"{flag} {path}:{header_line}: the header lacks {', '.join(missing)} "
                         f"(want tab-separated columns {', '.join(REQUIRED)}[, segment])")
    column = {name: header.index(name) for name in (*REQUIRED, "segment") if name in header}
    grades: dict[str, dict[str, int]] = {}
    segments: dict[str, str] = {}
    lines: dict[tuple[str, str], int] = {}
    for number, cells in rows[1:]:
        where = f"{flag} {path}:{number}"
        if len(cells) < len(header):
            raise InputError(f"{where}: {len(cells)} columns, the header names {len(header)}")
        query, category, grade = (cells[column[name]].strip() for name in REQUIRED)
        if not query or not category:
            raise InputError(f"{where}: an empty {'query' if not query else 'category'}")
        if grade not in ("0", "1", "2", "3"):
            raise InputError(f"{where}: grade {shown(grade)} is not one of 0-3 "
                             f"({', '.join(f'{g} {n}' for g, n in enumerate(GRADE_NAMES))})")
        per_query = grades.setdefault(query, {})
        if category in per_query:
            raise InputError(f"{where}: query {shown(query)} grades category {shown(category)} a second time")
        per_query[category] = int(grade)
        lines[(query, category)] = number
        if "segment" in column:
            segment = cells[column["segment"]].strip()
            if segment and segment not in SEGMENTS:
                raise InputError(f"{where}: segment {shown(segment)} is not one of {', '.join(SEGMENTS)} (or empty)")
            if segment and segments.setdefault(query, segment) != segment:
                raise InputError(f"{where}: query {shown(query)} is in segment {shown(segment)} here and "
                                 f"{shown(segments[query])} on an earlier line")
    if not grades:
        raise InputError(f"{flag} {path}: a header and no rows: nothing to score against")
    return GradedGold(grades, segments, str(path), hashlib.sha256(data).hexdigest(), meta, lines, flag)


def write_graded_gold(handle, rows: Iterable[tuple], meta: dict[str, object] | None = None) -> int:
    """Write :data:`WRITTEN` rows (query, category id, grade, segment, path, mean grade, judges)
    to an open text ``handle``, after ``# key: value`` lines of ``meta``; the number of rows."""
    for key, value in (meta or {}).items():
        handle.write(f"# {key}: {' '.join(str(value).split())}\n")
    writer = csv.writer(handle, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(WRITTEN)
    count = 0
    for row in rows:
        writer.writerow(row)
        count += 1
    return count
