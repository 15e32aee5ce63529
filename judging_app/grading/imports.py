"""Result lists from any search system (``qcat judge create-session --results FILE``): the two
groups of a side-by-side session read from files instead of qcat's own search.

A file is JSON Lines (``.jsonl``: one object per line), CSV (``.csv``) or TSV (``.tsv``) with a
header row. Each row is one listing a system returned for a query:

- required: ``query``, ``rank`` (1 = top), ``listing_id``;
- optional: ``system`` (which search system; with two files, each file is one system and may
  leave it out), ``title``, ``category``, ``brand``, ``price``, ``image_url`` (http, https or a
  ``data:image/`` URL), ``link`` (http or https), ``segment`` (head, torso or tail) or
  ``impressions`` (a number: the queries are then split 30/30/40% of impressions, as the golden
  harness does).

A TREC run (``.run`` or ``.trec``: ``qid Q0 docno rank score tag`` per line, the tag naming the
system) names queries by id: ``--topics FILE`` gives their text (``qid<TAB>query`` per line) and
``--listings FILE`` (CSV, TSV or JSON Lines with ``listing_id`` and any of the optional fields
above) what the cards show.

Rows that cannot be used (a missing or malformed field, a rank or listing given twice for one
query and system, a segment that contradicts an earlier row) are skipped and each is reported
with its file and line; :class:`Imported` counts them. A system none of whose rows is usable is
refused, naming its file. Listings ranked below the top
:data:`qcat.judging.grading.sessions.TOP_N` of a list are not shown (counted too).

Queries are matched on qcat's normalized query (:func:`qcat.normalize.normalize`): ``TV`` in one
system's list and ``tv `` in the other's are one query, shown as first written; such merges are
counted (:attr:`Imported.merged`) and reported.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcat.errors import InputError, shown
from qcat.judging.grading.sessions import SEGMENTS, TOP_N, Listing, QuerySpec, known_brand, known_price
from qcat.inputs import COMMENTS_NONE, SKIP, Column, FileSchema, read_table, text_lines
from qcat.lines import query_too_long
from qcat.normalize import normalize
from qcat.paths import check_file

FIELDS = ("query", "system", "rank", "listing_id", "title", "category", "brand", "price", "image_url", "link",
          "segment", "impressions")
REQUIRED = ("query", "rank", "listing_id")
MAX_BAD_SHOWN = 20


@dataclass(frozen=True)
class Row:
    file: str
    line: int
    query: str
    system: str
    rank: int
    listing: Listing
    segment: str | None
    impressions: float | None


@dataclass
class Imported:
    systems: tuple[str, str]  # (baseline, target) names
    queries: list[QuerySpec]
    bad_rows: list[str] = field(default_factory=list)  # "FILE line N: why"
    rows: int = 0
    beyond_top: int = 0  # listings ranked below the top TOP_N (not shown)
    lines: int = 0  # physical lines of the files: each is a header, a blank line, a row used or a bad row
    header_lines: int = 0
    blank_lines: int = 0
    merged: list[tuple[str, ...]] = field(default_factory=list)  # queries written several ways: their forms

    def check_lines(self) -> None:
        """Every physical line is accounted for; a violation is a bug in qcat, never a user's error."""
        if self.lines != self.header_lines + self.blank_lines + self.rows + len(self.bad_rows):
            raise AssertionError(f"{self.lines} lines but {self.header_lines} header + {self.blank_lines} blank + "
                                 f"{self.rows} rows used + {len(self.bad_rows)} skipped")


def _text(value: object) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()


def safe_url(value: str, images: bool) -> str | None:
    """The URL when it is one a page may show (http/https, or an inline image), else None."""
    lowered = value.lower()
    if lowered.startswith(("http://", "https://")) or (images and lowered.startswith("data:image/")):
        return value
    return None


TREC_SUFFIXES = (".run", ".trec")
LISTING_FIELDS = ("title", "category", "brand", "price", "image_url", "link")


TOPICS = FileSchema(kind="topics", flag="--topics", delimiter="\t", header="none", comments=COMMENTS_NONE,
                    quoting=False, match_queries=False,
                    columns=(Column("qid", "text", True, "the query's id in the run"),
                             Column("query", "query", True, "its text")))
# What each column means; its values (a rank, a URL, a price) are checked by _row, a row at a time.
MEANINGS = {"query": "the query searched", "system": "which search system (one file of two: may be left out)",
            "rank": "its place, 1 = top", "listing_id": "the listing returned", "title": "shown on its card",
            "category": "shown on its card", "brand": "shown on its card", "price": "a non-negative number",
            "image_url": "http(s) or data:image/", "link": "http(s)", "segment": "head, torso or tail",
            "impressions": "a non-negative number; queries split 30/30/40% of impressions"}
RESULTS = FileSchema(kind="result list", flag="--results", delimiter=",", delimiters={".tsv": "\t"},
                     comments=COMMENTS_NONE, match_queries=False,
                     columns=tuple(Column(name, "query" if name == "query" else "text", name in REQUIRED,
                                          MEANINGS[name]) for name in FIELDS))
LISTINGS = FileSchema(kind="listings", flag="--listings", delimiter=",", delimiters={".tsv": "\t"},
                      comments=COMMENTS_NONE, match_queries=False,
                      columns=(Column("listing_id", "text", True, "the listing's id"),
                               *(Column(name, meaning=MEANINGS[name]) for name in LISTING_FIELDS)))


def read_topics(path: Path) -> dict[str, str]:
    """``qid<TAB>query`` per line (TREC topics in their plainest form), through the input layer."""
    table = read_table(path, TOPICS)
    topics: dict[str, str] = {}
    for row in table.rows:
        qid, query = str(row["qid"]), row.query.text
        if topics.setdefault(qid, query) != query:
            raise InputError(f"{table.where(row.line)}: topic {shown(qid)} is given twice with different text")
    return topics


def read_listings(path: Path) -> dict[str, dict]:
    """What the cards show per listing id, from CSV, TSV or JSON Lines with a ``listing_id`` column."""
    path = Path(path)
    check_file(path, "--listings")
    out: dict[str, dict] = {}
    for number, record in _records(path, schema=LISTINGS, flag="--listings"):
        if record is None:
            continue
        if isinstance(record, Exception):
            raise InputError(f"--listings {path}:{number}: {record}")
        listing = _text(record.get("listing_id"))
        if not listing:
            raise InputError(f"--listings {path}:{number}: no listing_id")
        out[listing] = {name: record.get(name) for name in LISTING_FIELDS if record.get(name) not in (None, "")}
    return out


def _trec_records(path: Path, topics: dict[str, str] | None, listings: dict[str, dict] | None, flag: str):
    if topics is None:
        raise InputError(f"{path} is a TREC run, which names queries by id: give their text with --topics FILE "
                         "(qid<TAB>query per line)")
    for number, line, why in text_lines(path, flag):
        if why is not None:
            yield number, ValueError(why)
            continue
        fields = line.split()
        if not fields:
            yield number, None  # a blank line
            continue
        if len(fields) != 6:
            yield number, ValueError(f"expected 'qid Q0 docno rank score tag', got {len(fields)} fields")
            continue
        qid, _, docno, rank, _, tag = fields
        if qid not in topics:
            yield number, ValueError(f"query id {shown(qid)} is not in --topics")
            continue
        yield number, {**(listings or {}).get(docno, {}), "query": topics[qid], "system": tag, "rank": rank,
                       "listing_id": docno}


def _records(path: Path, schema: FileSchema = RESULTS, topics: dict[str, str] | None = None,
             listings: dict[str, dict] | None = None, flag: str = "--results"):
    """``(line number, dict, ValueError or None for a blank line)`` for each line after the header,
    read through the input layer (line numbers as an editor shows them; a line that is not UTF-8,
    too long or not well formed is a ValueError saying why, and a quote left open never swallows
    the lines after it)."""
    suffix = path.suffix.lower()
    if suffix in TREC_SUFFIXES:
        yield from _trec_records(path, topics, listings, flag)
        return
    if suffix == ".jsonl" or suffix == ".ndjson":
        for number, line, why in text_lines(path, flag):
            if why is not None:
                yield number, ValueError(why)
                continue
            if not line.strip():
                yield number, None  # a blank line
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                yield number, ValueError(f"not JSON ({getattr(exc, 'msg', 'nested too deeply')})")
                continue
            yield number, record if isinstance(record, dict) else ValueError("not a JSON object")
        return
    if suffix not in (".csv", ".tsv"):
        raise InputError(f"{path}: result lists are .jsonl, .csv, .tsv or TREC run (.run, .trec) files, got "
                         f"{shown(path.suffix or 'no suffix')}")
    table = read_table(path, schema, flag, on_bad=SKIP, allow_empty=True)
    events = [(row.line, {name: value for name, value in row.values.items() if value is not None}) for row in table.rows]
    events += [(skipped.line, ValueError(skipped.why)) for skipped in table.skipped]
    events += [(line, None) for line in table.blank]
    yield from sorted(events, key=lambda event: event[0])


def _row(path: Path, number: int, record: dict, default_system: str) -> Row:
    """One usable row, or ValueError saying why not."""
    values = {name: record.get(name) for name in FIELDS}
    for name in REQUIRED:
        if not _text(values[name]):
            raise ValueError(f"no {name}")
    too_long = query_too_long(_text(values["query"]))
    if too_long:
        raise ValueError(f"query {too_long}")
    try:
        rank_value = float(values["rank"])
    except (TypeError, ValueError):
        raise ValueError(f"rank {shown(values['rank'])} is not a number") from None
    if not rank_value.is_integer() or rank_value < 1:
        raise ValueError(f"rank {shown(values['rank'])} is not a whole number of at least 1")
    segment = _text(values["segment"]).lower() or None
    if segment is not None and segment not in SEGMENTS:
        raise ValueError(f"segment {shown(values['segment'])} is not one of {', '.join(SEGMENTS)}")
    impressions = None
    if _text(values["impressions"]):
        try:
            impressions = float(values["impressions"])
        except (TypeError, ValueError):
            raise ValueError(f"impressions {shown(values['impressions'])} is not a number") from None
        if not math.isfinite(impressions) or impressions < 0:
            raise ValueError(f"impressions {shown(values['impressions'])} is not a non-negative number")
    price_text = _text(values["price"])
    price = known_price(price_text) if price_text else None
    if price_text and price is None:
        raise ValueError(f"price {shown(values['price'])} is not a non-negative number")
    image, link = _text(values["image_url"]), _text(values["link"])
    if image and safe_url(image, images=True) is None:
        raise ValueError(f"image_url {shown(image)} is not an http(s) or data:image URL")
    if link and safe_url(link, images=False) is None:
        raise ValueError(f"link {shown(link)} is not an http(s) URL")
    listing = Listing(_text(values["listing_id"]), _text(values["title"]), _text(values["category"]),
                      known_brand(values["brand"]), price, image or None, link or None)
    return Row(str(path), number, " ".join(_text(values["query"]).split()), _text(values["system"]) or default_system,
               int(rank_value), listing, segment, impressions)


def read_results(paths: list[Path], default_segment: str | None = None, topics: dict[str, str] | None = None,
                 listings: dict[str, dict] | None = None) -> Imported:
    """Both systems' result lists from one file (holding exactly two ``system`` values, the first
    seen being the baseline) or two files (the first the baseline, the second the target)."""
    if not 1 <= len(paths) <= 2:
        raise InputError(f"give the result lists of two systems: --results BASELINE --results TARGET, or one file "
                         f"with a system column; got {len(paths)} --results")
    rows: list[Row] = []
    bad: list[str] = []
    file_systems: list[list[str]] = []
    lines = {"lines": 0, "header": 0, "blank": 0}
    for index, path in enumerate(paths):
        path = Path(path)
        check_file(path, "--results")
        seen: list[str] = []
        if path.suffix.lower() in (".csv", ".tsv"):
            lines["header"] += 1  # _records refuses a file without one
            lines["lines"] += 1
        for number, record in _records(path, topics=topics, listings=listings):
            lines["lines"] += 1  # one record, bad row or blank line per line after the header
            if record is None:
                lines["blank"] += 1
                continue
            try:
                if isinstance(record, Exception):
                    raise record
                if listings and not path.suffix.lower() in TREC_SUFFIXES:
                    record = {**listings.get(_text(record.get("listing_id")), {}),
                              **{k: v for k, v in record.items() if v not in (None, "")}}
                row = _row(path, number, record, default_system=path.stem if len(paths) == 2 else "")
            except ValueError as exc:
                bad.append(f"{path}:{number}: {exc}")
                continue
            if not row.system:
                bad.append(f"{path}:{number}: no system (one file holds both systems: give each row's system)")
                continue
            if row.system not in seen:
                seen.append(row.system)
            rows.append(row)
        file_systems.append(seen)
    if len(paths) == 2:
        for path, seen in zip(paths, file_systems):
            if len(seen) > 1:
                raise InputError(f"{path}: one --results file per system, but it holds the systems "
                                 f"{', '.join(map(shown, seen))}")
        if not file_systems[0] or not file_systems[1]:
            empty = paths[0] if not file_systems[0] else paths[1]
            raise InputError(f"--results {empty}: no usable row" + _skipped_rows(bad, empty))
        systems = (file_systems[0][0], file_systems[1][0])
        if systems[0] == systems[1]:
            systems = (f"{systems[0]} ({Path(paths[0]).name})", f"{systems[1]} ({Path(paths[1]).name})")
        system_of = {id(row): systems[0] if row.file == str(paths[0]) else systems[1] for row in rows}
    else:
        seen = file_systems[0]
        if not seen:
            raise InputError(f"--results {paths[0]}: no usable row" + _skipped_rows(bad, paths[0]))
        if len(seen) != 2:
            raise InputError(f"{paths[0]}: one --results file must hold exactly two systems (the system column), "
                             f"found {len(seen)}: {', '.join(map(shown, seen))}")
        systems = (seen[0], seen[1])
        system_of = {id(row): row.system for row in rows}
    imported = _assemble(rows, system_of, systems, bad, default_segment)
    imported.lines, imported.header_lines, imported.blank_lines = lines["lines"], lines["header"], lines["blank"]
    imported.check_lines()
    for side, system in enumerate(systems):
        if not any(query.target if side else query.baseline for query in imported.queries):
            # every row of this system was skipped while the lists were put together (a segment
            # that contradicts the other system's rows, a rank given twice)
            where = f"--results {paths[side]}" if len(paths) == 2 else f"--results {paths[0]}: system {shown(system)}"
            raise InputError(f"{where}: no usable row, so the session would judge {shown(system)} on no results"
                             + _skipped_rows(bad, Path(paths[side] if len(paths) == 2 else paths[0])))
    return imported


def _skipped_rows(bad: list[str], path: Path, shown_rows: int = 3) -> str:
    """The rows of ``path`` that were skipped, with why, for an error that says none was usable."""
    mine = [message for message in bad if message.startswith(f"{path}:")]
    if not mine:
        return " (the file holds no data rows)"
    listed = "; ".join("line " + message.removeprefix(f"{path}:") for message in mine[:shown_rows])
    more = f"; and {len(mine) - shown_rows:,} more" if len(mine) > shown_rows else ""
    return f": {len(mine):,} rows skipped: {listed}{more}"


def _assemble(rows: list[Row], system_of: dict, systems: tuple[str, str], bad: list[str],
              default_segment: str | None) -> Imported:
    lists: dict[tuple[str, str], dict[int, Listing]] = defaultdict(dict)
    listed: dict[tuple[str, str], set[str]] = defaultdict(set)
    segment_of: dict[str, str] = {}
    impressions_of: dict[str, float] = {}
    order: list[str] = []
    forms: dict[str, list[str]] = {}  # query key -> its forms as written, the first shown
    kept = 0
    for row in rows:
        system = system_of[id(row)]
        query = query_key(row.query)
        key = (query, system)
        where = f"{row.file}:{row.line}"
        if row.rank in lists[key]:
            bad.append(f"{where}: rank {row.rank} of {shown(row.query)} in {shown(system)} is given twice")
            continue
        if row.listing.listing_id in listed[key]:
            bad.append(f"{where}: listing {shown(row.listing.listing_id)} is listed twice for {shown(row.query)} in {shown(system)}")
            continue
        if row.segment is not None:
            if segment_of.setdefault(query, row.segment) != row.segment:
                bad.append(f"{where}: segment {shown(row.segment)} of {shown(row.query)}, which an earlier row puts in "
                           f"{shown(segment_of[query])}")
                continue
        if row.impressions is not None:
            impressions_of.setdefault(query, row.impressions)
        if query not in forms:
            order.append(query)
            forms[query] = []
        if row.query not in forms[query]:
            forms[query].append(row.query)
        lists[key][row.rank] = row.listing
        listed[key].add(row.listing.listing_id)
        kept += 1
    files = {path: i for i, path in enumerate(dict.fromkeys(row.file for row in rows))}

    def where(message: str) -> tuple:
        match = re.match(r"(.*):(\d+):", message)
        return (files.get(match.group(1), len(files)), int(match.group(2))) if match else (len(files), 0)

    bad.sort(key=where)  # by file, then line
    if not order:
        raise InputError("no usable result row" + (f": {len(bad)} rows could not be used (reported above)" if bad else ""))
    segments = _segments(order, segment_of, impressions_of, default_segment)
    queries, beyond = [], 0
    for query in order:
        groups = []
        for system in systems:
            ranked = [lists[(query, system)][rank] for rank in sorted(lists.get((query, system), {}))]
            beyond += max(0, len(ranked) - TOP_N)
            groups.append(ranked[:TOP_N])
        queries.append(QuerySpec(forms[query][0], segments[query], groups[0], groups[1], impressions_of.get(query, 0.0)))
    merged = [tuple(written) for written in forms.values() if len(written) > 1]
    return Imported(systems, queries, bad, kept, beyond, merged=merged)


def query_key(query: str) -> str:
    """What matches a query across the two lists: qcat's normalized query (``TV`` and ``tv `` are
    one), or the query as written where nothing is left of it after normalization (``!!!``)."""
    return normalize(query) or query


def _segments(order: list[str], segment_of: dict[str, str], impressions_of: dict[str, float],
              default_segment: str | None) -> dict[str, str]:
    """Each query's segment: its rows' ``segment``, else from ``impressions`` (30/30/40% of the
    impressions of the queries that have them), else ``default_segment``."""
    from qcat.measure.segments import segment_by_impressions

    counted = [q for q in order if q not in segment_of and q in impressions_of]
    out = dict(segment_of)
    if counted:
        drawn = segment_by_impressions(np.array([impressions_of[q] for q in counted], dtype=np.float64))
        out.update({q: SEGMENTS[int(s)] for q, s in zip(counted, drawn)})
    missing = [q for q in order if q not in out]
    if missing:
        if default_segment is None:
            raise InputError(f"{len(missing):,} queries (first normalized {shown(missing[0])}) have neither a segment nor an "
                             "impressions column: add one, or put them all in one segment with --default-segment "
                             f"{{{','.join(SEGMENTS)}}}")
        out.update({q: default_segment for q in missing})
    return out


def report_bad_rows(imported: Imported, say) -> None:
    """Every row that could not be used, by file and line (the first :data:`MAX_BAD_SHOWN`, then a count),
    and the queries written several ways that were matched as one."""
    for message in imported.bad_rows[:MAX_BAD_SHOWN]:
        say(f"skipped {message}")
    if len(imported.bad_rows) > MAX_BAD_SHOWN:
        say(f"... and {len(imported.bad_rows) - MAX_BAD_SHOWN:,} more rows skipped")
    if imported.merged:
        examples = "; ".join(" = ".join(shown(form) for form in forms) for forms in imported.merged[:3])
        say(f"matched {len(imported.merged):,} quer{'y' if len(imported.merged) == 1 else 'ies'} written in several "
            f"ways as one (qcat's normalized query), each shown as first written (e.g. {examples})")
