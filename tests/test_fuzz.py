"""Property tests on user input: random click-log files through ingestion, random bytes and
Unicode through `qcat classify --json`."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qcat.taxonomy import load_taxonomy
from training.clicklog import ingest

DATA = Path(__file__).resolve().parent / "data"
BESTBUY = load_taxonomy(DATA / "bestbuy_categories_2016.json.gz")
COLUMNS = ("query", "category", "clicks", "impressions", "date")

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=25)
numbers = st.one_of(st.none(), st.integers(-3, 50).map(str), st.sampled_from(["", "x", "1e3", "nan", "inf", " 4 ", "2.5"]))
row = st.fixed_dictionaries({
    "query": st.one_of(text, st.sampled_from(["sharp tv", "nook", "", "  ", "!!!", 'say "hi", ok'])),
    "category": st.sampled_from(["abcat0101001", "TV & Home Theater > TVs > All Flat-Panel TVs", "TV & Home Theater",
                                 "NOPE", "", " abcat0101001 "]),
    "clicks": numbers,
    "impressions": numbers,
    "date": st.one_of(st.none(), st.dates().map(str), st.sampled_from(["", "2025-13-01", "soon"])),
})


def encode(rows: list[dict], fmt: str, broken: list[bool]) -> bytes:
    """The rows as a file; a ``broken`` row gets an invalid UTF-8 byte in its (single) line."""
    out = []
    if fmt == "jsonl":
        for record, bad in zip(rows, broken):
            line = json.dumps({k: v for k, v in record.items() if v is not None}, ensure_ascii=False).encode()
            out.append(line.replace(b"{", b"{\xff", 1) if bad else line)
        return b"\n".join(out) + b"\n"
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    writer.writerow(COLUMNS)
    lines = [buffer.getvalue().encode()]
    for record, bad in zip(rows, broken):
        buffer = io.StringIO()
        csv.writer(buffer, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n").writerow(
            ["" if record[c] is None else record[c] for c in COLUMNS])
        line = buffer.getvalue().encode()
        lines.append(b"\xff" + line if bad and line.count(b"\n") == 1 else line)
    return b"".join(lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(row, min_size=0, max_size=25), fmt=st.sampled_from(["csv", "tsv", "jsonl"]),
       gz=st.booleans(), broken=st.lists(st.booleans(), min_size=25, max_size=25),
       date_from=st.sampled_from([None, "2020-01-01"]))
def test_every_row_is_used_or_counted_under_exactly_one_reason(tmp_path_factory, rows, fmt, gz, broken, date_from):
    raw = encode(rows, fmt, broken[:len(rows)])
    path = tmp_path_factory.mktemp("fuzz") / f"log.{fmt}{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(raw) if gz else raw)
    report = ingest(path, BESTBUY, min_clicks=1, date_from=date_from).report
    # Lines, not CSV records: a field holding a line break makes its first line malformed and the
    # lines after it rows of their own (issue 34, item 1).
    assert report.lines == raw.count(b"\n") == report.header_lines + report.blank_lines + report.rows_read
    assert report.rows_used + report.rows_outside_dates + sum(report.skipped.values()) == report.rows_read
    assert all(1 <= r <= raw.count(b"\n") + 1 for examples in report.examples.values() for r, _ in examples)
    assert report.pairs_kept <= report.rows_used


query_lines = st.lists(st.one_of(
    st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=40).map(str.encode),
    st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b),
), min_size=1, max_size=30)


@pytest.fixture(scope="module")
def demo_labels():
    from qcat.classifier import Classifier

    return set(Classifier.load().model.labels)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=query_lines)
def test_classify_json_gives_one_valid_record_per_line(lines, demo_labels, monkeypatch, capsysbinary):
    from qcat.cli import main

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(lines) + b"\n"), encoding="utf-8"))
    code = main(["classify", "--json", "-k", "3"])
    out = capsysbinary.readouterr().out.decode("utf-8")  # strict: the output is valid UTF-8
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == len(lines) and code in (0, 2)
    for raw, record in zip(lines, records):
        if "error" in record:
            continue
        assert record["query"] == raw.decode("utf-8")
        scores = [c["score"] for c in record["categories"]]
        assert all(math.isfinite(s) and 0 <= s <= 1 for s in scores) and scores == sorted(scores, reverse=True)
        assert {c["id"] for c in record["categories"]} <= demo_labels
