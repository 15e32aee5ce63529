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
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import delete, exists, func, insert, select, update

from qcat.errors import InputError
from qcat.errors import shown as shown_text  # 'shown' names the listings shown below
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
from qcat.lines import decoded_lines, split_line

COLUMNS = ("query", "listing_id", "grade")
GRADES = ("0", "1", "2", "3")


@dataclass(frozen=True)
class GoldRow:
    line: int  # in the file, the header being line 1
    query: str
    listing_id: str
    grade: str


@dataclass(frozen=True)
class Added:
    session: str
    queries: int  # gold queries in the file
    grades: int  # gold grades stored for them
    already_judged: int  # of those queries, how many have finished judgments already
    gold_queries: int  # gold queries of the session now


def words(kind: str) -> dict[str, str]:
    """How the messages of :func:`read_gold_file` and :func:`check_rows` name what is graded: a
    category session's categories and its grades, or a result session's listings."""
    if kind == "categories":
        return {"item": "category", "items": "categories", "column": "category",
                "where": "among the categories proposed for it", "scale": "0 (Wrong) to 3 (Exact)"}
    return {"item": "listing", "items": "listings", "column": "listing_id", "where": "in either group",
            "scale": "0 (Off-topic) to 3 (Excellent)"}


def read_gold_file(path: Path, kind: str = "results") -> list[GoldRow]:
    """The rows of a gold file: CSV, or TSV when its name ends in ``.tsv`` (or ``.tab``). ``kind``:
    the session's, for the words of the errors."""
    path = Path(path)
    said = words(kind)
    columns = ", ".join(said["column"] if c == "listing_id" else c for c in COLUMNS)
    delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"gold file {path} does not exist") from None
    except OSError as exc:
        raise InputError(f"cannot read gold file {path}: {exc}") from None
    rows, header = [], None
    for number, text, why in decoded_lines(raw.removeprefix(b"\xef\xbb\xbf")):
        # One physical line at a time: a quote left open is an error at its line, never a field
        # that swallows the lines after it.
        if header is None and text is not None and text.startswith("#"):
            continue  # comment lines above the header (a graded gold file's)
        fields = None if text is None else split_line(text, delimiter)
        if fields is None:
            raise InputError(f"cannot read gold file {path} line {number}: "
                             f"{why or 'not well-formed (a quote not closed on its line, or a stray carriage return)'}")
        if header is None:
            header = [name.strip() for name in fields]
            if "listing_id" not in header and "category" in header:  # a category session's graded gold file
                header = ["listing_id" if name == "category" else name for name in header]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                missing = [said["column"] if c == "listing_id" else c for c in missing]
                raise InputError(f"{path}: the header needs the columns {columns}; "
                                 f"{', '.join(missing)} missing "
                                 f"(found: {shown_text(', '.join(header)) if header else 'nothing'})")
            continue
        record = dict(zip(header, fields))
        values = {c: (record.get(c) or "").strip() for c in COLUMNS}
        if not any(values.values()):
            continue  # a blank line
        rows.append(GoldRow(number, values["query"], values["listing_id"], values["grade"]))
    if header is None:
        raise InputError(f"{path}: the file is empty; the header needs the columns {columns}")
    if not rows:
        raise InputError(f"{path} holds no gold grade: one row per query and {said['item']} (columns {columns})")
    return rows


def check_rows(path: Path, rows: list[GoldRow], shown: dict[str, set[str]],
               kind: str = "results") -> dict[str, dict[str, int]]:
    """Known grades per query text and listing, checked against ``shown`` (the listings of each
    query of the session, both groups; a category session's categories)."""
    said = words(kind)
    grades: dict[str, dict[str, int]] = defaultdict(dict)
    first_line: dict[tuple[str, str], int] = {}
    for row in rows:
        where = f"{path}, line {row.line}"
        if row.query not in shown:
            raise InputError(f"{where}: query {shown_text(row.query)} is not in the session (give its text as stored, "
                             "as qcat judge export --csv writes it)")
        if row.listing_id not in shown[row.query]:
            raise InputError(f"{where}: {said['item']} {shown_text(row.listing_id)} is not shown for query "
                             f"{shown_text(row.query)} ({said['where']})")
        if row.grade not in GRADES:
            raise InputError(f"{where}: grade {shown_text(row.grade)} is not a grade: {said['scale']}")
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
