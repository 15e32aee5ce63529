"""Reading a user's text files one physical line at a time, and the limits on what a line and a
query may hold (its length, how many categories it may ask for).

The input layer (:mod:`qcat.inputs`), through which every reader of a user's CSV, TSV and JSONL
(click logs, catalogs, taxonomies, result, traffic, gold and query files) goes, splits on line
feeds only, so that each physical line is accounted for (the header, a row used
or skipped under a reason, or a blank line) and a quote left open cannot swallow the lines
after it.
"""

from __future__ import annotations

import csv

MAX_LINE_BYTES = 1 << 20  # 1 MiB: a longer line is a row that is too long, not parsed
# 4,000 bytes of UTF-8: every query `qcat serve` accepts (1,000 characters by default) fits.
MAX_QUERY_BYTES = 4000
# The most categories one query may ask for anywhere (the Python API, `qcat serve --max-k`'s
# ceiling; `qcat classify -k` stops at 100): arrays are sized by k.
MAX_K = 10_000


def physical_lines(raw: bytes) -> list[bytes]:
    """The lines of ``raw`` split on line feeds (a trailing carriage return kept), without the
    empty piece after a final line feed."""
    lines = raw.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def query_bytes(query: str) -> int:
    """A query's size in UTF-8 (a lone surrogate counted as its three bytes)."""
    return len(query.encode("utf-8", "surrogatepass"))


def query_too_long(query: str) -> str | None:
    """Why ``query`` is too long, "too long (N bytes, limit M)", or None."""
    size = query_bytes(query)
    return f"too long ({size:,} bytes, limit {MAX_QUERY_BYTES:,})" if size > MAX_QUERY_BYTES else None


def split_line(text: str, delimiter: str) -> list[str] | None:
    """The fields of one line of CSV/TSV, or None when the line is not well formed on its own (a
    quote left open, text after a closing quote, a bare carriage return)."""
    try:
        return next(csv.reader([text], delimiter=delimiter, strict=True), [])
    except csv.Error:
        return None


def decoded_lines(raw: bytes):
    """``(line number, text or None, why, the line's bytes)`` for each physical line of ``raw``: the
    text without its carriage return, or None and why it cannot be read (not UTF-8, too long)."""
    for number, line in enumerate(physical_lines(raw), start=1):
        if len(line) > MAX_LINE_BYTES:
            yield number, None, f"line too long ({len(line):,} bytes, limit {MAX_LINE_BYTES:,})", line
            continue
        try:
            yield number, line.decode("utf-8").removesuffix("\r"), None, line
        except UnicodeDecodeError as exc:
            yield number, None, f"not valid UTF-8 (byte {exc.start + 1} of the line, {line[exc.start:exc.start + 1]!r})", line
