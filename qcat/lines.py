"""Reading a user's text files one physical line at a time, and the limits on what a line and a
query may hold.

Every reader of CSV, TSV and JSONL (click logs, catalogs, taxonomies, result and query files)
splits on line feeds only, so that each physical line is accounted for (the header, a row used
or skipped under a reason, or a blank line) and a quote left open cannot swallow the lines
after it.
"""

from __future__ import annotations

MAX_LINE_BYTES = 1 << 20  # 1 MiB: a longer line is a row that is too long, not parsed
# 4,000 bytes of UTF-8: every query `qcat serve` accepts (1,000 characters by default) fits.
MAX_QUERY_BYTES = 4000


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
