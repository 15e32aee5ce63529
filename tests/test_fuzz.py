"""Property tests on user input: random click-log files through ingestion, random bytes and
Unicode through `qcat classify --json`."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qcat.taxonomy import load_taxonomy
from qcat.training.clicklogs.clicklog import ingest

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
@pytest.mark.slow
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


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=query_lines)
def test_classify_json_gives_one_valid_record_per_line(lines, demo_labels, monkeypatch, capsysbinary):
    from qcat.cli import main

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(lines) + b"\n"), encoding="utf-8"))
    code = main(["classify", "--json", "-k", "3"])
    out = capsysbinary.readouterr().out.decode("utf-8")  # strict: the output is valid UTF-8
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == len(lines) and code in (0, 2)
    for number, (raw, record) in enumerate(zip(lines, records)):
        if "error" in record:
            continue
        assert record["query"] == (raw.removeprefix(b"\xef\xbb\xbf") if number == 0 else raw).decode("utf-8")
        scores = [c["score"] for c in record["categories"]]
        assert all(math.isfinite(s) and 0 <= s <= 1 for s in scores) and scores == sorted(scores, reverse=True)
        assert {c["id"] for c in record["categories"]} <= demo_labels


# -- Issue 34: files with quotes, line breaks, CR/CRLF, BOMs, NUL, bad UTF-8, very long lines, cycles
# and contradictions, through the CLI. Each input ends in exit 0 with every physical line accounted
# for, or exit 2 with one `qcat: error:` line and nothing written: never exit 70, never a line lost.

from collections import Counter  # noqa: E402

from qcat.text.lines import MAX_LINE_BYTES  # noqa: E402

OUTCOMES: Counter = Counter()  # (kind, outcome) -> inputs, printed by the fixture below
TOY_TAXONOMY = "id\tpath\tparent\nT\tToys\t\nL\tToys > Lego\tT\nV\tTVs\t\n"


@pytest.fixture(scope="module", autouse=True)
def outcome_table():
    """Print (and with $QCAT_FUZZ_TABLE, write as JSON) how many inputs each test tried, by outcome."""
    yield
    if OUTCOMES:
        rows = sorted(OUTCOMES.items())
        print("\nproperty test inputs by kind and outcome: " + ", ".join(f"{k} {o}: {n}" for (k, o), n in rows)
              + f"; {sum(OUTCOMES.values())} in all")
        if os.environ.get("QCAT_FUZZ_TABLE"):
            Path(os.environ["QCAT_FUZZ_TABLE"]).write_text(json.dumps([[k, o, n] for (k, o), n in rows]))


def physical_line_count(raw: bytes) -> int:
    """Lines as an editor counts them: line feeds, plus a last line without one."""
    return raw.count(b"\n") + (1 if raw and not raw.endswith(b"\n") else 0)


def nasty(good: list[str]) -> st.SearchStrategy[bytes]:
    """One line's bytes (before its terminator): a good row, or one broken in a way users' files are."""
    row = st.sampled_from(good)
    return st.one_of(
        row.map(str.encode),
        row.map(lambda r: ('"' + r).encode()),                       # a quote never closed
        row.map(lambda r: r.replace(",", ',"x\ny",', 1).encode()),   # a quoted field across a line break
        row.map(lambda r: r.replace(",", "\r,", 1).encode()),        # a bare CR
        row.map(lambda r: r.replace(",", "\x00,", 1).encode()),      # NUL
        row.map(lambda r: b"\xff\xfe" + r.encode()),                 # not UTF-8
        row.map(lambda r: ("\ufeff" + r).encode()),                  # a BOM mid-file
        row.map(lambda r: (r + "," + r).encode()),                   # too many fields
        st.sampled_from([b"", b"   ", b"\t", b",", b'"', b'""', b"\x1b[31m", b"\r"]),
        st.just(b"LONG_QUERY"), st.just(b"LONG_LINE"),
        st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=30),
    )


def materialize(lines: list[bytes], header: bytes, ending: bytes, bom: bool, final: bool, delimiter: bytes = b",") -> bytes:
    body = [header] + [(b"q" * 5000 + delimiter + b"L,3" if line == b"LONG_QUERY" else
                        b"x" * (MAX_LINE_BYTES + 10) if line == b"LONG_LINE" else line) for line in lines]
    raw = ending.join(body) + (ending if final else b"")
    return (b"\xef\xbb\xbf" if bom else b"") + raw


files = dict(ending=st.sampled_from([b"\n", b"\r\n", b"\n", b"\r\n", b"\r"]), bom=st.booleans(), final=st.booleans())
EXAMPLES = int(os.environ.get("QCAT_FUZZ_EXAMPLES", "1"))  # a multiplier: 10 for a longer hunt


def run_cli(capsys, argv: list) -> tuple[int, str, str]:
    from qcat.cli import main

    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def check_error(code: int, err: str, kind: str, written: list[Path]) -> None:
    """Exit 2: one `qcat: error:` line, the last on stderr (a command may report skipped rows before
    it), and nothing written."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert [line for line in lines if line.startswith("qcat: error: ")] == lines[-1:], lines
    assert all(line.startswith(("qcat: error: ", "skipped ", "... and ", "matched ")) for line in lines), lines
    assert not any(path.exists() for path in written)
    OUTCOMES[(kind, "exit 2")] += 1


def counts_line(out: str, pattern: str) -> tuple[int, ...]:
    match = re.search(pattern, out)
    assert match, out
    return tuple(int(n.replace(",", "")) for n in match.groups())


def skipped_total(out: str) -> int:
    return sum(int(n.replace(",", "")) for n in re.findall(r"skipped ([\d,]+) rows: ", out))


LOG_ROWS = ["lego star wars,L,3", "sharp tv,V,2", "nook,T,1", "lego,Toys > Lego,4"]


@settings(max_examples=80 * EXAMPLES, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(st.one_of(st.sampled_from(LOG_ROWS).map(str.encode), nasty(LOG_ROWS)), max_size=12),
       header=st.sampled_from([b"query,category,clicks"] * 4 + [b"query,clicks", b'"query,category,clicks',
                                                                b"\xffquery,category", b"query,Category,category",
                                                                b"query,category,clicks,clicks"]),
       **files)
@pytest.mark.slow
def test_logs_exit_0_with_every_line_accounted_for_or_2_with_one_line(tmp_path_factory, capsys, monkeypatch, lines,
                                                                      header, ending, bom, final):
    monkeypatch.setenv("QCAT_QUIET", "1")
    directory = tmp_path_factory.mktemp("log")
    raw = materialize(lines, header, ending, bom, final)
    (directory / "log.csv").write_bytes(raw)
    (directory / "taxonomy.tsv").write_text(TOY_TAXONOMY)
    out_path = directory / "table.parquet"
    code, out, err = run_cli(capsys, ["data", "ingest", directory / "log.csv", "--taxonomy", directory / "taxonomy.tsv",
                                      "--min-clicks", "1", "--out", out_path])
    assert code != 70, err
    if header.lower().count(b"category") > 1 or header.count(b"clicks") > 1:  # issue 37, item 1
        assert code == 2 and ("twice" in err or ending == b"\r"), err  # CR alone: the header is not one line
    if code != 0:
        return check_error(code, err, "log", [out_path])
    n, header_lines, blank, read, used, skipped = counts_line(
        out, r"log\.csv: ([\d,]+) lines \((\d) header, ([\d,]+) blank\), ([\d,]+) rows read, ([\d,]+) used, ([\d,]+) skipped")
    assert n == physical_line_count(raw) == header_lines + blank + read
    assert read == used + skipped and skipped == skipped_total(out) and out_path.is_file()
    OUTCOMES[("log", "exit 0")] += 1


def test_one_line_of_each_broken_kind_is_used_or_skipped_under_one_reason(tmp_path):
    """The broken lines the log property test draws from, one of each in one file (a BOM, no final
    line break, CRLF endings): ingestion accounts for every physical line and names a reason for each skip."""
    row = LOG_ROWS[0]
    lines = [row.encode(), row.replace(",", ',"x\ny",', 1).encode(), row.replace(",", "\r,", 1).encode(),
             row.replace(",", "\x00,", 1).encode(), b"\xff\xfe" + row.encode(), ("\ufeff" + row).encode(),
             (row + "," + row).encode(), b"", b"   ", b",", b"\x1b[31m", b"LONG_QUERY", b"LONG_LINE",
             ('"' + row).encode(), LOG_ROWS[1].encode()]
    (tmp_path / "taxonomy.tsv").write_text(TOY_TAXONOMY)
    raw = materialize(lines, b"query,category,clicks", b"\r\n", bom=True, final=False)
    (tmp_path / "log.csv").write_bytes(raw)
    report = ingest(tmp_path / "log.csv", load_taxonomy(tmp_path / "taxonomy.tsv"), min_clicks=1).report
    assert report.lines == physical_line_count(raw) == 17  # the quoted line break makes two lines
    assert (report.header_lines, report.blank_lines, report.rows_read, report.rows_used) == (1, 2, 14, 5)
    assert dict(report.skipped) == {"malformed_row": 6, "bad_encoding": 1, "query_too_long": 1, "too_long": 1}
    assert report.rows_used + sum(report.skipped.values()) == report.rows_read


CATALOG_ROWS = [f"L{i},lego set {i},L" for i in range(6)] + [f"V{i},sharp tv {i},V" for i in range(6)]


@pytest.mark.slow
@settings(max_examples=40 * EXAMPLES, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(nasty(CATALOG_ROWS), min_size=0, max_size=8), **files)
def test_catalogs_exit_0_with_every_line_accounted_for_or_2_with_one_line(tmp_path_factory, capsys, monkeypatch, lines,
                                                                          ending, bom, final):
    monkeypatch.setenv("QCAT_QUIET", "1")
    directory = tmp_path_factory.mktemp("catalog")
    good = [row.encode() for row in CATALOG_ROWS] * 3  # enough clean listings to train, around the generated lines
    raw = materialize(good[:18] + lines + good[18:], b"listing_id,title,category", ending, bom, final)
    (directory / "catalog.csv").write_bytes(raw)
    (directory / "taxonomy.tsv").write_text(TOY_TAXONOMY)
    out_path = directory / "nb"
    code, out, err = run_cli(capsys, ["train", "nb", "--catalog", directory / "catalog.csv", "--taxonomy",
                                      directory / "taxonomy.tsv", "--title-weight", "1", "--short-weight", "0",
                                      "--out", out_path])
    assert code != 70, err
    if code != 0:
        return check_error(code, err, "catalog", [out_path])
    n, header_lines, blank, read, used, skipped = counts_line(
        out, r"catalog\.csv: ([\d,]+) lines \((\d) header, ([\d,]+) blank\), ([\d,]+) rows read, ([\d,]+) listings "
             r"used, ([\d,]+) skipped")
    assert n == physical_line_count(raw) == header_lines + blank + read
    assert read == used + skipped and skipped == skipped_total(out) and (out_path / "manifest.json").is_file()
    OUTCOMES[("catalog", "exit 0")] += 1


GOOD_TAXONOMY_ROWS = ["V\tTVs\t", "C\tToys > Lego > C\tL", "D\tTVs > D\tV", "K\tToys > K\tT",
                      "Toys\tStuff\t"]  # the last: an id that is another node's path (issue 37, item 5)
TAXONOMY_ROWS = GOOD_TAXONOMY_ROWS + ["L\tToys > Lego\tV", "A\tA\tB", "B\tB\tA", "D\tTVs > D\tT", "E\tE\tE",
                                      "T\tToys\tL", 'Q\t"Toys > Q\tT', "X\tY > X\t", "Toys\tToys > Toys\tT"]


@pytest.mark.slow
@settings(max_examples=80 * EXAMPLES, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(st.one_of(st.sampled_from(GOOD_TAXONOMY_ROWS).map(str.encode), nasty(TAXONOMY_ROWS)), max_size=6),
       **files)
@example(lines=[b"Toys\tStuff\t"], ending=b"\n", bom=False, final=True)  # issue 37, item 5, every run
def test_taxonomies_load_every_line_or_exit_2_with_one_line(tmp_path_factory, capsys, monkeypatch, lines, ending, bom,
                                                             final):
    from qcat.taxonomy import load_taxonomy

    monkeypatch.setenv("QCAT_QUIET", "1")
    directory = tmp_path_factory.mktemp("taxonomy")
    raw = materialize([b"T\tToys\t", b"L\tToys > Lego\tT"] + lines, b"id\tpath\tparent", ending, bom, final)
    (directory / "taxonomy.tsv").write_bytes(raw)
    (directory / "log.csv").write_text("query,category,clicks\nlego,L,3\ntoys,Toys,3\n")
    out_path = directory / "table.parquet"
    code, out, err = run_cli(capsys, ["data", "ingest", directory / "log.csv", "--taxonomy", directory / "taxonomy.tsv",
                                      "--min-clicks", "1", "--out", out_path])
    assert code != 70, err
    if code != 0:
        return check_error(code, err, "taxonomy", [out_path])
    taxonomy = load_taxonomy(directory / "taxonomy.tsv")
    text = raw.removeprefix(b"\xef\xbb\xbf").decode()
    nodes = [line for line in text.split("\n")[1:] if line.strip()]
    assert len(taxonomy) == len(nodes)  # one node per line: none dropped, none merged
    for i, path in enumerate(taxonomy.paths):  # a tree whose parents agree with the paths
        parent = taxonomy.parents[i]
        assert (taxonomy.paths[parent] if parent >= 0 else ()) == path[:-1]
    # Issue 37, item 5: "Toys" as one node's id and another's path names neither: the row is skipped.
    at_path = [node for node, path in zip(taxonomy.ids, taxonomy.paths) if path == ("Toys",)]
    both = "Toys" in taxonomy.ids and at_path != ["Toys"] and bool(at_path)
    assert ("skipped 1 rows: category names several taxonomy nodes" in out) == (both or len(at_path) > 1), out
    OUTCOMES[("taxonomy", "exit 0")] += 1


RESULT_ROWS = ["lego,a,1,a1", "lego,b,1,b1", "lego,a,2,a2", "lego,b,2,b2", "tv,a,1,a3", "tv,b,1,b3", "tv,a,-1,x",
               "tv,b,1.5,y", "tv,a,1", "q" * 5000 + ",a,3,a9"]


@pytest.fixture(scope="module")
def judging_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("judging") / "j.db"
    from qcat.cli import main

    assert main(["db", "upgrade", "--url", str(db)]) == 0
    return db


def sessions_in(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as connection:
        return connection.execute("select count(*) from judging_sessions").fetchone()[0]


@pytest.mark.slow
@settings(max_examples=60 * EXAMPLES, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(nasty(RESULT_ROWS), max_size=10), suffix=st.sampled_from([".csv", ".tsv", ".jsonl"]), **files)
def test_result_files_exit_0_with_every_line_accounted_for_or_2_with_one_line(tmp_path_factory, capsys, monkeypatch,
                                                                              judging_db, lines, suffix, ending, bom,
                                                                              final):
    from qcat.judging.grading.imports import read_results

    monkeypatch.setenv("QCAT_QUIET", "1")
    directory = tmp_path_factory.mktemp("results")
    lines = [row.encode() for row in RESULT_ROWS[:4]] + lines  # both systems, then the generated lines
    header = b"query,system,rank,listing_id"
    if suffix == ".tsv":
        header, lines = header.replace(b",", b"\t"), [line.replace(b",", b"\t") for line in lines]
    if suffix == ".jsonl":
        def as_json(line: bytes) -> bytes:
            fields = line.split(b",")
            if len(fields) == 4 and line.isascii() and b"\n" not in line and b"\r" not in line and b'"' not in line:
                return json.dumps(dict(zip(("query", "system", "rank", "listing_id"),
                                           (f.decode() for f in fields)))).encode()
            return line
        body = [as_json(line) for line in lines]
        raw = (b"\xef\xbb\xbf" if bom else b"") + ending.join(body) + (ending if final else b"")
    else:
        raw = materialize(lines, header, ending, bom, final, b"\t" if suffix == ".tsv" else b",")
    path = directory / f"results{suffix}"
    path.write_bytes(raw)
    before = sessions_in(judging_db)
    code, out, err = run_cli(capsys, ["judge", "create-session", "--results", path, "--default-segment", "head",
                                      "--judges-per-query", "1", "--url", judging_db, "--name", directory.name])
    assert code != 70, err
    if code != 0:
        check_error(code, err, "results", [])
        assert sessions_in(judging_db) == before
        return
    imported = read_results([path], "head")
    assert imported.lines == physical_line_count(raw)
    assert imported.lines == imported.header_lines + imported.blank_lines + imported.rows + len(imported.bad_rows)
    assert sessions_in(judging_db) == before + 1
    OUTCOMES[("results", "exit 0")] += 1


# -- Issue 37, items 1-5: logs whose table came out wrong with exit 0. Rows are drawn from a few
# values (so exact duplicates, typed variants and empty counts are frequent); an oracle says which
# rows are usable and how many clicks the table must hold, and no pair may have more clicks than
# impressions.

from qcat.text.normalize import normalize  # noqa: E402

TREE = "id\tpath\tparent\nT\tToys\t\nK\tToys > Lego\tT\nV\tTVs\t\n"
COLLIDING = TREE + "Toys\tStuff\t\n"  # id "Toys" is also T's path: "Toys" names neither (item 5)
AGG_QUERIES = ["lego", "LEGO", "lego  ", "tv", "TV", "!!!", ""]
NOT_TEXT = [["lego"], 42, {"q": "tv"}, True]  # JSON queries that are not strings (item 4)
AGG_CATEGORIES = ["K", "Toys > Lego", "V", "TVs", "Toys", "Stuff", "NOPE"]
CLICKS = ["3", "1", "0", "", " 2 ", "7"]  # "" an empty cell (item 3)
IMPRESSIONS = ["", "10", "7", "3", " 20 ", "1"]  # some below the clicks: such a row is refused, a pair never
agg_row = st.fixed_dictionaries({"query": st.sampled_from(AGG_QUERIES), "category": st.sampled_from(AGG_CATEGORIES),
                                 "clicks": st.sampled_from(CLICKS), "impressions": st.sampled_from(IMPRESSIONS)})


def usable_clicks(row: dict, has_clicks: bool, has_impressions: bool, colliding: bool) -> float | None:
    """The oracle: a row's clicks where it is usable, None where it must be skipped."""
    query = row["query"]
    if not isinstance(query, str) or not normalize(query):
        return None
    category = row["category"].strip()
    if category not in ("K", "Toys > Lego", "V", "TVs", "Stuff") and not (category == "Toys" and not colliding):
        return None
    if category == "Stuff" and not colliding:
        return None
    clicks = row["clicks"] if has_clicks else "1"
    if clicks is None or not str(clicks).strip():
        return None
    impressions = row["impressions"] if has_impressions else None
    if impressions not in (None, "") and float(clicks) > float(impressions):
        return None
    return float(clicks)


@settings(max_examples=80 * EXAMPLES, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rows=st.lists(agg_row, min_size=1, max_size=14), fmt=st.sampled_from(["csv", "jsonl"]), colliding=st.booleans(),
       columns=st.sampled_from([("query", "category", "clicks", "impressions")] * 3 + [
           ("query", "category", "clicks"), ("query", "category"), ("query", "category", "impressions"),
           ("query", "category", "category", "clicks"), ("query", "Query", "category", "clicks")]),
       json_quirks=st.lists(st.sampled_from(["none", "null", "omit", "list"]), min_size=14, max_size=14))
@pytest.mark.slow
def test_aggregated_tables_hold_exactly_the_usable_clicks_and_no_ctr_above_one(
        tmp_path_factory, capsys, monkeypatch, rows, fmt, colliding, columns, json_quirks):
    import pyarrow.parquet as pq

    monkeypatch.setenv("QCAT_QUIET", "1")
    directory = tmp_path_factory.mktemp("aggregate")
    (directory / "taxonomy.tsv").write_text(COLLIDING if colliding else TREE)
    duplicated = len({c.lower() for c in columns}) < len(columns)
    if fmt == "csv":
        lines = [",".join(columns)] + [",".join(row[c.lower()] for c in columns) for row in rows]
        (directory / "log.csv").write_text("\n".join(lines) + "\n")
    else:
        records = []
        for row, quirk in zip(rows, json_quirks):
            record = {c: row[c.lower()] for c in columns}
            for name in ("clicks", "impressions"):  # an empty cell as JSON null, or the field left out
                if record.get(name) == "" and quirk in ("null", "omit"):
                    record[name] = None
                    if quirk == "omit":
                        del record[name]
            if quirk == "list":
                record["query"] = NOT_TEXT[len(records) % len(NOT_TEXT)]
                row = dict(row, query=record["query"])
            rows[len(records)] = row
            records.append(json.dumps(record).replace('"Query"', '"query"', 1) if "Query" in columns else
                           json.dumps(record))
        (directory / "log.jsonl").write_text("".join(r + "\n" for r in records))
    log = directory / f"log.{fmt}"
    out_path = directory / "table.parquet"
    code, out, err = run_cli(capsys, ["data", "ingest", log, "--taxonomy", directory / "taxonomy.tsv",
                                      "--min-clicks", "1", "--out", out_path])
    assert code != 70, err
    kind = f"aggregate {fmt}"
    if duplicated and fmt == "csv":  # item 1
        assert code == 2 and "twice" in err, err
        return check_error(code, err, kind, [out_path])
    if fmt == "jsonl":
        has_clicks = any(json.loads(r).get("clicks") is not None for r in records)
        has_impressions = True
        rows = [dict(row, clicks=json.loads(r).get("clicks"), impressions=json.loads(r).get("impressions"))
                for row, r in zip(rows, records)]
        if "Query" in columns:  # a JSON object naming a field twice is a malformed row (item 1, JSON Lines)
            rows = []
    else:
        has_clicks, has_impressions = "clicks" in columns, "impressions" in columns
    expected = [usable_clicks(row, has_clicks, has_impressions, colliding) for row in rows]
    clicks = sum(c for c in expected if c is not None)
    if not any(c is not None and c >= 1 for c in expected):
        return check_error(code, err, kind, [out_path])
    assert code == 0, err
    read, used, skipped = counts_line(out, r"([\d,]+) rows read, ([\d,]+) used, ([\d,]+) skipped")
    assert used == sum(c is not None for c in expected) and read == used + skipped
    table = pq.read_table(out_path).to_pydict()
    assert math.isclose(sum(table["clicks"]), clicks)  # every usable click, none invented (items 3, 4)
    assert all(i is None or math.isnan(i) or k <= i for k, i in zip(table["clicks"], table["impressions"]))  # item 2
    # Clicks per category as the oracle files them: "Toys" (not colliding) counts for T's Other
    # leaf; with the collision it is skipped and "Stuff" names id Toys by its path (item 5).
    counted = {"K": "K", "Toys > Lego": "K", "V": "V", "TVs": "V", "Toys": "T/other", "Stuff": "Toys"}
    per_category: Counter = Counter()
    for row, c in zip(rows, expected):
        if c is not None:
            per_category[counted[row["category"]]] += c
    found: Counter = Counter()
    for category, k in zip(table["category"], table["clicks"]):
        found[category] += k
    assert {c: k for c, k in found.items()} == {c: k for c, k in per_category.items() if k >= 1}
    OUTCOMES[(kind, "exit 0")] += 1
