"""The one definition of click-log classification and aggregation, in SQL both engines run.

Every statement here is written in the subset of SQL that DuckDB and Spark SQL both accept
(no ``::`` casts, no ``group by all``, no ``isinf``, no parameters: the few values are
formatted as literals by :func:`date_literal` and :func:`double_literal`, which accept only
dates and finite numbers). The one function the dialects spell differently, a regular
expression match, is called ``rlike(text, pattern)`` as in Spark; the DuckDB engine defines
it as a macro (:data:`DUCKDB_MACROS`). Patterns hold no backslash (Spark's string literals
would unescape it).

Each engine provides three relations:

* ``raw``: ``row`` (bigint, for ordering examples), ``query``, ``category``, ``clicks``,
  ``impressions``, ``date`` (all text, null where absent), and ``bad`` / ``bad_value``: the
  reason and text of a row the reader could not decode or split (``bad_encoding``,
  ``malformed_row``), null otherwise;
* ``query_map``: ``raw`` -> ``normalized``, from :func:`qcat.text.normalize.normalize`, and ``bytes``,
  the query's size in UTF-8 (a query over :data:`qcat.text.lines.MAX_QUERY_BYTES` is too long);
* ``category_map``: ``raw`` -> ``named_id`` (the taxonomy id the log names, null if unknown),
  ``category_id`` (the category it counts for once the internal-node rule is applied),
  ``ambiguous``.
"""

from __future__ import annotations

import math
from datetime import date

from qcat.text.lines import MAX_QUERY_BYTES

# Numbers as both engines' casts read them alike: Spark alone would take "1.5d" or "Infinity",
# DuckDB alone "1_000"; either would read "nan". Anything else is a bad value.
NUMBER_PATTERN = "^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$"
# YYYY-MM-DD, optionally followed by a time (a timestamp column read as text).
DATE_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T].*)?$"

DUCKDB_MACROS = "create or replace temp macro rlike(text, pattern) as regexp_matches(text, pattern)"


def date_literal(value: date) -> str:
    if not isinstance(value, date):
        raise TypeError(f"expected a date, got {value!r}")
    return f"date '{value.isoformat()}'"


def double_literal(value: float) -> str:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return f"cast({value!r} as double)"


def _number(text: str) -> str:
    """A text column as a double: null when it is not a number (blank handled by callers)."""
    return f"case when rlike(trim({text}), '{NUMBER_PATTERN}') then try_cast(trim({text}) as double) end"


def _finite_non_negative(value: str) -> str:
    # NaN sorts above infinity in both engines, so this also rejects NaN.
    return f"({value} >= 0 and {value} < cast('Infinity' as double))"


def classify_sql(date_from: date | None, date_to: date | None, clicks_column: bool = True) -> str:
    """Each row of ``raw`` with its typed values, ``reason`` (a key of REASONS, null if usable),
    ``value`` (the offending text) and ``in_range`` (inside [date_from, date_to)). A log without a
    clicks column (``clicks_column`` false) counts one click a row; in a log with one, an empty
    clicks cell is a bad count, never a default."""
    bounds = ([f"day >= {date_literal(date_from)}"] if date_from else []) + \
             ([f"day < {date_literal(date_to)}"] if date_to else [])
    in_range = f"coalesce({' and '.join(bounds)}, false)" if bounds else "true"
    impressions_given = "impressions_text is not null and trim(impressions_text) <> ''"
    bad_clicks = f"clicks is null or not {_finite_non_negative('clicks')}"
    bad_impressions = f"{impressions_given} and (impressions is null or not {_finite_non_negative('impressions')})"
    exceed = "impressions is not null and clicks > impressions"
    bad_date = "date_text is not null and trim(date_text) <> '' and day is null"
    empty = "normalized is null or normalized = ''"
    too_long = f"query_bytes > {MAX_QUERY_BYTES}"
    return f"""
with typed as (
    select /*+ BROADCAST(c) */ r.row, r.bad, r.bad_value, r.query, r.category,
           r.clicks as clicks_text, r.impressions as impressions_text, r.date as date_text,
           q.normalized, q.bytes as query_bytes, c.category_id, c.named_id, coalesce(c.ambiguous, false) as ambiguous,
           case when r.clicks is null or trim(r.clicks) = ''
                then {'cast(null as double)' if clicks_column else 'cast(1 as double)'}
                else {_number('r.clicks')} end as clicks,
           case when r.impressions is null or trim(r.impressions) = '' then cast(null as double)
                else {_number('r.impressions')} end as impressions,
           case when rlike(trim(r.date), '{DATE_PATTERN}')
                then try_cast(substr(trim(r.date), 1, 10) as date) end as day
    from raw r
    left join query_map q on q.raw = r.query
    left join category_map c on c.raw = r.category
)
select row, normalized, category_id, named_id, clicks, impressions, day,
    query as query_text, category as category_text,
    case
        when bad is not null then bad
        when {too_long} then 'query_too_long'
        when {empty} then 'empty_query'
        when ambiguous then 'ambiguous_category'
        when category_id is null then 'unknown_category'
        when {bad_clicks} then 'bad_clicks'
        when {bad_impressions} then 'bad_impressions'
        when {exceed} then 'clicks_exceed_impressions'
        when {bad_date} then 'bad_date'
    end as reason,
    case
        when bad is not null then bad_value
        when {too_long} then concat(cast(query_bytes as string), ' bytes: ', substr(query, 1, 40))
        when {empty} then coalesce(query, '')
        when ambiguous or category_id is null then coalesce(category, '')
        when {bad_clicks} then coalesce(clicks_text, '')
        when {bad_impressions} then impressions_text
        when {exceed} then concat(coalesce(clicks_text, ''), ' > ', impressions_text)
        else date_text
    end as value,
    {in_range} as in_range
from typed
"""


# One pass over ``classified``: the rows of each (reason, in_range), and for the usable rows
# their distinct (query and category as written and as read, day, clicks, impressions) with
# their count. Everything after reads this relation, never the log again.
GROUPS_SQL = """
select reason, in_range, query, category_id, named_id, day, clicks, impressions, query_text, category_text,
       count(*) as rows
from (
    select reason, in_range,
           case when used then normalized end as query,
           case when used then query_text end as query_text,
           case when used then category_text end as category_text,
           case when used then category_id end as category_id,
           case when used then named_id end as named_id,
           case when used then day end as day,
           case when used then clicks end as clicks,
           case when used then impressions end as impressions
    from (select *, coalesce(reason is null and in_range, false) as used from classified) marked
) rows_by_group
group by reason, in_range, query, category_id, named_id, day, clicks, impressions, query_text, category_text
"""

USED_SQL = """
select query, query_text, category_id, named_id, day, clicks, impressions, rows
from groups where reason is null and in_range
"""

# Impressions count the searches of a query as typed (on a day; rows without a date are one day).
# Rows of one typed query, category and day are parts of one count: their clicks add up and so do
# their impressions (an exact duplicate row counts both twice, never its clicks alone). Rows of
# other categories report the same searches: where the categories' impressions differ they
# conflict, and the day counts the largest. Typed variants that normalize to one query ("Lego",
# "lego") are different searches: the normalized query's searches that day are the sum of its
# variants'. So no pair's clicks can exceed its impressions.
VARIANT_DAYS_SQL = """
select query, query_text, day, max(impressions) as impressions, min(impressions) as lowest,
       count(distinct impressions) as impression_values, sum(rows) as rows
from (
    select query, query_text, category_id, day, sum(impressions * rows) as impressions, sum(rows) as rows
    from used group by query, query_text, category_id, day
) category_days
group by query, query_text, day
"""

QUERY_DAYS_SQL = """
select query, day, sum(impressions) as impressions from variant_days group by query, day
"""

NO_DAY = "date '1000-01-01'"  # stands for "no date" where days are joined (null never equals null)

ROW_COUNTS_SQL = "select reason, in_range, sum(rows) from groups group by reason, in_range"

# A pair's clicks are its rows' clicks; its impressions are the query's impressions on each day
# the pair has rows (counted once a day, however many rows the pair has that day).
PAIRS_SQL = f"""
select p.query, p.category_id, sum(p.clicks) as clicks, sum(d.impressions) as impressions,
       sum(p.rows_with_impressions) as rows_with_impressions, sum(p.rows) as rows
from (
    select query, category_id, day, sum(clicks * rows) as clicks,
           sum(case when impressions is not null then rows else 0 end) as rows_with_impressions,
           sum(rows) as rows
    from used group by query, category_id, day
) p
join query_days d on d.query = p.query and coalesce(d.day, {NO_DAY}) = coalesce(p.day, {NO_DAY})
group by p.query, p.category_id
"""

# Rows that repeat another usable row exactly (query and category as written, date, clicks,
# impressions).
DUPLICATES_SQL = "select coalesce(sum(rows - 1), 0) from used"

CONFLICTS_SQL = """
select count(*), coalesce(sum(rows), 0) from variant_days where impression_values > 1
"""

CONFLICT_EXAMPLES_SQL = """
select query_text, day, lowest, impressions from variant_days where impression_values > 1
order by impressions - lowest desc, query_text limit {limit}
"""

# Rows and clicks per category as the log names it (before the internal-node rule).
NAMED_SQL = "select named_id, sum(rows), sum(clicks * rows) from used group by named_id"

# The first few rejected rows of each reason, by row.
EXAMPLES_SQL = """
select reason, row, value from (
    select reason, row, value, row_number() over (partition by reason order by row) as rank
    from classified where reason is not null
) ranked where rank <= {limit}
"""

FIRST_REJECT_SQL = "select row, reason, value from classified where reason is not null order by row limit 1"


def _over(column: str = "") -> str:
    """A pair whose clicks exceed its impressions (beyond rounding): the rule above makes none,
    and ingestion counts and drops any all the same."""
    return (f"({column}rows_with_impressions = {column}rows and "
            f"{column}clicks > {column}impressions * {double_literal(1 + 1e-9)})")


def pair_counts_sql(min_clicks: float) -> str:
    """Pairs, pairs below ``min_clicks`` and their clicks, and pairs whose clicks exceed their
    impressions."""
    below = f"clicks < {double_literal(min_clicks)} and not {_over()}"
    return (f"select count(*), count(case when {below} then 1 end), "
            f"coalesce(sum(case when {below} then clicks end), 0), count(case when {_over()} then 1 end) from pairs")


OVER_EXAMPLES_SQL = f"""
select query, category_id, clicks, impressions from pairs where {_over()}
order by clicks - impressions desc, query limit {{limit}}
"""


def kept_sql(min_clicks: float) -> str:
    """The pairs kept, sorted as a ClickTable wants them, with each query's demand: its largest
    pair impressions where every row had impressions, else its total clicks."""
    return f"""
with demand as (
    select query, coalesce(max(case when rows_with_impressions = rows then impressions end), sum(clicks))
           as query_impressions
    from pairs group by query
)
select p.query, p.category_id, p.clicks,
       case when p.rows_with_impressions = p.rows then p.impressions end as impressions, d.query_impressions
from pairs p join demand d on d.query = p.query
where p.clicks >= {double_literal(min_clicks)} and not {_over("p.")}
order by p.query, p.clicks desc, p.category_id
"""
