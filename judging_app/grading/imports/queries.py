"""The rows put together as the session's queries: matched across the two lists on qcat's normalized
query (:func:`query_key`), each list ranked and cut at the top :data:`TOP_N`, a segment for each
query; what is left over (a rank or listing given twice, a contradicting segment) reported."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from qcat.errors import InputError, shown
from qcat.judging.grading.imports.rows import Row
from qcat.judging.grading.sessions import SEGMENTS, TOP_N, Listing, QuerySpec
from qcat.text.normalize import normalize


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


def assemble(rows: list[Row], system_of: dict, systems: tuple[str, str], bad: list[str],
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
        if row.segment is not None and segment_of.setdefault(query, row.segment) != row.segment:
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
