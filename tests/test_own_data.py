"""Training, evaluating and failing cleanly on a user's own data: one test per defect that a
new user hit (issue 13). Every CLI path here must end in a one-line error (exit 2) or succeed;
none may exit 70 (internal error)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CLICKS = DATA / "bestbuy_clicks_sample.csv"
BESTBUY = DATA / "bestbuy_categories_2016.json.gz"
GOOGLE = DATA / "google_product_taxonomy_2021-09-21.txt"
DEMO = ROOT / "demo" / "qcat_demo" / "model"
TV = "abcat0101001"  # Best Buy: All Flat-Panel TVs


def qcat(*args, stdin: bytes | None = None, env: dict | None = None, cwd=None):
    result = subprocess.run([sys.executable, "-m", "qcat.cli", *map(str, args)], input=stdin, capture_output=True,
                            timeout=300, env=os.environ | (env or {}), cwd=cwd)
    assert result.returncode != 70, result.stderr.decode(errors="replace")
    return result


def one_line_error(result) -> str:
    """The single stderr line of a user error (exit 2)."""
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2, result.stderr.decode()
    assert len(lines) == 1 and lines[0].startswith("qcat: error: "), lines
    return lines[0]


def last_error(result) -> str:
    """The last stderr line of a command that printed progress before its error (exit 2)."""
    assert result.returncode == 2, result.stderr.decode()
    line = result.stderr.decode().strip().splitlines()[-1]
    assert line.startswith("qcat: error: ") and "internal error" not in line
    return line


# 1 -- training on a log with nothing usable: one line, exit 2

@pytest.mark.slow
@pytest.mark.parametrize("log_text, taxonomy, message", [
    ("query,category\n", BESTBUY, "the log holds no data rows; nothing to train on"),
    (None, GOOGLE, "no usable rows: all 927 rows were skipped (reasons above); nothing to train on"),
    (f"query,category,clicks\nsharp tv,{TV},5\nnook,{TV},4\n", BESTBUY, "0 validation (query, category) pairs"),
])
def test_train_on_unusable_logs_is_one_line(tmp_path, log_text, taxonomy, message):
    log = CLICKS
    if log_text is not None:
        log = tmp_path / "log.csv"
        log.write_text(log_text)
    result = qcat("train", "nb", "--log", log, "--taxonomy", taxonomy, "--out", tmp_path / "model")
    assert message in last_error(result)
    assert b"nan" not in result.stdout and not (tmp_path / "model").exists()


# 2 -- too little data: say how much survives each step, suggest --min-clicks 1

@pytest.mark.slow
def test_small_surviving_data_is_a_warning_with_the_counts(tmp_path):
    result = qcat("train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--out", tmp_path / "model")
    assert result.returncode == 0
    stderr = result.stderr.decode()
    assert ("warning: too little data to train or evaluate reliably: 798 usable rows -> 659 (query, category) "
            "pairs -> 19 pairs of 19 queries with at least 3 clicks -> 13 train / 3 validation / 3 test queries") in stderr
    assert "--min-clicks 3 dropped 640 of 659 pairs" in stderr and "try --min-clicks 1" in stderr
    enough = qcat("train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1", "--out", tmp_path / "m1")
    assert enough.returncode == 0 and b"warning" not in enough.stderr


# 3 -- invalid UTF-8 on classify's stdin

@pytest.mark.parametrize("env", [{"LC_ALL": "C.UTF-8"}, {"PYTHONIOENCODING": "utf-8"}])
def test_invalid_utf8_stdin_line_is_reported_and_the_rest_classified(env):
    result = qcat("classify", "--json", "-k", "1", stdin=b"lego\n\xff\xfe tv\nhornby train set\n", env=env)
    assert result.returncode == 2
    records = [json.loads(line) for line in result.stdout.decode("utf-8").splitlines()]  # strict: valid UTF-8 out
    assert [r.get("normalized") for r in records] == ["lego", None, "hornby train set"]
    assert records[1]["error"] == "stdin line 2: not valid UTF-8 (byte 1: b'\\xff')"
    assert "qcat: error: stdin line 2: not valid UTF-8" in result.stderr.decode()


# 4 -- a quoted CSV field holding a newline

def test_a_quoted_field_never_runs_across_lines(tmp_path):
    """Issue 34, item 1: a quote left open on its line is a malformed row there, and the next line
    is a row again (before, the two lines were one record, "sony tv")."""
    from qcat.taxonomy import load_taxonomy
    from qcat.training.clicklogs.clicklog import ingest

    (tmp_path / "log.csv").write_text(f'query,category,clicks\n"sony\ntv",{TV},5\nsharp tv,{TV},x\n')
    result = ingest(tmp_path / "log.csv", load_taxonomy(BESTBUY), min_clicks=1)
    assert result.report.examples["malformed_row"] == [(2, '"sony')]
    assert list(result.table.queries) == ["tv"]  # line 3, 'tv"', read as a row of its own
    assert result.report.examples["bad_clicks"] == [(4, "x")]
    assert (result.report.lines, result.report.rows_read) == (4, 3)


# 5 -- evaluating your own log; a bad corpus.json

@pytest.mark.slow
def test_evaluate_log_scores_the_test_queries_of_the_training_split(tmp_path):
    train = qcat("train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1", "--out", tmp_path / "m")
    assert train.returncode == 0
    trained_test = json.loads((tmp_path / "m" / "manifest.json").read_text())["metrics"]["test"]["pr@1"]
    result = qcat("evaluate", "--model", tmp_path / "m", "--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1",
                  "--out", tmp_path / "report", "--json")
    assert result.returncode == 0, result.stderr.decode()
    report = json.loads(result.stdout)
    assert report["source"]["queries"] == 65 and report["source"]["log"] == str(CLICKS)
    assert report["models"][0]["segments"]["all"]["PR@1"] == pytest.approx(trained_test)
    assert "65 click-log queries" in (tmp_path / "report" / "report.md").read_text()
    assert "--log and --taxonomy go together" in one_line_error(
        qcat("evaluate", "--model", tmp_path / "m", "--log", CLICKS))


@pytest.mark.slow
def test_a_corpus_json_without_periods_is_one_line(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "corpus.json").write_text(json.dumps({"taxonomy": "t.tsv", "log": "l.csv", "periods": {}}))
    line = one_line_error(qcat("evaluate", "--model", DEMO, "--corpus", corpus, "--out", tmp_path / "r"))
    assert "periods needs 'base'" in line


# 6 -- one-level category paths

def test_one_level_paths_are_categories():
    from qcat.taxonomy import load_taxonomy

    google = load_taxonomy(GOOGLE)
    assert google.resolve("Animals & Pet Supplies") == "1"
    assert google.resolve("Animals & Pet Supplies > Pet Supplies") == "2"
    assert google.resolve("No Such Thing") is None


# 7 -- ingest --out: the format from the suffix, and the table is a click log again

@pytest.mark.slow
def test_ingest_out_format_follows_the_suffix_and_round_trips(tmp_path):
    out = tmp_path / "pairs.csv.gz"
    assert qcat("data", "ingest", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1", "--out", out).returncode == 0
    header = gzip.decompress(out.read_bytes()).decode().splitlines()[0]
    assert header == "query,category,clicks,impressions,ctr,query_impressions"
    again = qcat("data", "ingest", out, "--taxonomy", BESTBUY, "--min-clicks", "1")
    assert b"659 rows read, 659 used, 0 skipped" in again.stdout
    parquet = tmp_path / "pairs.parquet"
    assert qcat("data", "ingest", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1", "--out", parquet).returncode == 0
    assert parquet.read_bytes()[:4] == b"PAR1"
    refused = qcat("data", "ingest", CLICKS, "--taxonomy", BESTBUY, "--out", tmp_path / "pairs.xlsx")
    assert "cannot tell the table format from the name" in one_line_error(refused)
    assert refused.stdout == b""  # refused before any work


# 8 -- internal errors that are user errors, outputs checked before the work

def tampered_manifest(tmp_path: Path, edit) -> Path:
    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO / "nb", bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    edit(bundle, manifest)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


@pytest.mark.slow
def test_user_errors_that_were_internal_errors(tmp_path):
    (tmp_path / "fake.csv.gz").write_text("query,category\n")
    assert "not a valid gzip file" in one_line_error(qcat("data", "ingest", tmp_path / "fake.csv.gz", "--taxonomy", BESTBUY))

    for out, message in ((tmp_path / "missing" / "t.parquet", "does not exist"),
                         (tmp_path, "cannot tell the table format")):
        result = qcat("data", "ingest", CLICKS, "--taxonomy", BESTBUY, "--out", out)
        assert message in one_line_error(result) and result.stdout == b""
    (tmp_path / "afile").write_text("x")
    result = qcat("train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--out", tmp_path / "afile")
    assert "is a file" in one_line_error(result) and result.stdout == b""

    def backend_list(bundle, manifest):
        manifest["backend"] = ["nb"]
    assert "is not a qcat manifest" in one_line_error(
        qcat("classify", "lego", "--model", tampered_manifest(tmp_path / "a", backend_list)))

    def bad_utf8_labels(bundle, manifest):
        (bundle / "labels.txt").write_bytes(b"\xff\xfe" + (bundle / "labels.txt").read_bytes())
        manifest["files"]["labels.txt"] = hashlib.sha256((bundle / "labels.txt").read_bytes()).hexdigest()
    assert "labels.txt is not valid UTF-8" in one_line_error(
        qcat("classify", "lego", "--model", tampered_manifest(tmp_path / "b", bad_utf8_labels)))


# 9 -- usage errors are one line in every command group

@pytest.mark.parametrize("args", [["evaluate"], ["golden", "evaluate"], ["judge", "report"], ["db", "upgrade", "--bogus"],
                                  ["classify", "-k", "x"], ["data", "ingest"], ["train", "nb"]])
def test_usage_errors_are_one_line(args):
    one_line_error(qcat(*args))


# 10 -- flags blamed right, manifest.json as --model, stray files in --out

@pytest.mark.slow
def test_flags_and_model_paths_are_named_right(tmp_path):
    assert "give its directory" in one_line_error(qcat("classify", "lego", "--model", DEMO / "manifest.json"))
    assert "argument --min-clicks: must be a number of at least 0, got -5" in one_line_error(
        qcat("train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "-5", "--out", tmp_path / "m"))
    assert "argument --candidates: must be at least 1, got -1" in one_line_error(
        qcat("golden", "evaluate", "--baseline", DEMO, "--target", DEMO, "--candidates", "-1"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    result = qcat("train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--out", tmp_path / "full")
    assert "is a directory that is not empty" in one_line_error(result) and result.stdout == b""


# 11 -- arguments are checked before data is loaded

@pytest.mark.slow
def test_a_missing_model_fails_before_the_corpus_is_read(tmp_path):
    result = qcat("evaluate", "--model", tmp_path / "nope", "--out", tmp_path / "r")
    assert "model directory" in one_line_error(result) and b"queries" not in result.stderr


@pytest.mark.slow
def test_a_duplicate_session_name_fails_before_the_search(tmp_path):
    from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
    from qcat.judging.store.connection import open_store

    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert qcat("db", "upgrade", "--url", url).returncode == 0
    store = open_store(url)  # the session "s" exists (stored directly: the search it would run is not the point)
    store_session(store, "s", str(DEMO / "nb"), str(DEMO), [QuerySpec("lego", "head", [Listing("1")], [Listing("2")])])
    store.dispose()
    args = ["judge", "create-session", "--url", url, "--baseline", DEMO / "nb", "--target", DEMO, "--queries", "3",
            "--name", "s"]
    line = one_line_error(qcat(*args))  # one line: nothing was searched or printed first
    assert "a judging session named 's' already exists" in line


# 12 -- JSON lines stay lines

def test_json_output_escapes_unicode_line_breaks():
    queries = "lego\u2028star\nbed\u2029room\nhornby\u0085train\n".encode()
    result = qcat("classify", "--json", stdin=queries)
    text = result.stdout.decode("utf-8")
    assert len(text.splitlines()) == 3  # str.splitlines() breaks on U+2028/2029/0085 too
    assert [json.loads(line)["query"] for line in text.splitlines()] == ["lego\u2028star", "bed\u2029room", "hornby\u0085train"]


# 13 -- no silent no-ops

@pytest.mark.slow
def test_nothing_to_do_is_said(tmp_path):
    assert "stdin was empty" in one_line_error(qcat("classify", stdin=b""))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert qcat("db", "upgrade", "--url", url).returncode == 0
    sessions = qcat("judge", "sessions", "--url", url)
    assert sessions.returncode == 0 and b"has no judging sessions yet" in sessions.stderr
    (tmp_path / "log.csv").write_text("query,category\nlego,NOPE\n")
    result = qcat("data", "ingest", tmp_path / "log.csv", "--taxonomy", BESTBUY)
    assert "no usable rows: all 1 rows were skipped" in last_error(result)


def test_a_bare_carriage_return_is_a_malformed_row(tmp_path):
    """Found by the property test: Python's csv writer leaves a lone CR unquoted."""
    from qcat.taxonomy import load_taxonomy
    from qcat.training.clicklogs.clicklog import ingest

    (tmp_path / "log.csv").write_bytes(f"query,category\nok,{TV}\n\r,{TV}\nfine tv,{TV}\n".encode())
    report = ingest(tmp_path / "log.csv", load_taxonomy(BESTBUY), min_clicks=1).report
    assert report.rows_read == 3 and report.rows_used == 2
    assert report.examples["malformed_row"] == [(3, f"\r,{TV}")]
