"""Click-log ingestion: read, validate, normalize and aggregate, in DuckDB or Spark.

A click log is CSV, Parquet or JSONL with the columns ``query``, ``category`` (a taxonomy
id or a `` > ``-joined path) and optionally ``clicks`` (no such column: one click per row; with
the column, an empty count is a bad row), ``impressions`` and ``date``. A header naming a column
twice is refused. Rows that cannot be used are counted per reason and reported; with
``strict=True`` the first one raises an error naming the file and row.
Pairs with fewer than ``min_clicks`` clicks after aggregation are dropped as noise
(eBay §4.1 uses 3) and counted too.

Three things a log can hold that would otherwise change the data without a word are counted
and reported, each resolved by one rule:

* a category that is an internal node of the taxonomy, not a leaf (``internal_nodes``):
  ``other`` (default) counts its rows for an explicit ``Other`` leaf under the node
  (``A > B`` -> ``A > B > Other``, the demo catalog's rule), ``refuse`` stops with the counts,
  ``keep`` trains on the node itself;
* rows of one query as typed and one day (undated rows: one day) whose categories report
  different impressions: impressions are the query's searches, so the day counts the largest
  category's (rows of one category that day add up, clicks and impressions alike; typed variants
  that normalize alike are different searches and add up too);
* rows that repeat another row exactly (normalized query, category, date, clicks,
  impressions): they are summed like any rows, clicks and impressions alike, and counted so that
  a duplicated export shows.

Under these rules no pair has more clicks than impressions; any that did would be counted,
dropped and named in the report.

The rules are here and in :mod:`qcat.training.clicklogs.ingest_sql`, once; an engine
(:class:`qcat.training.clicklogs.ingest_engine.IngestEngine`) only reads the log and runs the SQL.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

from qcat.console.progress import task
from qcat.errors import InputError, TaxonomyError, shown
from qcat.inputs.paths import STDIN, check_file
from qcat.taxonomy import OTHER_SUFFIX, Taxonomy
from qcat.text.lines import MAX_QUERY_BYTES
from qcat.text.normalize import normalize
from qcat.training.clicklogs import ingest_sql as sql
from qcat.training.clicklogs.clicktable import ClickTable
from qcat.training.clicklogs.ingest_engine import FORMATS, IngestEngine

ENGINES = ("duckdb", "spark")

# Why a row cannot be used, in the order the checks run.
REASONS = {
    "bad_encoding": "not valid UTF-8",
    "too_long": "line is too long",
    "malformed_row": "malformed row (wrong number of fields, a quote not closed on its line, a stray carriage "
                     "return, invalid JSON, or a JSON object naming a field twice)",
    "query_not_text": "query is not a JSON string (a list, number, object or true/false)",
    "query_too_long": f"query is too long (over {MAX_QUERY_BYTES:,} bytes)",
    "empty_query": "query is empty after normalization",
    "unknown_category": "category is not in the taxonomy",
    "ambiguous_category": "category names several taxonomy nodes (a path of several ids, or one node's id and "
                          "another's path)",
    "bad_clicks": "clicks is empty or not a non-negative number",
    "bad_impressions": "impressions is not a non-negative number",
    "clicks_exceed_impressions": "clicks exceed impressions",
    "bad_date": "date is not a date",
}
MAX_EXAMPLES = 5
INTERNAL_NODE_RULES = ("other", "refuse", "keep")


@dataclass
class IngestReport:
    """What ingestion read, used, skipped (per reason) and dropped."""

    path: str
    lines: int | None = None  # physical lines of a CSV/TSV/JSONL file (None: Parquet, or not known to Spark)
    header_lines: int = 0
    blank_lines: int = 0
    rows_read: int = 0
    rows_used: int = 0
    rows_outside_dates: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, list[tuple[int | None, str]]] = field(default_factory=dict)  # row None: not known
    pairs_aggregated: int = 0
    pairs_below_min_clicks: int = 0
    clicks_below_min_clicks: float = 0.0
    pairs_over_impressions: int = 0  # pairs whose clicks exceed their impressions after aggregation: dropped
    pairs_over_examples: list[tuple[str, str, float, float]] = field(default_factory=list)
    pairs_kept: int = 0
    queries_kept: int = 0
    min_clicks: float = 3
    duplicate_rows: int = 0
    impression_conflicts: int = 0  # (query as typed, day) groups whose rows report different impressions
    impression_conflict_rows: int = 0
    impression_conflict_examples: list[tuple[str, str, float, float]] = field(default_factory=list)
    internal_nodes: str = "other"
    # per internal category the log names: (rows, clicks, the category it counts for)
    internal: dict[str, tuple[int, float, str]] = field(default_factory=dict)

    def check_lines(self) -> None:
        """The invariant: lines in the file = header + blank lines + rows used + rows outside the
        dates + rows skipped (per reason). A violation is a bug in qcat, never a user's error."""
        accounted = self.rows_used + self.rows_outside_dates + sum(self.skipped.values())
        if accounted != self.rows_read or (
                self.lines is not None and self.lines != self.header_lines + self.blank_lines + self.rows_read):
            raise AssertionError(f"{self.path}: {self.lines} lines but {self.header_lines} header + "
                                 f"{self.blank_lines} blank + {self.rows_read} rows ({accounted} used or skipped)")

    def format(self) -> str:
        where = ("" if self.lines is None else
                 f"{self.lines:,} lines ({self.header_lines} header, {self.blank_lines:,} blank), ")
        lines = [
            f"{self.path}: {where}{self.rows_read:,} rows read, {self.rows_used:,} used, "
            f"{sum(self.skipped.values()):,} skipped",
        ]
        if self.rows_outside_dates:
            lines.append(f"  {self.rows_outside_dates:,} rows outside the date range (not used)")
        lines += format_skipped(self.skipped, self.examples, REASONS)
        lines += format_internal(self.internal, self.internal_nodes)
        if self.impression_conflicts:
            examples = "; ".join(f"{shown(query)} on {day or 'no date'}: {low:g} vs {high:g}"
                              for query, day, low, high in self.impression_conflict_examples)
            lines.append(f"  {self.impression_conflicts:,} (query, day) groups ({self.impression_conflict_rows:,} rows) "
                         f"report different impressions for the same typed query in different categories; each day "
                         f"counts the largest (e.g. {examples})")
        if self.duplicate_rows:
            lines.append(f"  {self.duplicate_rows:,} rows repeat another row exactly (query, category, date, clicks, "
                         f"impressions); their clicks and impressions are summed like the others: deduplicate the log "
                         f"first if they are copies")
        if self.pairs_over_impressions:
            examples = "; ".join(f"{shown(query)} {category}: {clicks:g} clicks, {impressions:g} impressions"
                                 for query, category, clicks, impressions in self.pairs_over_examples)
            lines.append(f"  {self.pairs_over_impressions:,} (query, category) pairs have more clicks than impressions "
                         f"after aggregation; dropped (e.g. {examples})")
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


def format_skipped(skipped: Counter, examples: dict[str, list[tuple[int | None, str]]], reasons: dict[str, str]) -> list[str]:
    """One line per reason rows were skipped for, most rows first, with examples (row, value)."""
    lines, order = [], list(reasons)  # ties in the reasons' order: the engine counts them in no fixed order
    for reason, count in sorted(skipped.items(), key=lambda item: (-item[1], order.index(item[0]))):
        shown_ = ", ".join(f"row {row}: {shown(value)}" if row is not None else shown(value)
                           for row, value in examples.get(reason, []))
        lines.append(f"  skipped {count:,} rows: {reasons[reason]} (e.g. {shown_})")
    return lines


def format_internal(internal: dict[str, tuple[int, float, str]], rule: str) -> list[str]:
    """The line on rows naming internal (non-leaf) categories and what the rule did with them."""
    if not internal:
        return []
    rows = sum(r for r, _, _ in internal.values())
    listed = "; ".join(f"{node} {count:,} rows" + (f" -> {to}" if to != node else "")
                      for node, (count, _, to) in sorted(internal.items(), key=lambda x: -x[1][0])[:5])
    done = {"other": "counted for an Other leaf under each node", "keep": "kept as categories (--internal-nodes keep)",
            "refuse": "refused"}[rule]
    return [f"  {rows:,} rows name {len(internal):,} internal (non-leaf) categories, {done} (e.g. {listed})"]


def refuse_internal(internal: dict[str, tuple[int, float, str]], taxonomy: Taxonomy) -> None:
    """The ``refuse`` rule's error: the counts of rows naming internal nodes, the largest first."""
    listed = ", ".join(f"{node} ({taxonomy.path_of(node)}): {rows:,} rows"
                      for node, (rows, _, _) in sorted(internal.items(), key=lambda x: -x[1][0])[:3])
    raise InputError(f"{sum(r for r, _, _ in internal.values()):,} rows name {len(internal):,} "
                     f"internal (non-leaf) categories of the taxonomy, e.g. {listed}; map them to leaves, or use "
                     f"--internal-nodes other (an Other leaf under each) or keep")


@dataclass(frozen=True)
class IngestResult:
    table: ClickTable
    report: IngestReport
    taxonomy: Taxonomy  # the taxonomy the table's categories belong to (with any Other leaves added)


def detect_format(path: str | Path, kind: str = "click-log") -> str:
    if str(path) in STDIN:  # say what is wrong with it, not that its name has no suffix
        check_file(path)
    name = str(path).rstrip("/").rsplit("/", 1)[-1].lower().removesuffix(".gz")
    for suffix, fmt in ((".parquet", "parquet"), (".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".tsv", "tsv"), (".csv", "csv")):
        if name.endswith(suffix):
            return fmt
    raise InputError(f"{path}: cannot tell the {kind} format from the name: give a file named .csv, .tsv, .parquet "
                     f"or .jsonl (.gz after it too){', or --format (qcat data ingest)' * (kind == 'click-log')}")


def ingest(
    path: str | Path,
    taxonomy: Taxonomy,
    *,
    min_clicks: float = 3,
    strict: bool = False,
    date_from: date | str | None = None,
    date_to: date | str | None = None,
    fmt: str | None = None,
    engine: str | IngestEngine = "duckdb",
    spark_master: str | None = None,
    internal_nodes: str = "other",
) -> IngestResult:
    """Read, validate and aggregate a click log into a :class:`ClickTable`.

    ``date_from`` (inclusive) and ``date_to`` (exclusive) keep only rows dated in that
    range; rows without a date are then outside it. ``engine`` is ``"duckdb"`` (default),
    ``"spark"`` (a session on ``spark_master``, default ``local[2]``) or an engine object,
    which the caller then closes. ``path`` may be any URI the engine reads (Spark: s3a://...).
    ``internal_nodes`` is the rule for rows naming a non-leaf category (module docstring).
    """
    if internal_nodes not in INTERNAL_NODE_RULES:
        raise InputError(f"--internal-nodes {internal_nodes!r}: expected one of {', '.join(INTERNAL_NODE_RULES)}")
    path = str(path) if "://" in str(path) else Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(f"unknown click-log format {fmt!r}; expected one of {', '.join(FORMATS)}")
    from_day, to_day = _as_date(date_from), _as_date(date_to)
    owned = isinstance(engine, str)
    try:
        runner = make_engine(engine, spark_master) if owned else engine
        try:
            with task(f"ingesting {path}"):
                return _ingest(runner, str(path), taxonomy, fmt, min_clicks, strict, from_day, to_day, internal_nodes)
        finally:
            if owned:
                runner.close()
    except InputError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise InputError(f"{path}: {exc}") from None




def make_engine(name: str, spark_master: str | None = None) -> IngestEngine:
    if name == "duckdb":
        from qcat.training.clicklogs.ingest_duckdb import DuckDBEngine

        return DuckDBEngine()
    if name == "spark":
        from qcat.training.clicklogs.ingest_spark import SparkEngine

        return SparkEngine.start(spark_master or "local[2]")
    raise InputError(f"unknown ingestion engine {name!r}; expected one of {', '.join(ENGINES)}")


def _ingest(engine: IngestEngine, path: str, taxonomy: Taxonomy, fmt: str, min_clicks: float, strict: bool,
            date_from: date | None, date_to: date | None, internal_nodes: str) -> IngestResult:
    report = IngestReport(path=path, min_clicks=min_clicks, internal_nodes=internal_nodes)
    engine.read(path, fmt)
    engine.map_queries(normalize)
    category_map, taxonomy = _category_map(engine.distinct("category"), taxonomy, internal_nodes)
    engine.register("category_map", category_map)
    engine.view("classified", sql.classify_sql(date_from, date_to, clicks_column="clicks" in engine.present))
    if strict:
        first = engine.rows(sql.FIRST_REJECT_SQL)
        if first:
            row, reason, value = first[0]
            where = f" row {row}" if engine.row_numbers else ""
            raise InputError(f"{path}{where}: {REASONS[reason]}: {shown('' if value is None else value)}")
    engine.materialize("groups", sql.GROUPS_SQL)
    for reason, in_range, rows in engine.rows(sql.ROW_COUNTS_SQL):
        rows = int(rows)
        report.rows_read += rows
        if reason is not None:
            report.skipped[reason] += rows
        elif in_range:
            report.rows_used += rows
        else:
            report.rows_outside_dates += rows
    report.lines, report.header_lines, report.blank_lines = engine.lines, engine.header_lines, engine.blank_lines
    report.check_lines()
    if report.skipped:
        examples = sorted(engine.rows(sql.EXAMPLES_SQL.format(limit=MAX_EXAMPLES)), key=lambda r: (r[0], r[1]))
        for reason, row, value in examples:
            report.examples.setdefault(reason, []).append(
                (int(row) if engine.row_numbers else None, "" if value is None else str(value)))
    engine.view("used", sql.USED_SQL)
    engine.materialize("variant_days", sql.VARIANT_DAYS_SQL)
    engine.materialize("query_days", sql.QUERY_DAYS_SQL)
    _check_rows(engine, report, category_map, taxonomy)
    engine.view("pairs", sql.PAIRS_SQL)
    table = _aggregate(engine, min_clicks, report)
    return IngestResult(table=table, report=report, taxonomy=taxonomy)


def _check_rows(engine: IngestEngine, report: IngestReport, category_map: dict, taxonomy: Taxonomy) -> None:
    """Count duplicate rows, conflicting impressions and rows naming internal nodes; refuse the
    last under the ``refuse`` rule."""
    report.duplicate_rows = int(engine.rows(sql.DUPLICATES_SQL)[0][0])
    groups, rows = engine.rows(sql.CONFLICTS_SQL)[0]
    report.impression_conflicts, report.impression_conflict_rows = int(groups), int(rows)
    if groups:
        report.impression_conflict_examples = [
            (query, None if day is None else str(day)[:10], float(low), float(high))
            for query, day, low, high in engine.rows(sql.CONFLICT_EXAMPLES_SQL.format(limit=3))]
    counted_as = {named: to for named, to, internal in zip(category_map["named_id"], category_map["category_id"],
                                                          category_map["internal"]) if internal}
    if not counted_as:
        return
    for named, rows, clicks in engine.rows(sql.NAMED_SQL):
        if named in counted_as:
            report.internal[named] = (int(rows), float(clicks), counted_as[named])
    if report.internal and report.internal_nodes == "refuse":
        refuse_internal(report.internal, taxonomy)


def _as_date(value: date | str | None) -> date | None:
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InputError(f"date {value!r} is not an ISO date (YYYY-MM-DD)") from None


def _category_map(raw_categories: list[str], taxonomy: Taxonomy, internal_nodes: str) -> tuple[dict[str, np.ndarray], Taxonomy]:
    """Resolve each distinct category once, on the driver (categories are few), and apply the
    internal-node rule: returns the map and the taxonomy its categories belong to. A category
    ``<id>/other`` of an internal node names that node's Other leaf (as qcat writes it)."""
    named, ambiguous, names_other_leaf = [], [], set()  # the last: positions written <node id>/other
    for position, category in enumerate(raw_categories):
        text = category.strip()
        try:
            node = taxonomy.resolve(text)
        except TaxonomyError:
            named.append(None)
            ambiguous.append(True)
            continue
        parent = text.removesuffix(OTHER_SUFFIX)
        if node is None and parent != text and parent in taxonomy and not taxonomy.is_leaf(parent):
            node = parent
            names_other_leaf.add(position)
        named.append(node)
        ambiguous.append(False)
    internal = [node is not None and not taxonomy.is_leaf(node) and position not in names_other_leaf
                for position, node in enumerate(named)]
    to_other = names_other_leaf | ({p for p, is_internal in enumerate(internal) if is_internal}
                                   if internal_nodes == "other" else set())
    taxonomy, other_of = taxonomy.with_other_leaves(sorted({named[p] for p in to_other}))
    counted_as = [other_of[node] if p in to_other else node for p, node in enumerate(named)]
    named = [other_of[node] if p in names_other_leaf else node for p, node in enumerate(named)]
    return {
        "raw": np.asarray(raw_categories, dtype=object),
        "named_id": np.asarray(named, dtype=object),
        "category_id": np.asarray(counted_as, dtype=object),
        "ambiguous": np.asarray(ambiguous, dtype=bool),
        "internal": np.asarray(internal, dtype=bool),
    }, taxonomy


def _aggregate(engine: IngestEngine, min_clicks: float, report: IngestReport) -> ClickTable:
    pairs, below, below_clicks, over = engine.rows(sql.pair_counts_sql(min_clicks))[0]
    report.pairs_aggregated, report.pairs_below_min_clicks = int(pairs), int(below)
    report.clicks_below_min_clicks = float(below_clicks)
    report.pairs_over_impressions = int(over)
    if over:
        report.pairs_over_examples = [(query, category, float(clicks), float(impressions)) for query, category, clicks,
                                      impressions in engine.rows(sql.OVER_EXAMPLES_SQL.format(limit=3))]
    kept = engine.columns(sql.kept_sql(min_clicks))
    n = report.pairs_kept = len(kept["query"])
    # Rows come sorted by query: a new query starts where it differs from the row before
    # (linear; no second sort of the strings).
    query = kept["query"]
    starts = np.ones(n, dtype=bool)
    if n > 1:
        starts[1:] = query[1:] != query[:-1]
    pair_query = np.cumsum(starts) - 1
    queries = query[starts]
    report.queries_kept = len(queries)
    categories = np.asarray(sorted(set(kept["category_id"])), dtype=object)  # few
    index = {c: i for i, c in enumerate(categories)}
    pair_category = np.fromiter((index[c] for c in kept["category_id"]), dtype=np.int32, count=n)
    return ClickTable(
        queries=queries.astype(object),
        categories=categories,
        pair_query=pair_query.astype(np.int32),
        pair_category=pair_category,
        clicks=kept["clicks"].astype(np.float64),
        impressions=kept["impressions"].astype(np.float64),
        query_impressions=kept["query_impressions"][starts].astype(np.float64),
    )
