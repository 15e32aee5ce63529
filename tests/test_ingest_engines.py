"""The DuckDB and Spark ingestion engines agree: every aggregated row, every reject count.

The Spark tests share one local[2] session; they skip, saying why, without PySpark or Java.
"""

import csv
import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from qcat.errors import InputError
from qcat.taxonomy import Taxonomy
from qcat.training.clicklogs.clicklog import REASONS, ingest

TAXONOMY = Taxonomy.from_path_tuples(
    ("toys", "trains", "dolls", "gifts-a", "gifts-b"),
    (("Toys",), ("Toys", "Trains"), ("Toys", "Dolls"), ("Gifts",), ("Gifts",)),  # "Gifts": ambiguous
)
HEADER = ("query", "category", "clicks", "impressions", "date")
# (query, category, clicks, impressions, date); every reject reason a parsed row can have,
# rows outside 2025-01-01..2025-03-01 and pairs below 3 clicks.
ROWS = [
    ("Hornby Train", "trains", "2", "10", "2025-01-02"),
    ("hornby  train!", "trains", "2", "10", "2025-02-01"),    # the same query, normalized
    ("hornby train", "Toys > Dolls", "1", "10", "2025-01-03"),  # below min_clicks
    ("baby doll", "dolls", "5", "50", "2025-03-01"),           # outside (date_to is exclusive)
    ("baby doll", "dolls", "3", "", "2025-02-28"),
    ("baby doll", "dolls", "1", "", ""),                        # no date: outside a range
    ("wooden train", "trains", "4", "", "2025-01-05"),
    ("wooden train", "Toys > Trains", "1.5", "2", "2024-12-31"),  # outside
    ("café crème", " trains ", " 3 ", "4", "2025-01-09"),
    ("multi\nline train", "trains", "3", "3", "2025-01-10"),   # a quoted line break: two rows, one malformed
    ("long " * 900, "trains", "3", "5", "2025-01-02"),           # query_too_long (4,500 bytes)
    ("!!!", "trains", "3", "5", "2025-01-02"),                  # empty_query
    ("", "trains", "3", "5", "2025-01-02"),                     # empty_query
    ("thing", "NOPE", "3", "5", "2025-01-02"),                  # unknown_category
    ("thing", "", "3", "5", "2025-01-02"),                      # unknown_category
    ("thing", "Gifts", "3", "5", "2025-01-02"),                 # ambiguous_category
    ("thing", "trains", "-1", "5", "2025-01-02"),               # bad_clicks
    ("thing", "trains", "many", "5", "2025-01-02"),
    ("thing", "trains", "1.5d", "5", "2025-01-02"),
    ("thing", "trains", "nan", "5", "2025-01-02"),
    ("thing", "trains", "inf", "5", "2025-01-02"),
    ("thing", "trains", "", "5", "2025-01-02"),                 # an empty count in a log with counts
    ("thing", "trains", "3", "x", "2025-01-02"),                # bad_impressions
    ("thing", "trains", "3", "-2", "2025-01-02"),
    ("thing", "trains", "9", "5", "2025-01-02"),                # clicks_exceed_impressions
    ("thing", "trains", "3", "5", "yesterday"),                 # bad_date
    ("thing", "trains", "3", "5", "2025-02-30"),
    ("thing", "trains", "3", "5", "2025"),
]
MALFORMED = ["thing,trains,3", "thing,trains,3,5,2025-01-02,extra"]
UNDECODABLE = "caf\xe9,trains,3,5,2025-01-02"  # written as Latin-1
FORMATS = ("csv", "tsv", "jsonl", "parquet")


def write_log(directory, fmt: str):
    path = directory / f"log.{fmt}"
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({c: [r[i] or None for r in ROWS] for i, c in enumerate(HEADER)}), path)
        return path
    if fmt == "jsonl":
        lines = [json.dumps({c: v for c, v in zip(HEADER, row) if v != ""}).encode() for row in ROWS]
        lines.insert(3, json.dumps({"query": "wooden train", "category": "trains", "clicks": 4.0, "date": "2025-01-07"}).encode())
        lines.insert(4, json.dumps({"query": ["wooden", "train"], "category": "trains", "clicks": 3}).encode())  # query_not_text
        lines += [b"not json", b'["a list"]', '{"query": "caf\xe9", "category": "trains"}'.encode("latin-1")]
    else:
        sep = "\t" if fmt == "tsv" else ","
        text = io.StringIO()
        csv.writer(text, delimiter=sep, lineterminator="\n").writerows([HEADER, *ROWS])
        lines = [line.encode() for line in text.getvalue().splitlines()]
        lines += [m.replace(",", sep).encode() for m in MALFORMED] + [UNDECODABLE.replace(",", sep).encode("latin-1")]
        lines.insert(5, b"")  # a blank line: not a row
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def comparable(result):
    table, report = result.table, result.report
    pairs = sorted(zip(table.queries[table.pair_query], table.categories[table.pair_category],
                       table.clicks, np.nan_to_num(table.impressions, nan=-1)))
    counts = {k: getattr(report, k) for k in (
        "rows_read", "rows_used", "rows_outside_dates", "pairs_aggregated", "pairs_below_min_clicks",
        "clicks_below_min_clicks", "pairs_kept", "queries_kept")}
    return {"pairs": pairs, "queries": list(table.queries), "categories": list(table.categories),
            "pair_query": table.pair_query.tolist(), "pair_category": table.pair_category.tolist(),
            "query_impressions": table.query_impressions.tolist(), "skipped": dict(report.skipped), **counts}


@pytest.fixture(scope="module")
def spark_engine():
    pytest.importorskip("pyspark", reason='PySpark is not installed (pip install "qcat[spark]")')
    if not shutil.which("java"):
        pytest.skip("Java is not installed (apt-get install default-jre-headless)")
    from qcat.training.clicklogs.ingest_spark import SparkEngine, session

    spark = session("local[2]", shuffle_partitions=1)
    # Tiny inputs: compiling generated code costs more than it saves.
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    yield lambda: SparkEngine(spark)
    spark.stop()


def run_spark(spark_engine, *args, **kwargs):
    engine = spark_engine()
    try:
        return ingest(*args, engine=engine, **kwargs)
    finally:
        engine.close()


def test_the_csv_log_gives_duckdb_every_reject_reason_the_spark_comparison_relies_on(tmp_path):
    """Without Spark or Java: DuckDB alone skips the CSV log's rows under every reason a CSV cell can
    have (all but too_long and query_not_text), so the comparison below covers each of them."""
    duck = ingest(write_log(tmp_path, "csv"), TAXONOMY, min_clicks=3, date_from="2025-01-01", date_to="2025-03-01")
    assert set(duck.report.skipped) == set(REASONS) - {"too_long", "query_not_text"}
    assert duck.report.skipped["bad_clicks"] == 6 and duck.report.skipped["bad_date"] == 3
    assert duck.report.pairs_below_min_clicks and duck.report.rows_outside_dates
    assert {"line train", "cafe creme"} <= set(duck.table.queries)  # the quoted line break: two rows


@pytest.mark.slow  # a local Spark session
@pytest.mark.parametrize("fmt", FORMATS)
def test_engines_agree_on_every_row_and_reject(tmp_path, spark_engine, fmt):
    path = write_log(tmp_path, fmt)
    options = dict(min_clicks=3, date_from="2025-01-01", date_to="2025-03-01")
    duck = ingest(path, TAXONOMY, **options)
    spark = run_spark(spark_engine, path, TAXONOMY, **options)
    # too_long: a line over 1 MiB (tests/test_trust_inputs.py), which Spark reads as any line
    expected_reasons = set(REASONS) - {"too_long"} - ({"bad_encoding", "malformed_row"} if fmt == "parquet" else set()) \
        - ({"query_not_text"} if fmt != "jsonl" else set())  # a JSON list or number: CSV cells are all text
    assert set(duck.report.skipped) == expected_reasons
    assert duck.report.pairs_below_min_clicks and duck.report.rows_outside_dates
    # A quoted line break: in CSV/TSV its first line is malformed and the second a row of its own.
    split = fmt in ("csv", "tsv")
    assert {"line train" if split else "multi line train", "cafe creme"} <= set(duck.table.queries)
    assert comparable(spark) == comparable(duck)
    # Examples name the same values (Spark without row numbers) where the text is the row's own.
    for reason in set(REASONS) - {"bad_encoding", "malformed_row", "query_not_text"}:
        assert [v for _, v in spark.report.examples.get(reason, [])] == [v for _, v in duck.report.examples.get(reason, [])]
    assert all(row is None for rows in spark.report.examples.values() for row, _ in rows)


@pytest.mark.slow  # a local Spark session
def test_spark_strict_names_reason_and_value(tmp_path, spark_engine):
    path = write_log(tmp_path, "csv")
    with pytest.raises(InputError, match=r"log.csv: malformed row \(.*\): '\"multi'$"):
        run_spark(spark_engine, path, TAXONOMY, strict=True)


@pytest.mark.slow  # a local Spark session
def test_spark_errors_are_one_line(tmp_path, spark_engine):
    with pytest.raises(InputError) as caught:
        run_spark(spark_engine, str(tmp_path / "nothere.parquet"), TAXONOMY)
    assert "nothere.parquet" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow  # a local Spark session
def test_cli_engine_flag_end_to_end(tmp_path, spark_engine, capsys):
    from qcat.cli import main

    path = write_log(tmp_path, "tsv")
    taxonomy = tmp_path / "taxonomy.tsv"
    taxonomy.write_text("id\tpath\n" + "".join(f"{i}\t{' > '.join(p)}\n" for i, p in zip(TAXONOMY.ids, TAXONOMY.paths)))
    outputs = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"{engine}.csv"
        assert main(["data", "ingest", str(path), "--taxonomy", str(taxonomy), "--engine", engine,
                     "--spark-master", "local[2]", "--min-clicks", "1", "--out", str(out)]) == 0
        outputs[engine] = out.read_text()
        report = capsys.readouterr().out
        assert "skipped 2 rows: clicks exceed impressions" not in report  # one such row
        assert "skipped 1 rows: clicks exceed impressions" in report
    assert outputs["spark"] == outputs["duckdb"]


@pytest.mark.slow  # a qcat process starting Spark
def test_cli_bad_master_is_one_line(tmp_path):
    pytest.importorskip("pyspark", reason='PySpark is not installed (pip install "qcat[spark]")')
    if not shutil.which("java"):
        pytest.skip("Java is not installed (apt-get install default-jre-headless)")
    path = write_log(tmp_path, "csv")
    taxonomy = tmp_path / "taxonomy.tsv"
    taxonomy.write_text("id\tpath\ntoys\tToys\ntrains\tToys > Trains\n")
    done = subprocess.run([sys.executable, "-m", "qcat.cli", "data", "ingest", str(path), "--taxonomy", str(taxonomy),
                           "--engine", "spark", "--spark-master", "nonsense://nowhere"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("qcat: error:")]
    assert len(errors) == 1 and "nonsense://nowhere" in errors[0]


def test_spark_missing_is_one_line_error(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pyspark(name, *args, **kwargs):
        if name.startswith("pyspark"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyspark)
    path = write_log(tmp_path, "csv")
    with pytest.raises(InputError, match=r'needs PySpark: pip install "qcat\[spark\]"'):
        ingest(path, TAXONOMY, engine="spark")


@pytest.mark.slow  # a local Spark session
def test_spark_echoes_a_binary_header_printable_and_short(tmp_path, spark_engine):
    """Issue 34, item 8: before, ~4 KB of raw bytes, ESC included, went into the error."""
    path = tmp_path / "garbage.csv"
    path.write_bytes(b"\x1b[31m\x89PNG\r\x00" + bytes(range(1, 32)) * 120 + b",x\n")
    with pytest.raises(InputError) as caught:
        run_spark(spark_engine, path, TAXONOMY)
    message = str(caught.value)
    assert "\x1b" not in message and len(message) < 400 and "(found: '\\x1b[31m" in message
