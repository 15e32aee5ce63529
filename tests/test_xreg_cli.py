"""``qcat train xreg``, ``qcat classify --backend xreg``, ``qcat labelwise`` and the hybrid with
an XReg part, end to end in subprocesses (on the Best Buy click sample)."""

import json
import subprocess
import sys

import pytest
from test_cli import qcat


@pytest.fixture(scope="module")
def xreg_dir(tmp_path_factory, data_dir):
    out = tmp_path_factory.mktemp("xreg") / "model"
    result = qcat("train", "xreg", "--log", data_dir / "bestbuy_clicks_sample.csv",
                  "--taxonomy", data_dir / "bestbuy_categories_2016.json.gz", "--min-clicks", "1",
                  "--trees", "2", "--leaf-size", "8", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "xreg-t" in result.stdout and "weights" in result.stdout
    return out


@pytest.fixture()
def queries_file(tmp_path):
    path = tmp_path / "queries.txt"
    path.write_text("sharp tv\niphone case\n\n!!!\nsamsung galaxy\nlaptop\nipad\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_classify_with_the_xreg_backend(xreg_dir):
    result = qcat("classify", "--model", xreg_dir, "--backend", "xreg", "--json", "--explain", "sharp tv", "ipad")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["backend"] for r in records] == ["xreg", "xreg"]
    scores = [c["score"] for c in records[0]["categories"]]
    assert len(scores) == 5 and scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1
    assert records[0]["explanation"][1].startswith("xreg: XReg; beam search over 2 label tree(s)")
    info = qcat("info", xreg_dir)
    assert info.returncode == 0 and "backend        xreg" in info.stdout


@pytest.mark.slow
def test_classify_with_xreg_loads_numpy_only(xreg_dir):
    code = ("import sys; from qcat.cli import main; rc = main(['classify', '--model', sys.argv[1], 'sharp tv']);"
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras', 'duckdb', 'scipy', 'numba', 'sklearn', 'onnxruntime') or m.startswith('qcat.training')];"
            "print(bad, file=sys.stderr); sys.exit(rc or bool(bad))")
    result = subprocess.run([sys.executable, "-c", code, str(xreg_dir)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_labelwise_ranks_the_queries_of_a_file(xreg_dir, queries_file):
    manifest_labels = (xreg_dir / "labels.txt").read_text().split("\n")
    category = manifest_labels[0]
    result = qcat("labelwise", category, "-n", "3", "--queries", queries_file, "--model", xreg_dir, "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["category"] == category and 1 <= len(record["queries"]) <= 3
    assert all(q["line"] in (1, 2, 5, 6, 7) for q in record["queries"])
    scores = [q["score"] for q in record["queries"]]
    assert scores == sorted(scores, reverse=True)
    assert "skipped 2 line(s)" in result.stderr and "1 blank, 1 unusable (line 4: " in result.stderr
    text = qcat("labelwise", category, "--queries", queries_file, "--model", xreg_dir, "--factor", "100")
    assert text.returncode == 0 and text.stdout.startswith(f"{category}  ")


@pytest.mark.slow
def test_hybrid_with_an_xreg_long_part(xreg_dir, bestbuy_model_dir, tmp_path, queries_file):
    out = tmp_path / "hybrid"
    result = qcat("train", "hybrid", "--nb", bestbuy_model_dir, "--long-backend", "xreg", "--xreg", xreg_dir,
                  "--cutoff", "1", "--blend", "0", "--out", out)
    assert result.returncode == 0, result.stderr
    assert (out / "xreg" / "manifest.json").exists() and (out / "nb" / "manifest.json").exists()
    routed = qcat("classify", "--model", out, "--json", "--explain", "ipad", "sharp tv")
    assert routed.returncode == 0, routed.stderr
    records = [json.loads(line) for line in routed.stdout.splitlines()]
    assert records[0]["explanation"][1].startswith("hybrid: 1 token(s) <= cutoff 1, so nb answers")
    assert records[1]["explanation"][1].startswith("hybrid: 2 token(s) > cutoff 1, so xreg answers")
    forced = qcat("classify", "--model", out, "--backend", "xreg", "--explain", "ipad")
    assert forced.returncode == 0 and "--backend xreg sends every query to xreg" in forced.stdout
    category = (xreg_dir / "labels.txt").read_text().split("\n")[0]
    assert qcat("labelwise", category, "--queries", queries_file, "--model", out).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (("labelwise", "no-such-category", "--queries", "QUERIES"), "category 'no-such-category' is not one of the"),
        (("labelwise", "CATEGORY", "--queries", "/nonexistent/q.txt"), "--queries /nonexistent/q.txt: no such file"),
        (("labelwise", "CATEGORY", "--queries", "EMPTY"), "holds no row to use (a queries file"),
        (("labelwise", "CATEGORY", "--queries", "QUERIES", "-n", "0"), "argument -n: must be at least 1, got 0"),
        (("labelwise", "CATEGORY", "--queries", "QUERIES", "--factor", "abc"), "argument --factor: must be a number, got 'abc'"),
        (("labelwise", "CATEGORY", "--queries", "QUERIES", "--factor", "-1"), "argument --factor: must be a number greater than 0, got -1"),
        (("classify", "x", "--backend", "xmlq"), "is a xreg model: --backend xmlq needs a hybrid bundle"),
        (("train", "xreg", "--trees", "0", "--out", "/tmp/never"), "argument --trees: must be in 1..100, got 0"),
        (("train", "xreg", "--C", "ten", "--out", "/tmp/never"), "argument --C: must be a number, got 'ten'"),
        (("train", "hybrid", "--nb", "NB", "--long-backend", "xreg", "--out", "/tmp/never"),
         "--long-backend xreg needs --xreg DIR"),
    ],
)
def test_user_errors_are_one_line(args, message, xreg_dir, queries_file, tmp_path, bestbuy_model_dir):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    category = (xreg_dir / "labels.txt").read_text().split("\n")[0]
    replace = {"QUERIES": str(queries_file), "EMPTY": str(empty), "CATEGORY": category, "NB": str(bestbuy_model_dir)}
    args = [replace.get(a, a) for a in args]
    if args[0] in ("labelwise", "classify"):
        args += ["--model", str(xreg_dir)]
    result = qcat(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_labelwise_needs_an_xreg_model(bestbuy_model_dir, queries_file):
    result = qcat("labelwise", "abcat0101001", "--queries", queries_file, "--model", bestbuy_model_dir)
    assert result.returncode == 2 and "is a nb model: labelwise inference needs an xreg bundle" in result.stderr


def test_labelwise_names_why_a_query_line_is_skipped(tmp_path, capsys):
    """Issue 53, item 7: a line of --queries that is not UTF-8 was called "no query"; it is named
    as the input layer names it (invalid UTF-8 and the byte), and so is an empty one."""
    from qcat.cli.labelwise import read_query_file

    (tmp_path / "q.txt").write_bytes(b"tv\nab\xff cd\n!!!\n\nlaptop\n")
    queries, lines = read_query_file(tmp_path / "q.txt")
    assert (queries, lines) == (["tv", "laptop"], [1, 5])
    said = capsys.readouterr().err
    assert f"qcat: skipped 3 line(s) of {tmp_path / 'q.txt'}: 1 blank, 2 unusable (line 2: not valid UTF-8 (byte 3 " \
           "of the line, b'\\xff'); line 3: the query '!!!' is empty once normalized" in said
    assert "no query" not in said
