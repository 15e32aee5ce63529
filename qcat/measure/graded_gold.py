"""Graded gold files: queries with the categories people judged for them (issue 39).

A tab-separated file, one (query, category) a line, with a header line naming its columns:

- ``query``: the query as judged (normalized, as the judging store keeps it);
- ``category``: a taxonomy node id (a path such as ``Home > Beds`` is accepted and resolved
  against the taxonomy by :func:`check_against`);
- ``grade``: 0 wrong, 1 related, 2 acceptable, 3 exact (:mod:`qcat.measure.judged`);
- ``segment`` (optional): head, torso or tail, for per-segment figures.

Further columns (``category_path``, ``mean_grade``, ``judges``) are for people and ignored here.
The file is read through the input layer (:mod:`qcat.inputs`, :data:`SCHEMA`): a line starting
with ``#`` is a comment only above the header (below it, ``#1 dad mug`` is a query), where
``# top_k: K`` (1..5, the k its judges saw per model), ``# session: S`` and ``# sample: KIND``
(how the session chose its queries, ``create-session --select``: random, uncertain or disagree;
only a random sample measures precision, and ``qcat evaluate --gold`` warns of any other) are
directives kept in :attr:`GradedGold.meta`, each given once; queries are matched on their normalized form
(``TV`` and ``tv`` are one query, the merge counted and said; a row repeating an earlier row is
dropped and said) and at most 4,000 bytes; only leaves may be
graded, except in a file of node answers (issue 52: ``# precision: P``, the precision at which a
session made with ``create-session --precision P`` showed the models' node answers), whose inner
nodes (departments, aisles, ...) are kept apart in :attr:`GradedGold.nodes`, so that everything
that scores leaves sees leaves only. ``qcat judge export --gold FILE`` of a category session writes one
(:func:`write_graded_gold`); ``qcat evaluate --gold FILE`` and ``qcat data audit --gold FILE``
read it. A category a file does not list for a query is not judged (neither acceptable nor wrong).
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from qcat.errors import InputError, shown
from qcat.inputs import COMMENTS_BEFORE_HEADER, Column, Directive, FileSchema, read_table
from qcat.measure.segments import SEGMENTS
from qcat.taxonomy import Taxonomy

REQUIRED = ("query", "category", "grade")
# The k a category session shows judges per model lies in 1..5 (qcat.judging.grading.categories.MAX_TOP_K).
TOP_K_RANGE = (1, 5)
SCHEMA = FileSchema(
    kind="graded gold", flag="--gold",
    columns=(Column("query", "query", True, "the query as judged"),
             Column("category", "text", True, "a leaf's id or full path (any node's under # precision)"),
             Column("grade", "int", True, "0 wrong, 1 related, 2 acceptable, 3 exact", 0, 3),
             Column("segment", "choice", False, "head, torso or tail", choices=SEGMENTS)),
    delimiter="\t", comments=COMMENTS_BEFORE_HEADER, literal_quotes=True,
    directives=(Directive("top_k", "int", "the k judges saw per model", *TOP_K_RANGE),
                Directive("session", "text", "the judging session it was exported from"),
                Directive("sample", "text", "how the session's queries were chosen: random, uncertain or disagree"),
                Directive("precision", "number", "the precision of the node answers the session showed", 0, 1)))
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
    merged: dict[str, list[str]] = field(default_factory=dict)  # normalized query -> its written forms
    nodes: dict[str, dict[str, int]] = field(default_factory=dict)  # checked: per query, its graded inner nodes
    duplicates: dict[int, int] = field(default_factory=dict)  # line of a row repeating an earlier one -> that line
    forms: dict[str, list[str]] = field(default_factory=dict)  # normalized query -> its written forms, first first

    def precision(self) -> float | None:
        """The precision of the node answers its session showed (``# precision: P``), else None."""
        value = self.meta.get("precision")
        return None if value is None else float(value)

    def top_k(self, default: int = 5) -> int:
        """The k the judges saw per model (``# top_k: K``), else ``default``."""
        value = self.meta.get("top_k")
        return default if value is None else int(value)

    @property
    def queries(self) -> list[str]:
        return list(self.grades)

    def __len__(self) -> int:
        return len(self.grades)

    def describe(self) -> str:
        graded = sum(len(g) for g in self.grades.values())
        merged = (f", {len(self.merged):,} written several ways merged (e.g. "
                  f"{' / '.join(map(shown, next(iter(self.merged.values()))[:3]))})" if self.merged else "")
        return f"{self.source} ({len(self):,} queries{merged}, {graded:,} graded categories, sha256 {self.sha256[:12]})"

    def notes(self) -> list[str]:
        """What reading the file did silently otherwise (issue 53 item 6): queries written several ways
        merged into one, rows repeating an earlier row dropped; each said once, naming the file."""
        out = []
        if self.merged:
            example = " / ".join(map(shown, next(iter(self.merged.values()))[:3]))
            out.append(f"{self.flag} {self.source}: {len(self.merged):,} quer{'y' if len(self.merged) == 1 else 'ies'} "
                       f"written several ways merged into one (e.g. {example}): queries are matched normalized")
        if self.duplicates:
            line, first = next(iter(self.duplicates.items()))
            out.append(f"{self.flag} {self.source}: {len(self.duplicates):,} row(s) repeating an earlier row's query, "
                       f"category and grade dropped (e.g. line {line} repeats line {first})")
        return out

    def where(self, query: str, category: str) -> str:
        """``FLAG FILE:LINE`` of a (query, category) row (without the line for a gold not read from a file)."""
        line = self.lines.get((query, category))
        return f"{self.flag} {self.source}" + ("" if line is None else f":{line}")

    def check_against(self, taxonomy: Taxonomy, which: str = "the taxonomy") -> "GradedGold":
        """The gold with every category as a taxonomy node id; an :class:`InputError` naming the
        file, line and category of the first one the taxonomy (called ``which`` in the error) lacks.
        A file of node answers (``# precision``) keeps its inner nodes apart, in :attr:`nodes`."""
        resolved: dict[str, dict[str, int]] = {}
        inner: dict[str, dict[str, int]] = {}
        lines: dict[tuple[str, str], int] = {}
        for query, grades in self.grades.items():
            leaves = resolved.setdefault(query, {})
            for category, grade in grades.items():
                node = category if category in taxonomy else taxonomy.resolve(category)
                if node is None:
                    raise InputError(f"{self.where(query, category)}: query {shown(query)}: category "
                                     f"{shown(category)} is not in {which} (give a node id or its full path)")
                leaf = taxonomy.is_leaf(node)
                if not leaf and self.precision() is None:
                    raise InputError(f"{self.where(query, category)}: query {shown(query)}: category {shown(category)} "
                                     f"({taxonomy.path_of(node)}) is not a leaf: models answer leaves, so grade a leaf "
                                     "(only a file of node answers, with a '# precision: P' line, grades inner nodes)")
                out = leaves if leaf else inner.setdefault(query, {})
                if node in out and out[node] != grade:
                    raise InputError(f"{self.where(query, category)}: query {shown(query)}: category {shown(node)} is "
                                     f"graded twice ({out[node]} and {grade})")
                out[node] = grade
                if (query, category) in self.lines:
                    lines.setdefault((query, node), self.lines[(query, category)])
        return GradedGold(resolved, self.segments, self.source, self.sha256, self.meta, lines, self.flag, self.merged,
                          inner, self.duplicates, self.forms)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def read_graded_gold(path: str | Path, flag: str = "--gold", say=_stderr) -> GradedGold:
    """A graded gold file read through the input layer (:data:`SCHEMA`); errors name the file and line.
    Queries are matched on their normalized form: ``TV`` and ``tv`` are one query (counted in
    :attr:`GradedGold.merged`), and a category they grade differently is refused naming both lines; a
    row repeating an earlier one is dropped (:attr:`GradedGold.duplicates`). Both are said through
    ``say`` (stderr; None: the caller says :meth:`GradedGold.notes` itself)."""
    table = read_table(path, SCHEMA, flag)
    grades: dict[str, dict[str, int]] = {}
    segments: dict[str, str] = {}
    lines: dict[tuple[str, str], int] = {}
    duplicates: dict[int, int] = {}
    for row in table.rows:
        where = table.where(row.line)
        query, category, grade = row.query.normalized, str(row["category"]), int(row["grade"])
        per_query = grades.setdefault(query, {})
        if category in per_query and per_query[category] != grade:
            raise InputError(f"{where}: query {shown(row.query.text)} grades category {shown(category)} {grade} here "
                             f"and {per_query[category]} on line {lines[(query, category)]}: give one grade")
        if category in per_query:
            duplicates[row.line] = lines[(query, category)]
        per_query[category] = grade
        lines.setdefault((query, category), row.line)
        segment = row["segment"]
        if segment is not None and segments.setdefault(query, str(segment)) != segment:
            raise InputError(f"{where}: query {shown(row.query.text)} is in segment {shown(segment)} here and "
                             f"{shown(segments[query])} on an earlier line")
    meta = {name: str(value) for name, value in table.directives.items()}
    if table.directives.get("precision") in (0, 1):
        raise InputError(f"{flag} {table.path}: '# precision:' {meta['precision']} is not a precision strictly "
                         "between 0 and 1")
    gold = GradedGold(grades, segments, str(table.path), table.sha256, meta, lines, flag, table.merged,
                      duplicates=duplicates, forms=dict(table.forms))
    for note in gold.notes() if say is not None else ():
        say(note)
    return gold


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
