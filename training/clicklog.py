"""Click-log ingestion: read, validate, normalize and aggregate (in DuckDB SQL).

A click log is CSV, Parquet or JSONL with the columns ``query``, ``category`` (a taxonomy
id or a `` > ``-joined path) and optionally ``clicks`` (absent: one click per row),
``impressions`` and ``date``. Rows that cannot be used are counted per reason and
reported; with ``strict=True`` the first one raises an error naming the file and row.
Pairs with fewer than ``min_clicks`` clicks after aggregation are dropped as noise
(eBay §4.1 uses 3) and counted too.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import duckdb
import numpy as np

from qcat.errors import InputError, TaxonomyError
from qcat.normalize import normalize
from qcat.taxonomy import Taxonomy
from training.clicktable import ClickTable

COLUMNS = ("query", "category", "clicks", "impressions", "date")
REQUIRED = ("query", "category")
FORMATS = ("csv", "tsv", "parquet", "jsonl")

# Why a row cannot be used, in the order the checks run.
REASONS = {
    "bad_encoding": "not valid UTF-8",
    "malformed_row": "malformed row (wrong number of fields, a stray carriage return, or invalid JSON)",
    "empty_query": "query is empty after normalization",
    "unknown_category": "category is not in the taxonomy",
    "ambiguous_category": "category path belongs to several taxonomy ids",
    "bad_clicks": "clicks is not a non-negative number",
    "bad_impressions": "impressions is not a non-negative number",
    "clicks_exceed_impressions": "clicks exceed impressions",
    "bad_date": "date is not a date",
}
MAX_EXAMPLES = 5


@dataclass
class IngestReport:
    """What ingestion read, used, skipped (per reason) and dropped."""

    path: str
    rows_read: int = 0
    rows_used: int = 0
    rows_outside_dates: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    pairs_aggregated: int = 0
    pairs_below_min_clicks: int = 0
    clicks_below_min_clicks: float = 0.0
    pairs_kept: int = 0
    queries_kept: int = 0
    min_clicks: float = 3

    def format(self) -> str:
        lines = [
            f"{self.path}: {self.rows_read:,} rows read, {self.rows_used:,} used, "
            f"{sum(self.skipped.values()):,} skipped",
        ]
        if self.rows_outside_dates:
            lines.append(f"  {self.rows_outside_dates:,} rows outside the date range (not used)")
        for reason, count in self.skipped.most_common():
            shown = ", ".join(f"row {row}: {value!r}" for row, value in self.examples.get(reason, []))
            lines.append(f"  skipped {count:,} rows: {REASONS[reason]} (e.g. {shown})")
        lines.append(
            f"  {self.pairs_aggregated:,} (query, category) pairs; {self.pairs_below_min_clicks:,} with fewer "
            f"than {self.min_clicks:g} clicks dropped ({self.clicks_below_min_clicks:,.0f} clicks); "
            f"{self.pairs_kept:,} pairs of {self.queries_kept:,} queries kept"
        )
        return "\n".join(lines)

    def nothing_kept(self) -> str | None:
        """Why no pair was kept, or None when some were."""
        if self.pairs_kept:
            return None
        if self.rows_read == 0:
            return "the log holds no data rows"
        if self.rows_used == 0:
            why = "outside the date range or skipped" if self.rows_outside_dates else "skipped (reasons above)"
            return f"no usable rows: all {self.rows_read:,} rows were {why}"
        return (f"no (query, category) pair has {self.min_clicks:g} or more clicks; for a log of single "
                f"clicks without counts, use --min-clicks 1")


@dataclass(frozen=True)
class IngestResult:
    table: ClickTable
    report: IngestReport


def detect_format(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    for suffix, fmt in ((".parquet", "parquet"), (".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".tsv", "tsv"), (".csv", "csv")):
        if name.endswith(suffix):
            return fmt
    raise InputError(f"{path}: cannot tell the click-log format from the name; use .csv, .tsv, .parquet or .jsonl")


@dataclass
class _RawRows:
    """Rows as read: string columns (None where absent) plus data row numbers."""

    row: list[int] = field(default_factory=list)
    columns: dict[str, list] = field(default_factory=lambda: {c: [] for c in COLUMNS})
    bad: list[tuple[int, str, str]] = field(default_factory=list)  # (row, reason, text)

    def add(self, row: int, record: dict) -> None:
        self.row.append(row)
        for column in COLUMNS:
            value = record.get(column)
            self.columns[column].append(None if value is None else str(value))


def _decoded_lines(raw: bytes, rows: _RawRows, first_data_line: int):
    """Yield (line_number, text) for each line that decodes as UTF-8; record the others."""
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            if number >= first_data_line:
                rows.bad.append((number, "bad_encoding", line.decode("utf-8", "replace")[:80]))
                continue
            raise InputError(f"line {number} (the header) is not valid UTF-8") from None
        yield number, text.removesuffix("\r")


def _read_delimited(raw: bytes, delimiter: str) -> _RawRows:
    rows = _RawRows()
    lines = _decoded_lines(raw.removeprefix(b"\xef\xbb\xbf"), rows, first_data_line=2)
    numbered, texts = [], []

    def text_lines():
        for number, text in lines:
            numbered.append(number)
            texts.append(text)
            yield text + "\n"  # with its end, so a quoted field may hold a newline

    reader = csv.reader(text_lines(), delimiter=delimiter)
    header = next(reader, None)
    if header is None:
        return rows
    header = [h.strip().lower() for h in header]
    _check_header(header)
    while True:
        first_line = reader.line_num  # lines read before this record: it starts on the next
        try:
            record = next(reader, None)
        except csv.Error:  # e.g. a bare carriage return inside an unquoted field
            rows.bad.append((numbered[first_line], "malformed_row", texts[first_line][:80]))
            continue
        if record is None:
            break
        number = numbered[first_line]
        if not record or (len(record) == 1 and not record[0].strip()):
            continue
        if len(record) != len(header):
            rows.bad.append((number, "malformed_row", delimiter.join(record)[:80]))
            continue
        rows.add(number, dict(zip(header, record)))
    return rows


def _read_jsonl(raw: bytes) -> _RawRows:
    rows = _RawRows()
    seen_columns: set[str] = set()
    for number, text in _decoded_lines(raw, rows, first_data_line=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            rows.bad.append((number, "malformed_row", text[:80]))
            continue
        if not isinstance(record, dict):
            rows.bad.append((number, "malformed_row", text[:80]))
            continue
        seen_columns.update(record)
        rows.add(number, {k.lower(): v for k, v in record.items()})
    if rows.row:
        _check_header([c.lower() for c in seen_columns])
    return rows


def _check_header(header: list[str]) -> None:
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)} (found: {', '.join(header) or 'none'})")


def _read_parquet(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Create the ``raw`` table straight from Parquet (row numbers from the file)."""
    try:
        names = [r[0].lower() for r in con.execute("describe select * from read_parquet(?)", [str(path)]).fetchall()]
    except duckdb.Error as exc:
        raise InputError(f"cannot read Parquet: {str(exc).splitlines()[0]}") from None
    _check_header(names)
    select = ", ".join(
        f'cast("{c}" as varchar) as "{c}"' if c in names else f"cast(null as varchar) as \"{c}\"" for c in COLUMNS
    )
    con.execute(
        f"create table raw as select cast(file_row_number + 1 as bigint) as row, {select} "
        "from read_parquet(?, file_row_number = true)",
        [str(path)],
    )


def ingest(
    path: str | Path,
    taxonomy: Taxonomy,
    *,
    min_clicks: float = 3,
    strict: bool = False,
    date_from: date | str | None = None,
    date_to: date | str | None = None,
    fmt: str | None = None,
) -> IngestResult:
    """Read, validate and aggregate a click log into a :class:`ClickTable`.

    ``date_from`` (inclusive) and ``date_to`` (exclusive) keep only rows dated in that
    range; rows without a date are then outside it.
    """
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(f"unknown click-log format {fmt!r}; expected one of {', '.join(FORMATS)}")
    try:
        return _ingest(path, taxonomy, fmt, min_clicks, strict, date_from, date_to)
    except InputError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise InputError(f"{path}: {exc}") from None


def _ingest(path, taxonomy, fmt, min_clicks, strict, date_from, date_to) -> IngestResult:
    con = duckdb.connect()
    report = IngestReport(path=str(path), min_clicks=min_clicks)
    bad: list[tuple[int, str, str]] = []
    if fmt == "parquet":
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        _read_parquet(con, path)
    else:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from None
        if path.suffix == ".gz":
            import gzip
            import zlib

            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(f"{path}: its name ends in .gz but it is not a valid gzip file ({exc})") from None
        rows = _read_jsonl(raw) if fmt == "jsonl" else _read_delimited(raw, "\t" if fmt == "tsv" else ",")
        bad = rows.bad
        arrays = {"row": np.asarray(rows.row, dtype=np.int64)}
        arrays.update({c: np.asarray(v, dtype=object) for c, v in rows.columns.items()})
        con.execute("create table raw as select * from arrays")
    _map_values(con, taxonomy)
    con.execute(_CLASSIFY_SQL, [_as_date(date_from), _as_date(date_to)])
    bad += [(int(r), reason, "" if v is None else str(v)) for r, reason, v in con.execute(
        "select row, reason, value from classified where reason is not null order by row").fetchall()]
    bad.sort()
    if strict and bad:
        row, reason, value = bad[0]
        raise InputError(f"{path} row {row}: {REASONS[reason]}: {value!r}")
    report.rows_read = con.execute("select count(*) from raw").fetchone()[0] + sum(1 for b in bad if b[1] in ("bad_encoding", "malformed_row"))
    for row, reason, value in bad:
        report.skipped[reason] += 1
        examples = report.examples.setdefault(reason, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append((row, value))
    report.rows_outside_dates = con.execute("select count(*) from classified where reason is null and not in_range").fetchone()[0]
    report.rows_used = con.execute("select count(*) from classified where reason is null and in_range").fetchone()[0]
    table = _aggregate(con, min_clicks, report)
    return IngestResult(table=table, report=report)


def _as_date(value: date | str | None) -> date | None:
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InputError(f"date {value!r} is not an ISO date (YYYY-MM-DD)") from None


def _map_values(con: duckdb.DuckDBPyConnection, taxonomy: Taxonomy) -> None:
    """Normalize each distinct query and resolve each distinct category once, in Python,
    so that training and serving share the one normalizer."""
    raw_queries = [r[0] for r in con.execute("select distinct query from raw where query is not null").fetchall()]
    query_map = {"raw": np.asarray(raw_queries, dtype=object), "normalized": np.asarray([normalize(q) for q in raw_queries], dtype=object)}
    raw_categories = [r[0] for r in con.execute("select distinct category from raw where category is not null").fetchall()]
    resolved, ambiguous = [], []
    for category in raw_categories:
        try:
            resolved.append(taxonomy.resolve(category.strip()))
            ambiguous.append(False)
        except TaxonomyError:
            resolved.append(None)
            ambiguous.append(True)
    category_map = {
        "raw": np.asarray(raw_categories, dtype=object),
        "category_id": np.asarray(resolved, dtype=object),
        "ambiguous": np.asarray(ambiguous, dtype=bool),
    }
    con.execute("create table query_map as select * from query_map")
    con.execute("create table category_map as select * from category_map")


_CLASSIFY_SQL = """
create table classified as
with typed as (
    select r.row, r.query, r.category, r.clicks as clicks_text, r.impressions as impressions_text,
           r.date as date_text, q.normalized, c.category_id, coalesce(c.ambiguous, false) as ambiguous,
           case when r.clicks is null or trim(r.clicks) = '' then 1.0 else try_cast(trim(r.clicks) as double) end as clicks,
           case when r.impressions is null or trim(r.impressions) = '' then null
                else try_cast(trim(r.impressions) as double) end as impressions,
           case when r.date is null or trim(r.date) = '' then null else try_cast(trim(r.date) as date) end as day
    from raw r
    left join query_map q on q.raw = r.query
    left join category_map c on c.raw = r.category
)
select *,
    case
        when normalized is null or normalized = '' then 'empty_query'
        when ambiguous then 'ambiguous_category'
        when category_id is null then 'unknown_category'
        when clicks is null or clicks < 0 or isnan(clicks) or isinf(clicks) then 'bad_clicks'
        when impressions_text is not null and trim(impressions_text) <> ''
             and (impressions is null or impressions < 0 or isnan(impressions) or isinf(impressions)) then 'bad_impressions'
        when impressions is not null and clicks > impressions then 'clicks_exceed_impressions'
        when date_text is not null and trim(date_text) <> '' and day is null then 'bad_date'
    end as reason,
    case
        when normalized is null or normalized = '' then query
        when ambiguous or category_id is null then category
        when clicks is null or clicks < 0 or isnan(clicks) or isinf(clicks) then clicks_text
        when impressions_text is not null and trim(impressions_text) <> ''
             and (impressions is null or impressions < 0 or isnan(impressions) or isinf(impressions)) then impressions_text
        when impressions is not null and clicks > impressions then clicks_text || ' > ' || impressions_text
        else date_text
    end as value,
    coalesce(($1::date is null or day >= $1::date) and ($2::date is null or day < $2::date), false) as in_range
from typed
"""


def _aggregate(con: duckdb.DuckDBPyConnection, min_clicks: float, report: IngestReport) -> ClickTable:
    con.execute("""
        create table pairs as
        select normalized as query, category_id, sum(clicks) as clicks,
               sum(impressions) as impressions, count(impressions) as rows_with_impressions, count(*) as rows
        from classified where reason is null and in_range
        group by all
    """)
    con.execute("""
        create table demand as
        select query, coalesce(max(case when rows_with_impressions = rows then impressions end), sum(clicks)) as query_impressions
        from pairs group by query
    """)
    report.pairs_aggregated, = con.execute("select count(*) from pairs").fetchone()
    below = con.execute("select count(*), coalesce(sum(clicks), 0) from pairs where clicks < ?", [min_clicks]).fetchone()
    report.pairs_below_min_clicks, report.clicks_below_min_clicks = int(below[0]), float(below[1])
    kept = con.execute("""
        select p.query, p.category_id, p.clicks,
               case when p.rows_with_impressions = p.rows then p.impressions end as impressions, d.query_impressions
        from pairs p join demand d using (query)
        where p.clicks >= ?
        order by p.query, p.clicks desc, p.category_id
    """, [min_clicks]).fetchnumpy()
    report.pairs_kept = len(kept["query"])
    queries, pair_query = np.unique(np.asarray(kept["query"], dtype=object), return_inverse=True)
    categories, pair_category = np.unique(np.asarray(kept["category_id"], dtype=object), return_inverse=True)
    report.queries_kept = len(queries)
    first_of_query = np.searchsorted(pair_query, np.arange(len(queries)))
    impressions = np.ma.filled(np.ma.asarray(kept["impressions"]).astype(np.float64), np.nan)
    query_impressions = np.ma.filled(np.ma.asarray(kept["query_impressions"]).astype(np.float64), np.nan)
    return ClickTable(
        queries=queries.astype(object),
        categories=categories.astype(object),
        pair_query=pair_query.astype(np.int32),
        pair_category=pair_category.astype(np.int32),
        clicks=np.asarray(kept["clicks"], dtype=np.float64),
        impressions=impressions,
        query_impressions=query_impressions[first_of_query] if len(queries) else np.zeros(0),
    )
