"""A session's judgments out of the store: CSV, TREC qrels, and golden data for the harness.

Each export covers the queries graded by at least ``min_judges`` judges (``qcat judge export
--min-judges``; default: all of the session's judges, the queries the report counts); the golden
data read directly by ``qcat golden evaluate|import`` (:func:`golden_from_store`) takes every
finished judgment.

- CSV: one row per judgment, with the query, its segment, the judge, the screen side, the
  system behind that side, the listing's position and the grade;
- TREC qrels: ``qid 0 docno grade`` per (query, listing), the grade being the mean of every
  judgment of that listing for that query (all judges, both sides where it was shown on both),
  rounded half up; ``qid`` is the query's id in the store;
- :func:`write_graded_gold_file`: a category session's judged categories as a graded gold file for
  ``qcat evaluate --gold`` (one row per query and category, the grade the category report uses; a
  session made with ``--precision P`` adds its node answers' rows and a ``# precision: P`` line);
- :func:`golden_from_store`: a :class:`qcat.evaluation.golden.golden_set.GoldenSet`, one row per
  (query, listing, judge) (a judge who saw the listing on both sides gives the rounded mean of
  the two grades), relevant when Good or better, so ``qcat golden evaluate --golden URL
  --golden-session N`` evaluates classifiers against the session's human judgments.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from qcat.errors import InputError
from qcat.evaluation.golden.golden_set import GRADE_NAMES, RELEVANT_GRADE, GoldenSet, ImportReport, from_rows
from qcat.judging.reporting.results import judged_by_enough, load_results
from qcat.judging.store.connection import Store, open_store, shown
from qcat.judging.store.models import CATEGORY_GRADE_NAMES
from qcat.measure.judged import judged_grade

CSV_COLUMNS = ("session", "query_id", "query", "segment", "judge", "side", "system", "position", "listing_id",
               "grade", "grade_name", "created_at", "updated_at")


def _open(path: Path):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc}") from None


def selected(store: Store, key: str | int, min_judges: int | None = None):
    """The session's queries graded by at least ``min_judges`` judges (default: all the session's,
    as the report counts them) with their judgments: a :class:`qcat.judging.reporting.results.Selection`."""
    return judged_by_enough(load_results(store, key), min_judges)


def write_csv(store: Store, key: str | int, path: Path, min_judges: int | None = None) -> int:
    """One row per judgment. A category session's rows name the category in ``listing_id``, the
    models that proposed it in ``system`` (their paths, " + " between two) and its best rank in
    ``position``."""
    results = selected(store, key, min_judges).results
    query = {q.id: q for q in results.queries}
    names = CATEGORY_GRADE_NAMES if results.kind == "categories" else GRADE_NAMES
    models = {"baseline": results.baseline_model, "target": results.target_model}

    def system(j) -> str:  # a category session's models by their paths (--model), never baseline/target
        return " + ".join(models[s] for s in j.system.split("+")) if results.kind == "categories" else j.system

    with _open(Path(path)) as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for j in results.judgments:
            writer.writerow([results.name, j.query_id, query[j.query_id].text, query[j.query_id].segment, j.judge,
                             j.side, system(j), j.position, j.listing_id, j.grade, names[j.grade],
                             j.created_at.isoformat(), j.updated_at.isoformat()])
    return len(results.judgments)


def write_graded_gold_file(store: Store, key: str | int, path: Path, min_judges: int | None = None) -> int:
    """A category session's judged categories as a graded gold file (:mod:`qcat.measure.graded_gold`):
    one row per (query, category) with the grade the report uses, queries in session order (the
    report's), for ``qcat evaluate --gold`` and ``qcat data audit --gold``."""
    import json

    from qcat.judging.grading.selection.wording import sample_kind
    from qcat.judging.reporting.categories import category_grades, given_grades
    from qcat.measure.graded_gold import write_graded_gold

    results = selected(store, key, min_judges).results
    if results.kind != "categories":
        raise InputError(f"judging session {results.name!r} grades search results: --gold writes a category "
                         "session's judgments (--golden writes a result session's for qcat golden)")
    given = given_grades(results)
    grades = category_grades(results, given)
    path_of = {item.listing_id: item.category for item in results.items}
    rows = [(q.text, category, grade, q.segment, path_of.get(category, ""),
             f"{sum(given[(q.id, category)]) / len(given[(q.id, category)]):.3f}" if given[(q.id, category)] else "",
             len(given[(q.id, category)]))
            for q in results.queries for category, grade in sorted(grades.get(q.id, {}).items())]
    settings = json.loads(results.settings or "{}")
    with _open(Path(path)) as handle:
        return write_graded_gold(handle, rows, {"qcat graded gold": f"judging session {results.name}",
                                                "session": results.id, "top_k": settings.get("top_k", 3),
                                                "sample": sample_kind(settings)}
                                 | ({"precision": settings["nodes"]["precision"]} if settings.get("nodes") else {}))


def qrels(store: Store, key: str | int, min_judges: int | None = None) -> list[tuple[int, str, int]]:
    results = selected(store, key, min_judges).results
    grades: dict[tuple[int, str], list[int]] = defaultdict(list)
    for j in results.judgments:
        grades[(j.query_id, j.listing_id)].append(j.grade)
    return [(query_id, listing, judged_grade(g)) for (query_id, listing), g in sorted(grades.items())]


def write_qrels(store: Store, key: str | int, path: Path, min_judges: int | None = None) -> int:
    rows = qrels(store, key, min_judges)
    for _, listing, _ in rows:
        if not listing or any(c.isspace() for c in listing):
            raise InputError(f"listing id {listing!r} contains white space: it cannot be written as TREC qrels")
    with _open(Path(path)) as handle:
        for query_id, listing, grade in rows:
            handle.write(f"{query_id} 0 {listing} {grade}\n")
    return len(rows)


def golden_rows(store: Store, key: str | int,
                min_judges: int | None = None) -> tuple[list[tuple[str, str, int, int, str, bool]], str, int]:
    results = selected(store, key, min_judges).results
    if results.kind == "categories":
        raise InputError(f"judging session {results.name!r} grades categories, not listings: it is no golden data "
                         "for qcat golden (export it with --gold for qcat evaluate --gold)")
    text = {q.id: q.text for q in results.queries}
    grades: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for j in results.judgments:
        grades[(text[j.query_id], j.listing_id, j.judge)].append(j.grade)
    rows = []
    for (query, listing, judge), g in sorted(grades.items()):
        grade = judged_grade(g)
        rows.append((query, listing, int(grade >= RELEVANT_GRADE), grade, judge, False))
    return rows, results.name, len(results.judgments)


def golden_from_store(url: str, key: str | int) -> GoldenSet:
    """The session's judgments as golden data (the store at ``url``, the session by id or name)."""
    store = open_store(url)
    try:
        rows, name, judgments = golden_rows(store, key, min_judges=1)  # every finished judgment
        report = ImportReport(f"{shown(store.engine.url)} session {name!r} ({judgments:,} judgments, one row per "
                              "query, listing and judge)", rows_read=len(rows))
    finally:
        store.dispose()
    if not rows:
        raise InputError(f"judging session {name!r} has no finished judgments yet")
    return from_rows(rows, report)


def write_golden_csv(store: Store, key: str | int, path: Path, min_judges: int | None = None) -> int:
    rows, name, judgments = golden_rows(store, key, min_judges)
    if not rows:
        raise InputError(f"judging session {name!r} has no finished judgments yet")
    golden = from_rows(rows, ImportReport(f"session {name!r}", rows_read=len(rows)))
    golden.save_csv(path)
    return len(golden)
