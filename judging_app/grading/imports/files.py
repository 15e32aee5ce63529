"""The files a session's result lists come in, read through the input layer: result lists (JSON
Lines, CSV, TSV or a TREC run), TREC topics and the listings a run's cards show; each line after
the header a record, a blank line or why it cannot be read."""

from __future__ import annotations

import json
import math
from pathlib import Path

from qcat.errors import InputError, shown
from qcat.inputs import COMMENTS_NONE, SKIP, Column, FileSchema, read_table, text_lines
from qcat.inputs.paths import check_file

FIELDS = ("query", "system", "rank", "listing_id", "title", "category", "brand", "price", "image_url", "link",
          "segment", "impressions")
REQUIRED = ("query", "rank", "listing_id")
TREC_SUFFIXES = (".run", ".trec")
LISTING_FIELDS = ("title", "category", "brand", "price", "image_url", "link")
TOPICS = FileSchema(kind="topics", flag="--topics", delimiter="\t", header="none", comments=COMMENTS_NONE,
                    quoting=False, match_queries=False,
                    columns=(Column("qid", "text", True, "the query's id in the run"),
                             Column("query", "query", True, "its text")))
# What each column means; its values (a rank, a URL, a price) are checked by checked_row, a row at a time.
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


def cell_text(value: object) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).strip()


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
    for number, record in read_records(path, schema=LISTINGS, flag="--listings"):
        if record is None:
            continue
        if isinstance(record, Exception):
            raise InputError(f"--listings {path}:{number}: {record}")
        listing = cell_text(record.get("listing_id"))
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


def read_records(path: Path, schema: FileSchema = RESULTS, topics: dict[str, str] | None = None,
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
