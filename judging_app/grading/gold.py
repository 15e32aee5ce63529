"""Gold questions: queries of a session whose listings have known grades, to spot careless judges.

- :func:`add_gold` (``qcat judge add-gold``) reads a CSV or TSV file (by its suffix) with the
  columns ``query``, ``listing_id`` and ``grade`` (others are ignored, so the CSV of ``qcat judge
  export --csv`` or ``--golden``, cut down to one trusted judge's rows, is a valid file; for a
  category session ``category`` may name the column, so a graded gold file of ``qcat judge export
  --gold`` is one too), marks
  those queries of the session gold and stores their known grades. Every row is checked before
  anything is stored: the query must be in the session (its text as stored), the listing shown
  for it (in either group), the grade 0–3, a (query, listing) given twice must have the same
  grade, and every listing shown for a gold query must have a grade. Running it again replaces the
  grades of the queries in the file; a query already judged stays judged: its judgments become
  gold answers (and a claim of it that had been released is taken back: gold claims never expire).
- :mod:`qcat.judging.grading.assignment` gives every judge every gold query, mixed in among the regular
  ones, looking like any other; :mod:`qcat.judging.reporting.results` leaves them out of the session's
  results (report tables, agreement, exports).
- :func:`judge_agreement`: per judge, their grades of the gold listings against the known ones:
  listings graded, exact agreement, mean absolute difference, within one grade. A listing shown
  in both groups is one gold listing (graded once, stored for both sides).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy import delete, exists, func, insert, select, update

from qcat.errors import InputError
from qcat.errors import shown as shown_text  # 'shown' names the listings shown below
from qcat.inputs import COMMENTS_BEFORE_HEADER, Column, FileSchema, read_table
from qcat.judging.grading.sessions import find_session
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    Assignment,
    GoldGrade,
    Judge,
    JudgingSession,
    Judgment,
    ResultItem,
    ResultList,
    SessionQuery,
)
from qcat.text.normalize import normalize

COLUMNS = ("query", "listing_id", "grade")


@dataclass(frozen=True)
class GoldRow:
    line: int  # in the file, the header being line 1
    query: str
    listing_id: str
    grade: str
    normalized: str = ""  # the query's normalized form, which matching uses


@dataclass(frozen=True)
class Added:
    session: str
    queries: int  # gold queries in the file
    grades: int  # gold grades stored for them
    already_judged: int  # of those queries, how many have finished judgments already
    gold_queries: int  # gold queries of the session now


GOLD_FILE = FileSchema(
    kind="gold questions", flag="--file", delimiter=",", delimiters={".tsv": "\t", ".tab": "\t"},
    comments=COMMENTS_BEFORE_HEADER, literal_quotes=False,
    columns=(Column("query", "query", True, "the query as the session stores it (matched once normalized)"),
             Column("listing_id", "text", False, "a listing shown for it (a category session: its category)"),
             Column("category", "text", False, "a category session's category id (instead of listing_id)"),
             Column("grade", "int", True, "0 (Off-topic) to 3 (Excellent); a category session: 0 (Wrong) to "
                                          "3 (Exact)", 0, 3)))


# A category session's gold file, as its errors name it: its categories and their grades only.
CATEGORY_GOLD_FILE = replace(GOLD_FILE, columns=tuple(
    replace(column, meaning={"listing_id": "a category shown for it (or the category column)",
                             "grade": "0 (Wrong) to 3 (Exact)"}.get(column.name, column.meaning))
    for column in GOLD_FILE.columns))


def words(kind: str) -> dict[str, str]:
    """How the messages of :func:`read_gold_file` and :func:`check_rows` name what is graded: a
    category session's categories and its grades, or a result session's listings."""
    if kind == "categories":
        return {"item": "category", "items": "categories", "column": "category",
                "where": "among the categories proposed for it"}
    return {"item": "listing", "items": "listings", "column": "listing_id", "where": "in either group"}


def read_gold_file(path: Path, kind: str = "results") -> list[GoldRow]:
    """The rows of a gold file (:data:`GOLD_FILE`): CSV, or TSV when its name ends in ``.tsv`` (or
    ``.tab``), read through the input layer; a category session's graded gold file names its
    ``category`` column instead of ``listing_id``. ``kind``: the session's, for the words of errors."""
    table = read_table(path, GOLD_FILE if kind != "categories" else CATEGORY_GOLD_FILE)
    if "listing_id" not in table.header and "category" not in table.header:
        column = words(kind)["column"]
        raise InputError(f"{table.where(table.header_line)}: the header needs the columns query, {column}, grade; "
                         f"{column} missing (found: {shown_text(', '.join(table.header))})")
    column = "listing_id" if "listing_id" in table.header else "category"
    rows = []
    for row in table.rows:
        listing = row[column]
        if listing is None:
            raise InputError(f"{table.where(row.line)}: an empty {column}")
        rows.append(GoldRow(row.line, row.query.text, str(listing), str(row["grade"]), row.query.normalized))
    return rows


def check_rows(path: Path, rows: list[GoldRow], shown: dict[str, set[str]],
               kind: str = "results") -> dict[str, dict[str, int]]:
    """Known grades per query text and listing, checked against ``shown`` (the listings of each
    query of the session, both groups; a category session's categories)."""
    said = words(kind)
    grades: dict[str, dict[str, int]] = defaultdict(dict)
    first_line: dict[tuple[str, str], int] = {}
    for row in rows:
        where = f"{path}:{row.line}"
        if row.query not in shown:
            raise InputError(f"{where}: query {shown_text(row.query)} is not in the session (give its text as stored, "
                             "as qcat judge export --csv writes it)")
        if row.listing_id not in shown[row.query]:
            raise InputError(f"{where}: {said['item']} {shown_text(row.listing_id)} is not shown for query "
                             f"{shown_text(row.query)} ({said['where']})")
        grade, key = int(row.grade), (row.query, row.listing_id)
        known = grades[row.query].get(row.listing_id)
        if known is not None and known != grade:
            raise InputError(f"{where}: {said['item']} {shown_text(row.listing_id)} of query {shown_text(row.query)} "
                             f"is graded {grade} here "
                             f"and {known} on line {first_line[key]}")
        grades[row.query][row.listing_id] = grade
        first_line.setdefault(key, row.line)
    for query, known in grades.items():
        missing = sorted(shown[query] - set(known))
        if missing:
            raise InputError(f"{path}: gold query {shown_text(query)} needs a grade for every {said['item']} shown "
                             f"for it; {len(missing)} missing: {', '.join(map(shown_text, missing))}")
    return grades


def add_gold(store: Store, key: str | int, path: Path) -> Added:
    """Mark the queries of the gold file as gold questions of the session and store their known
    grades (replacing the ones stored before for those queries), in one transaction."""
    with store.sessions() as session:
        kind = find_session(session, key).kind
    rows = read_gold_file(path, kind)
    with store.transaction() as session:
        record: JudgingSession = find_session(session, key)
        queries = dict(session.execute(select(SessionQuery.text, SessionQuery.id)
                                       .where(SessionQuery.session_id == record.id)).all())
        # Matched on the normalized query, as every reader matches (a row's "TV" is the session's "tv").
        stored = {normalize(text): text for text in queries}
        rows = [replace(row, query=stored.get(row.normalized, row.query)) for row in rows]
        texts = {query_id: text for text, query_id in queries.items()}
        wanted = {row.query for row in rows} & set(queries)
        shown: dict[str, set[str]] = {text: set() for text in queries}
        for query_id, listing in session.execute(
                select(ResultList.query_id, ResultItem.listing_id).join(ResultItem, ResultItem.list_id == ResultList.id)
                .where(ResultList.query_id.in_([queries[t] for t in wanted]))).all():
            shown[texts[query_id]].add(listing)
        grades = check_rows(Path(path), rows, shown, record.kind)
        ids = [queries[text] for text in grades]
        session.execute(delete(GoldGrade).where(GoldGrade.query_id.in_(ids)))
        session.execute(insert(GoldGrade), [{"query_id": queries[text], "listing_id": listing, "grade": grade}
                                            for text, known in sorted(grades.items())
                                            for listing, grade in sorted(known.items())])
        session.execute(update(SessionQuery).where(SessionQuery.id.in_(ids)).values(gold=True)
                        .execution_options(synchronize_session=False))
        # A gold claim is never released (assignment): claims released before are taken back, so
        # their judges get the query again and may submit it, however many judges have it.
        for query_id, released in session.execute(
                select(Assignment.query_id, func.count()).where(Assignment.query_id.in_(ids),
                                                                Assignment.status == "released")
                .group_by(Assignment.query_id)).all():
            session.execute(update(Assignment).where(Assignment.query_id == query_id, Assignment.status == "released")
                            .values(status="open").execution_options(synchronize_session=False))
            session.execute(update(SessionQuery).where(SessionQuery.id == query_id)
                            .values(claims=SessionQuery.claims + released).execution_options(synchronize_session=False))
        judged = session.scalar(select(func.count(func.distinct(Assignment.query_id)))
                                .where(Assignment.query_id.in_(ids), Assignment.status == "done"))
        total = session.scalar(select(func.count()).select_from(SessionQuery)
                               .where(SessionQuery.session_id == record.id, SessionQuery.gold))
        return Added(record.name, len(ids), sum(len(known) for known in grades.values()), judged, total)


def gold_queries(store: Store, key: str | int) -> list[tuple[int, str, int]]:
    """The session's gold questions: (query id, text, known grades) in session order."""
    with store.sessions() as session:
        record = find_session(session, key)
        return [tuple(row) for row in session.execute(
            select(SessionQuery.id, SessionQuery.text, func.count(GoldGrade.id))
            .outerjoin(GoldGrade, GoldGrade.query_id == SessionQuery.id)
            .where(SessionQuery.session_id == record.id, SessionQuery.gold)
            .group_by(SessionQuery.id, SessionQuery.text, SessionQuery.position).order_by(SessionQuery.position))]


def judge_agreement(store: Store, session_id: int) -> list[dict]:
    """Per judge who finished a gold query of the session: ``queries`` (gold queries judged),
    ``listings`` (gold listings graded), ``exact`` (share graded exactly as known), ``mean_abs_diff``
    (mean of |grade − known grade|) and ``within_one`` (share at most one grade off); lowest
    agreement first. A judge's grade of a listing shown in both groups is the mean of the two
    sides' (the same grade, as the app stores it), rounded half up."""
    with store.sessions() as session:
        rows = session.execute(
            select(Judge.id, Judge.name, Judgment.query_id, Judgment.listing_id, Judgment.grade, GoldGrade.grade)
            .join(Judge, Judge.id == Judgment.judge_id)
            .join(SessionQuery, SessionQuery.id == Judgment.query_id)
            .join(GoldGrade, (GoldGrade.query_id == Judgment.query_id) & (GoldGrade.listing_id == Judgment.listing_id))
            .where(SessionQuery.session_id == session_id, SessionQuery.gold,
                   exists().where(Assignment.judge_id == Judgment.judge_id, Assignment.query_id == Judgment.query_id,
                                  Assignment.status == "done"))).all()
    graded: dict[tuple[int, str, int, str], list[int]] = defaultdict(list)
    known: dict[tuple[int, str], int] = {}
    for judge_id, name, query_id, listing, grade, gold in rows:
        graded[(judge_id, name, query_id, listing)].append(grade)
        known[(query_id, listing)] = gold
    per_judge: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    queries: dict[tuple[int, str], set[int]] = defaultdict(set)
    for (judge_id, name, query_id, listing), grades in graded.items():
        grade = int(sum(grades) / len(grades) + 0.5)
        per_judge[(judge_id, name)].append((grade, known[(query_id, listing)]))
        queries[(judge_id, name)].add(query_id)
    out = []
    for (judge_id, name), pairs in per_judge.items():
        diffs = [abs(grade - gold) for grade, gold in pairs]
        out.append({"judge": name, "judge_id": judge_id, "queries": len(queries[(judge_id, name)]),
                    "listings": len(pairs), "exact": sum(d == 0 for d in diffs) / len(diffs),
                    "mean_abs_diff": sum(diffs) / len(diffs), "within_one": sum(d <= 1 for d in diffs) / len(diffs)})
    return sorted(out, key=lambda r: (r["exact"], -r["mean_abs_diff"], r["within_one"], r["judge"]))


def gold_summary(store: Store, session_id: int) -> dict:
    """The report's gold section: how many gold queries the session has, and :func:`judge_agreement`."""
    with store.sessions() as session:
        count = session.scalar(select(func.count()).select_from(SessionQuery)
                               .where(SessionQuery.session_id == session_id, SessionQuery.gold))
    return {"queries": count, "judges": judge_agreement(store, session_id) if count else []}
