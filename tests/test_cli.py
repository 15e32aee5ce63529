"""The ``qcat`` command end to end, in real subprocesses."""

import json
import os
import shutil
import subprocess
import sys

import pytest


def qcat(*args, stdin=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "qcat.cli", *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_classify_demo_model_dior_gaudron():
    result = qcat("classify", "dior gaudron")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("dior gaudron")
    ranked = [line for line in lines[1:] if line.strip()[:2].strip(".").isdigit()]
    assert len(ranked) == 5
    scores = [float(line.split()[1]) for line in ranked]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1.0001


@pytest.mark.slow
def test_classify_json_schema_and_k(bestbuy_model_dir):
    result = qcat("classify", "Sharp TV", "iphone case", "--model", bestbuy_model_dir, "-k", "3", "--json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["query"] for r in records] == ["Sharp TV", "iphone case"]
    assert records[0]["normalized"] == "sharp tv" and records[0]["backend"] == "nb"
    top = records[0]["categories"]
    assert len(top) == 3 and set(top[0]) == {"id", "path", "score"}
    assert top[0]["path"] == "TV & Home Theater > TVs > All Flat-Panel TVs"
    # Probabilities over every category (not renormalized over the top 3), best first.
    assert sum(c["score"] for c in top) <= 1 + 1e-6 and [c["score"] for c in top] == sorted((c["score"] for c in top), reverse=True)


@pytest.mark.slow
def test_classify_reads_stdin_and_reports_empty_lines(bestbuy_model_dir):
    result = qcat("classify", "--model", bestbuy_model_dir, "--json", stdin="sharp tv\n???\nnook\n")
    assert result.returncode == 2
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["query"] for r in records] == ["sharp tv", "???", "nook"]
    assert "error" in records[1] and "categories" in records[2]
    assert "stdin line 2: query '???' is empty after normalization" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_byte_order_mark_on_stdin_is_not_part_of_the_query(bestbuy_model_dir):
    """Issue 37, item 7: the BOM was echoed in the first record's "query"."""
    result = subprocess.run([sys.executable, "-m", "qcat.cli", "classify", "--model", str(bestbuy_model_dir), "--json"],
                            input="\ufeffsharp tv\r\n\ufeffnook\r\n".encode("utf-8"), capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.decode("utf-8").splitlines()]
    assert [r["query"] for r in records] == ["sharp tv", "\ufeffnook"]  # only the stream's first bytes are a BOM
    assert records[0]["normalized"] == "sharp tv"


def test_explain_says_which_model_answered(bestbuy_model_dir):
    result = qcat("classify", "sharp", "zzz unknown", "--model", bestbuy_model_dir, "--explain")
    assert result.returncode == 0
    assert "full-query lookup table" in result.stdout
    assert "scores are the category prior" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("classify", "  !! "), "is empty after normalization"),
        (("classify", "x", "--model", "/nonexistent/model"), "model directory /nonexistent/model does not exist"),
        (("classify", "x", "-k", "0"), "argument -k: must be in 1..100, got 0"),
        (("info", "/nonexistent"), "does not exist"),
        (("data", "ingest", "/nonexistent.csv", "--taxonomy", "/nonexistent.tsv"), "--taxonomy /nonexistent.tsv: no such file"),
    ],
)
def test_user_errors_are_one_line_without_traceback(args, message):
    result = qcat(*args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_tampered_model_is_refused(tmp_path, bestbuy_model_dir):
    target = tmp_path / "model"
    shutil.copytree(bestbuy_model_dir, target)
    (target / "vocabulary.txt").write_text("evil\n")
    result = qcat("classify", "x", "--model", target)
    assert result.returncode == 2
    assert "vocabulary.txt does not match its hash" in result.stderr


def test_info_verifies_and_summarizes(bestbuy_model_dir):
    result = qcat("info", bestbuy_model_dir)
    assert result.returncode == 0, result.stderr
    assert "backend        nb" in result.stdout and "all hashes verified" in result.stdout
    manifest = json.loads(qcat("info", bestbuy_model_dir, "--json").stdout)
    assert manifest["backend"] == "nb"


@pytest.mark.slow
def test_classify_imports_neither_tensorflow_nor_training():
    code = (
        "import sys; from qcat.cli import main; rc = main(['classify', 'hornby train set', '--json']);"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'duckdb', 'scipy', 'numba') or m.startswith('qcat.training')];"
        "print(bad, file=sys.stderr); sys.exit(rc or bool(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_data_ingest_and_train_nb_end_to_end(tmp_path, data_dir):
    out = tmp_path / "table.parquet"
    result = qcat("data", "ingest", data_dir / "bestbuy_clicks_sample.csv",
                  "--taxonomy", data_dir / "bestbuy_categories_2016.json.gz", "--min-clicks", "1", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "927 rows read, 798 used, 129 skipped" in result.stdout and out.exists()
    strict = qcat("data", "ingest", data_dir / "bestbuy_clicks_sample.csv",
                  "--taxonomy", data_dir / "bestbuy_categories_2016.json.gz", "--strict")
    assert strict.returncode == 2 and "bestbuy_clicks_sample.csv row 10: category is not in the taxonomy" in strict.stderr
    model = tmp_path / "nb"
    result = qcat("train", "nb", "--log", data_dir / "bestbuy_clicks_sample.csv",
                  "--taxonomy", data_dir / "bestbuy_categories_2016.json.gz", "--min-clicks", "1", "--out", model)
    assert result.returncode == 0, result.stderr
    assert "test" in result.stdout and (model / "manifest.json").exists()
    assert qcat("classify", "sharp", "--model", model).returncode == 0
