"""Reading golden data: qcat's CSV and the ESCI judgment JSON.

Bad rows are skipped and counted per reason (see :class:`ImportReport`); with
``strict=True`` the first one raises an error naming the file and row instead. A file
that cannot be read at all, or lacks a required column, is always an error.

qcat's CSV: ``query, listing_id, relevance`` and optionally ``grade`` (0–3 or a grade
name), ``judge`` and ``simulated`` (0/1). ``relevance`` may be left empty where a grade
is given: the pair is then relevant when the grade is Good or better.

ESCI (the OpenSearch judgment export): ``{"judgmentRatings": [{"query": ..., "ratings":
[{"docId": ..., "rating": "100.000"}, ...]}]}``; ratings 100/10/1/0 (Exact, Substitute,
Complement, Irrelevant) become Excellent/Good/Acceptable/Off-topic.
"""

from __future__ import annotations

import json
from pathlib import Path

from qcat.errors import InputError, shown
from qcat.evaluation.golden.golden_set import GRADE_NAMES, NO_GRADE, RELEVANT_GRADE, GoldenSet, ImportReport, from_rows
from qcat.inputs import COMMENTS_NONE, REFUSE, SKIP, Column, FileSchema, read_bytes, read_table
from qcat.text.normalize import normalize

FORMATS = ("csv", "esci")
ESCI_GRADES = {100.0: 3, 10.0: 2, 1.0: 1, 0.0: 0}
ESCI_JUDGE = "esci"


def _read_text(path: Path) -> str:
    """A whole JSON document (ESCI), through the input layer's path, gzip and byte order mark rules."""
    _, raw, _ = read_bytes(path, "--golden")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"golden data {path} is not valid UTF-8") from None


def detect_format(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    return "esci" if name.endswith(".json") else "csv"


def load_golden(path: str | Path, fmt: str | None = None, strict: bool = False) -> GoldenSet:
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(f"unknown golden data format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return read_esci(path, strict) if fmt == "esci" else read_csv(path, strict)


class _Rows:
    """Collects validated rows; a bad one is counted, or raised when strict."""

    def __init__(self, path: Path, strict: bool):
        self.path, self.strict = path, strict
        self.report = ImportReport(str(path))
        self.rows: list[tuple[str, str, int, int, str, bool]] = []

    def bad(self, where: str, reason: str, value: object) -> None:
        if self.strict:
            raise InputError(f"{self.path}{where if where.startswith(':') else ' ' + where}: {reason} ({shown(value)})")
        self.report.skip(reason, f"{where}: {shown(value)}")

    def add(self, where: str, query: str, listing_id: str, relevance: int, grade: int, judge: str, simulated: bool) -> None:
        normalized = normalize(query)
        if not normalized:
            return self.bad(where, "query is empty after normalization", query)
        if not listing_id.strip():
            return self.bad(where, "listing id is empty", listing_id)
        self.rows.append((normalized, listing_id.strip(), relevance, grade, judge, simulated))


def _grade(text: str) -> int | None:
    text = text.strip()
    if text == "":
        return NO_GRADE
    for i, name in enumerate(GRADE_NAMES):
        if text.lower() == name.lower():
            return i
    return int(text) if text in ("0", "1", "2", "3") else None


GOLDEN_CSV = FileSchema(
    kind="golden CSV", flag="--golden", delimiter=",", comments=COMMENTS_NONE, match_queries=False,
    columns=(Column("query", "query", True, "the query judged (normalized)"),
             Column("listing_id", "text", False, "the listing judged (required in the header)"),
             Column("relevance", "choice", False, "1 relevant, 0 not (empty: Good or better grade)", choices=("0", "1")),
             Column("grade", "text", False, "0-3 or a grade name (Off-topic .. Excellent)"),
             Column("judge", "text", False, "who judged"),
             Column("simulated", "choice", False, "1 for a simulated judgment", choices=("0", "1"))))
# The layer's reason keys, as the import report words them.
GOLDEN_REASONS = {"empty_query": "query is empty after normalization", "query_too_long": "query is too long",
                  "empty_listing_id": "listing id is empty", "bad_relevance": "relevance is not 0 or 1",
                  "bad_simulated": "simulated is not 0 or 1", "wrong_fields": "wrong number of fields",
                  "malformed_row": "not well-formed CSV (a quote not closed on its line)",
                  "bad_encoding": "not valid UTF-8", "too_long": "line is too long"}


def read_csv(path: Path, strict: bool = False) -> GoldenSet:
    """Golden judgments from CSV (:data:`GOLDEN_CSV`), read through the input layer: bad rows are
    counted per reason, or with ``strict`` the first one is an error naming its file and line."""
    table = read_table(path, GOLDEN_CSV, on_bad=REFUSE if strict else SKIP, allow_empty=True)
    missing = [name for name in ("listing_id", "relevance") if name not in table.header]
    if missing:
        raise InputError(f"golden CSV {path} lacks columns {', '.join(missing)} "
                         "(expected query, listing_id, relevance[, grade, judge, simulated])")
    rows = _Rows(path, strict)
    rows.report.rows_read = len(table.rows) + len(table.skipped)
    for skipped in table.skipped:
        rows.report.skip(GOLDEN_REASONS.get(skipped.reason, skipped.reason), f"line {skipped.line}: {skipped.why}")
    for row in table.rows:
        where = f":{row.line}"
        if row["listing_id"] is None:
            rows.bad(where, "listing id is empty", "")
            continue
        grade = _grade(str(row["grade"] or ""))
        if grade is None:
            rows.bad(where, "grade is not 0-3 or a grade name", row["grade"])
            continue
        relevance_text = row["relevance"]
        if relevance_text is not None:
            relevance = int(relevance_text)
        elif grade != NO_GRADE:
            relevance = int(grade >= RELEVANT_GRADE)
        else:
            rows.bad(where, "relevance is not 0 or 1", "")
            continue
        rows.add(where, row.query.normalized, str(row["listing_id"]), relevance, grade, str(row["judge"] or ""),
                 row["simulated"] == "1")
    return from_rows(rows.rows, rows.report)


def read_esci(path: Path, strict: bool = False) -> GoldenSet:
    try:
        document = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"golden data {path} is not valid JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("judgmentRatings"), list):
        raise InputError(f"golden data {path} has no \"judgmentRatings\" list (is it an ESCI judgment export?)")
    rows = _Rows(path, strict)
    for q, entry in enumerate(document["judgmentRatings"]):
        where = f"judgmentRatings[{q}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("query"), str) or not isinstance(entry.get("ratings"), list):
            rows.report.rows_read += 1
            rows.bad(where, "entry lacks a query string or a ratings list", entry if not isinstance(entry, dict) else
                     {k: entry[k] for k in list(entry)[:2]})
            continue
        for r, rating in enumerate(entry["ratings"]):
            rows.report.rows_read += 1
            at = f"{where}.ratings[{r}]"
            doc_id = rating.get("docId") if isinstance(rating, dict) else None
            if not isinstance(doc_id, str):
                rows.bad(at, "rating lacks a docId string", rating)
                continue
            try:
                grade = ESCI_GRADES.get(float(rating.get("rating")))
            except (TypeError, ValueError):
                grade = None
            if grade is None:
                rows.bad(at, "rating is not one of 100, 10, 1, 0", rating.get("rating"))
                continue
            rows.add(at, entry["query"], doc_id, int(grade >= RELEVANT_GRADE), grade, ESCI_JUDGE, False)
    return from_rows(rows.rows, rows.report)
