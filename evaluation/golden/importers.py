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

import gzip
import json
from pathlib import Path

from qcat.errors import InputError, shown
from qcat.evaluation.golden.golden_set import GRADE_NAMES, NO_GRADE, RELEVANT_GRADE, GoldenSet, ImportReport, from_rows
from qcat.lines import split_line
from qcat.normalize import normalize

FORMATS = ("csv", "esci")
ESCI_GRADES = {100.0: 3, 10.0: 2, 1.0: 1, 0.0: 0}
ESCI_JUDGE = "esci"


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        return raw.decode("utf-8-sig")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read golden data {path}: {exc}") from None
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
            raise InputError(f"{self.path} {where}: {reason} ({shown(value)})")
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


def read_csv(path: Path, strict: bool = False) -> GoldenSet:
    """Golden judgments from CSV, one physical line at a time (a quote left open is one bad row at its
    line, never a field that swallows the lines after it)."""
    lines = _read_text(path).split("\n")
    header = [name.strip() for name in (split_line(lines[0].removesuffix("\r"), ",") or [])]
    missing = [c for c in ("query", "listing_id", "relevance") if c not in header]
    if missing:
        raise InputError(f"golden CSV {path} lacks columns {', '.join(missing)} "
                         "(expected query, listing_id, relevance[, grade, judge, simulated])")
    rows = _Rows(path, strict)
    for line, text in enumerate(lines[1:], start=2):
        text = text.removesuffix("\r")
        if not text.strip():
            continue
        rows.report.rows_read += 1
        where = f"row {line}"
        fields = split_line(text, ",")
        if fields is None:
            rows.bad(where, "not well-formed CSV (a quote not closed on its line, or a stray carriage return)", text)
            continue
        if len(fields) != len(header):
            rows.bad(where, "wrong number of fields", text)
            continue
        row = dict(zip(header, fields))
        grade = _grade(row.get("grade") or "")
        if grade is None:
            rows.bad(where, "grade is not 0-3 or a grade name", row["grade"])
            continue
        relevance_text = row["relevance"].strip()
        if relevance_text in ("0", "1"):
            relevance = int(relevance_text)
        elif relevance_text == "" and grade != NO_GRADE:
            relevance = int(grade >= RELEVANT_GRADE)
        else:
            rows.bad(where, "relevance is not 0 or 1", row["relevance"])
            continue
        simulated_text = (row.get("simulated") or "0").strip()
        if simulated_text not in ("0", "1"):
            rows.bad(where, "simulated is not 0 or 1", row["simulated"])
            continue
        rows.add(where, row["query"], row["listing_id"], relevance, grade, (row.get("judge") or "").strip(),
                 simulated_text == "1")
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
