"""Every subcommand, driven with invalid values of its numeric, path and choice flags: each is a
one-line error (``qcat: error: ...``, exit 2) given before any heavy work, and nothing is written.
Then the output-writing defects: unwritable or existing outputs, a full disk, two trainings into
one ``--out`` (issue: CLI hardening).

The table runs the CLI in-process (``qcat.cli.main``), in a fresh working directory, and compares
that directory (hidden files included) before and after."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qcat.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CLICKS = DATA / "bestbuy_clicks_sample.csv"
BESTBUY = DATA / "bestbuy_categories_2016.json.gz"
DEMO = ROOT / "demo" / "qcat_demo" / "model"
TV = "abcat0101001"

LOG = ["--log", "LOG", "--taxonomy", "TAX"]


def snapshot(directory: Path) -> dict[str, tuple]:
    """Every entry under ``directory`` (hidden ones too) with its kind, size and mtime."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root) / name
            stat = path.lstat()
            found[str(path.relative_to(directory))] = (path.is_dir(), stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    """A working directory with a few existing things for flags to point at."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QCAT_DB_URL", raising=False)
    monkeypatch.delenv("QCAT_DUCKDB_MEMORY_LIMIT", raising=False)
    (tmp_path / "existing.csv").write_text("query,category,clicks\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    (tmp_path / "two.csv").write_text(f"query,category,clicks\nsharp tv,{TV},5\nnook,{TV},4\n")
    return tmp_path


def run(workdir: Path, capsys, args, env=None, monkeypatch=None) -> tuple[int, str, str]:
    replace = {"LOG": str(CLICKS), "TAX": str(BESTBUY), "DEMO": str(DEMO), "FILE": str(workdir / "existing.csv"),
               "FULL": str(workdir / "full"), "TWO": str(workdir / "two.csv")}
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = main([replace.get(str(a), str(a)) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("qcat: error: "), lines
    return lines[0]


CASES = [
    # classify / info / labelwise
    (["classify", "tv", "-k", "1000000000"], "argument -k: must be in 1..100, got 1000000000"),
    (["classify", "tv", "-k", "99999999999999999999"], "argument -k: must be in 1..100"),
    (["classify", "tv", "-k", "0"], "argument -k: must be in 1..100, got 0"),
    (["classify", "tv", "-k", "five"], "argument -k: must be an integer"),
    (["classify", "tv", "--backend", "svm"], "argument --backend: invalid choice"),
    (["classify", "tv", "--cutoff", "9"], "argument --cutoff: invalid choice"),
    (["classify", "tv", "--model", "missing-model"], "model directory missing-model does not exist"),
    (["classify", "tv", "--model", "FILE"], "is a file; a model is a bundle directory"),
    (["info", "missing-model"], "does not exist"),
    (["labelwise", "x", "--queries", "q.txt", "-n", "0"], "argument -n: must be at least 1, got 0"),
    (["labelwise", "x", "--queries", "q.txt", "--factor", "inf"], "argument --factor: must be a finite number"),
    (["labelwise", "x", "--queries", "q.txt", "--factor", "nan"], "argument --factor: must be a finite number"),
    (["labelwise", "x", "--queries", "q.txt", "--factor", "0"], "argument --factor: must be a number greater than 0"),
    # serve: only values refused before anything is bound
    (["serve", "--port", "70000"], "argument --port: must be in 0..65535"),
    (["serve", "--port", "-1"], "argument --port: must be in 0..65535"),
    (["serve", "--workers", "0"], "argument --workers: must be in 1..256"),
    (["serve", "--workers", "100000"], "argument --workers: must be in 1..256"),
    (["serve", "--max-k", "1000000000"], "argument --max-k: must be in 1..10000"),
    (["serve", "--max-k", "0"], "argument --max-k: must be in 1..10000"),
    (["serve", "--default-k", "0"], "argument --default-k"),
    (["serve", "--default-k", "200"], "--default-k (200) must not exceed --max-k (100)"),
    (["serve", "--max-batch", "0"], "argument --max-batch: must be at least 1"),
    (["serve", "--max-query-length", "-3"], "argument --max-query-length: must be at least 1"),
    (["serve", "--max-body-bytes", "10"], "argument --max-body-bytes: must be at least 64"),
    (["serve", "--timeout", "inf"], "argument --timeout: must be a finite number greater than 0"),
    (["serve", "--timeout", "0"], "argument --timeout: must be a number greater than 0"),
    (["serve", "--drain", "-1"], "argument --drain: must be a number of at least 0"),
    (["serve", "--drain", "nan"], "argument --drain: must be a finite number"),
    (["serve", "--backend", "svm"], "argument --backend: invalid choice"),
    (["serve", "--cutoff", "0"], "argument --cutoff: invalid choice"),
    # data ingest
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--min-clicks", "-1"], "argument --min-clicks: must be a number of at least 0"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--min-clicks", "nan"], "argument --min-clicks: must be a finite number"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--format", "xlsx"], "argument --format: invalid choice"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--engine", "pandas"], "argument --engine: invalid choice"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--out", "/proc/x.csv"], "--out /proc/x.csv: cannot write"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--out", "table.txt"], "--out table.txt: cannot tell the table format"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--out", "FILE"], "exists; choose another name or remove it (give --force"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--out", "full"], "--out full: cannot tell the table format"),
    (["data", "ingest", "LOG", "--taxonomy", "missing.tsv"], "--taxonomy missing.tsv: no such file"),
    (["data", "ingest", "LOG", "--taxonomy", "TAX"], "$QCAT_DUCKDB_MEMORY_LIMIT='lots' is not a size",
     {"QCAT_DUCKDB_MEMORY_LIMIT": "lots"}),
    (["data", "ingest", "LOG", "--taxonomy", "TAX"], "$QCAT_DUCKDB_MEMORY_LIMIT='1KB' is too small",
     {"QCAT_DUCKDB_MEMORY_LIMIT": "1KB"}),
    # data simulate / build-demo: refused before the simulation runs
    (["data", "simulate", "--out", "sim.txt"], "--out sim.txt: cannot tell the format from the name; use one of .parquet, .csv"),
    (["data", "simulate", "--out", "sim.csv", "--intents-out", "i.json"], "--intents-out i.json: cannot tell the format"),
    (["data", "simulate", "--out", "/proc/sim.csv"], "--out /proc/sim.csv: cannot write"),
    (["data", "simulate", "--out", "sim.csv", "--intents-out", "sim.csv"], "is --out too"),
    (["data", "simulate", "--out", "sim.csv", "--click-noise", "2"], "argument --click-noise: must be a number in [0, 1), got 2"),
    (["data", "simulate", "--out", "sim.csv", "--click-noise", "1"], "argument --click-noise: must be a number in [0, 1)"),
    (["data", "simulate", "--out", "sim.csv", "--typo-rate", "-1"], "argument --typo-rate: must be a number in [0, 1], got -1"),
    (["data", "simulate", "--out", "sim.csv", "--typo-rate", "nan"], "argument --typo-rate: must be a finite number"),
    (["data", "simulate", "--out", "sim.csv", "--seed", "-1"], "argument --seed: must be at least 0"),
    (["data", "build-demo", "--seed", "x"], "argument --seed: must be an integer"),
    # train: data and --out flags, for every backend
    *[(["train", backend, *LOG, "--period", "base", "--out", "m"], "--period base is for a corpus")
      for backend in ("nb", "xreg", "xmlq")],
    (["train", "nb", *LOG, "--min-clicks", "-5", "--out", "m"], "argument --min-clicks: must be a number of at least 0, got -5"),
    (["train", "nb", *LOG, "--split-seed", "-1", "--out", "m"], "argument --split-seed: must be at least 0"),
    (["train", "nb", *LOG, "--period", "summer", "--out", "m"], "argument --period: invalid choice"),
    (["train", "nb", *LOG, "--out", "/proc/x.csv"], "--out /proc/x.csv: cannot write"),
    (["train", "nb", *LOG, "--out", "/proc/x/y/z"], "--out /proc/x/y/z: cannot write"),
    (["train", "nb", *LOG, "--out", "FILE"], "is a file; give a directory for the model bundle"),
    (["train", "nb", *LOG, "--out", "full"], "is a directory that is not empty"),
    (["train", "nb", "--log", "missing.csv", "--taxonomy", "TAX", "--out", "m"], "--log missing.csv: no such file"),
    (["train", "nb", "--log", "LOG", "--out", "m"], "--log needs --taxonomy"),
    (["train", "nb", "--log", "LOG", "--taxonomy", "TAX", "--out", "m"], "$QCAT_DUCKDB_MEMORY_LIMIT='1KB' is too small",
     {"QCAT_DUCKDB_MEMORY_LIMIT": "1KB"}),
    (["train", "nb", "--log", "LOG", "--taxonomy", "TAX", "--out", "a/b/m"], "$QCAT_DUCKDB_MEMORY_LIMIT='lots' is not a size",
     {"QCAT_DUCKDB_MEMORY_LIMIT": "lots"}),
    # train xreg: every hyperparameter
    *[(["train", "xreg", "--out", "m", flag, value], f"argument {flag}: {message}") for flag, value, message in [
        ("--C", "inf", "must be a finite number greater than 0"), ("--C", "nan", "must be a finite number"),
        ("--C", "0", "must be a number greater than 0"), ("--C", "-1", "must be a number greater than 0"),
        ("--trees", "0", "must be in 1..100"), ("--trees", "1000", "must be in 1..100"),
        ("--beam", "0", "must be in 1..10000"), ("--leaf-size", "1", "must be at least 2"),
        ("--factor", "0", "must be a number greater than 0"), ("--factor", "inf", "must be a finite number"),
        ("--alpha", "2", "must be a number in [0, 1]"), ("--alpha", "nan", "must be a finite number in [0, 1]"),
        ("--gamma", "-1", "must be a number greater than 0"), ("--gamma", "inf", "must be a finite number"),
        ("--shortlist", "0", "must be at least 1"), ("--prune", "-0.1", "must be a number of at least 0"),
        ("--prune", "nan", "must be a finite number"), ("--threads", "10000", "must be in 1..256, got 10000"),
        ("--threads", "0", "must be in 1..256"), ("--seed", "-1", "must be at least 0")]],
    (["train", "xreg", "--out", "m", "--trees", "three"], "argument --trees: must be an integer"),
    # train xmlq: checked before TensorFlow is imported
    *[(["train", "xmlq", "--out", "m", flag, value], f"argument {flag}: {message}") for flag, value, message in [
        ("--epochs", "0", "must be in 1..10000"), ("--batch-size", "0", "must be in 1..1048576"),
        ("--patience", "0", "must be at least 1"), ("--min-token-count", "0", "must be at least 1"),
        ("--brand-repeat", "0", "must be in 1..10000"), ("--snm-sampled", "0", "must be at least 1"),
        ("--snm-k", "0", "must be at least 1"), ("--seed", "-2", "must be at least 0"),
        ("--preset", "huge", "invalid choice"), ("--loss", "mse", "invalid choice"),
        ("--snm-kind", "x", "invalid choice")]],
    (["train", "xmlq", "--out", "m", "--snm-k", "100"], "--snm-k (100) must not exceed --snm-sampled (64)"),
    (["train", "xmlq", "--out", "m", "--augment", "magic"], "unknown augmentation step(s) ['magic']"),
    (["train", "xmlq", *LOG, "--out", "m", "--augment", "rare"], "--augment needs a corpus"),
    (["train", "xmlq", "--out", "m", "--augment", "worst"], "the worst step needs --worst-model"),
    # train hybrid
    (["train", "hybrid", "--nb", "DEMO", "--out", "m", "--cutoff", "9"], "argument --cutoff: invalid choice"),
    (["train", "hybrid", "--nb", "DEMO", "--out", "m", "--blend", "1"], "argument --blend: must be a number in [0, 1)"),
    (["train", "hybrid", "--nb", "DEMO", "--out", "m", "--blend", "nan"], "argument --blend: must be a finite number"),
    (["train", "hybrid", "--nb", "DEMO", "--out", "m", "--long-backend", "xreg"], "--long-backend xreg needs --xreg DIR"),
    (["train", "hybrid", "--nb", "DEMO", "--out", "m"], "give the long-query model"),
    (["train", "hybrid", "--nb", "missing", "--xreg", "missing", "--out", "m"], "does not exist"),
    (["train", "hybrid", "--nb", "DEMO", "--xreg", "DEMO", "--out", "m"], "--nb"),
    # evaluate
    (["evaluate", "--model", "DEMO", "-k", "0"], "argument -k: must be at least 1"),
    (["evaluate", "--model", "DEMO", "-k", "11"], "-k must lie in 1..10"),
    (["evaluate", "--model", "DEMO", "--threshold", "2"], "--threshold must lie in [0, 1]"),
    (["evaluate", "--model", "DEMO", "--threshold", "nan"], "--threshold must lie in [0, 1]"),
    (["evaluate", "--model", "DEMO", "--propensity", "inf", "1"], "argument --propensity: must be a finite number"),
    (["evaluate", "--model", "DEMO", "--propensity", "0", "1"], "argument --propensity: must be a number greater than 0"),
    (["evaluate", "--model", "DEMO", "--split", "dev"], "argument --split: invalid choice"),
    (["evaluate", "--model", "DEMO", "--query-set", "mine"], "argument --query-set: invalid choice"),
    (["evaluate", "--model", "DEMO", "--min-clicks", "-1"], "argument --min-clicks"),
    (["evaluate", "--model", "DEMO", "--split-seed", "-1"], "argument --split-seed: must be at least 0"),
    (["evaluate", "--model", "DEMO", "--log", "LOG"], "--log and --taxonomy go together"),
    (["evaluate", "--model", "DEMO", "--out", "FILE"], "is a file; give a directory for the report"),
    # golden
    (["golden", "generate", "--out", "g.csv", "--per-segment", "0"], "argument --per-segment: must be at least 1"),
    (["golden", "generate", "--out", "g.csv", "--seed", "-1"], "argument --seed: must be at least 0"),
    (["golden", "generate", "--out", "g8.xlsx"], "--out g8.xlsx: cannot tell the format from the name; use one of .csv, .csv.gz"),
    (["golden", "generate", "--out", "/proc/g.csv"], "--out /proc/g.csv: cannot write"),
    (["golden", "generate", "--out", "g.csv", "--period", "spring"], "argument --period: invalid choice"),
    (["golden", "import", "LOG", "--out", "g8.xlsx"], "--out g8.xlsx: cannot tell the format from the name"),
    (["golden", "import", "LOG", "--out", "/proc/g.csv"], "--out /proc/g.csv: cannot write"),
    (["golden", "import", "LOG", "--format", "xlsx"], "argument --format: invalid choice"),
    *[(["golden", "evaluate", "--baseline", "DEMO", "--target", "DEMO", flag.split("/")[-1], value],
       f"argument {flag}: {message}")
      for flag, value, message in [
          ("--candidates", "-1", "must be at least 1"), ("-n/--top-n", "0", "must be at least 1"),
          ("--categories", "0", "must be at least 1"), ("--bootstrap", "-1", "must be at least 0"),
          ("--per-segment", "0", "must be at least 1"), ("--sample-fraction", "2", "must be a number in [0, 1]"),
          ("--sample-fraction", "nan", "must be a finite number"), ("--boost-weight", "-1", "must be a number of at least 0"),
          ("--boost-weight", "inf", "must be a finite number"), ("--mode", "rerank", "invalid choice"),
          ("--seed", "-1", "must be at least 0"), ("--format", "xml", "invalid choice")]],
    # db
    (["db", "current", "--url", "sqlite:///missing.db"], "no judging database at missing.db: `qcat db current` does not create one"),
    (["db", "current", "--url", "missing.db"], "no judging database at missing.db"),
    (["db", "current"], "no judging database at qcat-judging.db"),
    (["db", "downgrade", "--url", "missing.db"], "no judging database at missing.db: `qcat db downgrade`"),
    (["db", "current", "--url", "mysql://u@h/db"], "unsupported database 'mysql'"),
    (["db", "upgrade", "--bogus"], "unrecognized arguments: --bogus"),
    # judge
    *[(["judge", "create-session", "--baseline", "DEMO", "--target", "DEMO", "--url", "missing.db", flag, value],
       f"argument {flag}: {message}") for flag, value, message in [
          ("--queries", "0", "must be at least 1"), ("--judges-per-query", "0", "must be at least 1"),
          ("--boost-weight", "-1", "must be a number of at least 0"), ("--boost-weight", "nan", "must be a finite number"),
          ("--categories", "0", "must be at least 1"), ("--seed", "-1", "must be at least 0"),
          ("--period", "spring", "invalid choice"), ("--mode", "x", "invalid choice")]],
    (["judge", "create-session", "--baseline", "DEMO", "--target", "DEMO", "--url", "missing.db"], "no judging database at missing.db"),
    (["judge", "app", "--url", "missing.db", "--port", "0"], "argument --port: must be in 1..65535"),
    (["judge", "app", "--url", "missing.db", "--port", "70000"], "argument --port: must be in 1..65535"),
    (["judge", "app", "--url", "missing.db", "--claim-timeout", "0"], "argument --claim-timeout: must be a number greater than 0, got 0"),
    (["judge", "app", "--url", "missing.db"], "no judging database at missing.db"),
    (["judge", "report", "1", "--url", "missing.db", "--bootstrap", "-1"], "argument --bootstrap: must be at least 0"),
    (["judge", "report", "1", "--url", "missing.db", "--min-judges", "0"], "argument --min-judges: must be at least 1"),
    (["judge", "report", "1", "--url", "missing.db", "--seed", "-1"], "argument --seed: must be at least 0"),
    (["judge", "report", "1", "--url", "missing.db"], "no judging database at missing.db"),
    (["judge", "export", "1", "--url", "missing.db", "--min-judges", "0"], "argument --min-judges: must be at least 1"),
    (["judge", "export", "1", "--url", "missing.db"], "say what to write"),
    (["judge", "export", "1", "--url", "missing.db", "--csv", "x.csv"], "no judging database at missing.db"),
    (["judge", "sessions", "--url", "missing.db"], "no judging database at missing.db"),
    (["judge", "add-judge", "ann", "--url", "missing.db"], "no judging database at missing.db"),
    (["judge", "backup", "--url", "missing.db", "--out", "b.db"], "no judging database at missing.db"),
    (["judge", "add-gold", "--url", "missing.db", "--session", "1", "--file", "g.csv"], "no judging database at missing.db"),
    (["judge", "release", "--url", "missing.db"], "one of the arguments --judge --query is required"),
    # the internal-node rule (issue 21, item 4)
    (["data", "ingest", "LOG", "--taxonomy", "TAX", "--internal-nodes", "drop"], "argument --internal-nodes: invalid choice"),
    (["train", "nb", *LOG, "--internal-nodes", "drop", "--out", "m"], "argument --internal-nodes: invalid choice"),
    (["train", "xreg", "--internal-nodes", "keep", "--out", "m"], "--internal-nodes is for --log"),
    (["evaluate", "--model", "DEMO", "--internal-nodes", "keep"], "--internal-nodes are for --log"),
    (["train", "nb", *LOG, "--internal-nodes", "refuse", "--min-clicks", "1", "--out", "m"],
     "201 rows name 43 internal (non-leaf) categories of the taxonomy"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: " ".join(case[0])[:80])
def test_invalid_flag_is_one_line_and_writes_nothing(case, workdir, capsys, monkeypatch):
    args, message, *env = case
    before = snapshot(workdir)
    started = time.perf_counter()
    code, out, err = run(workdir, capsys, args, env[0] if env else None, monkeypatch)
    line = assert_one_line_error(code, err)
    assert message in line
    assert "internal error" not in line
    assert snapshot(workdir) == before, "something was written"
    assert time.perf_counter() - started < 10, "refused only after heavy work"


# -- outputs that exist, a full disk, two runs into one --out ------------------------------


def test_ingest_refuses_an_existing_out_unless_forced(workdir, capsys):
    out = workdir / "table.csv"
    args = ["data", "ingest", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1", "--out", out]
    assert run(workdir, capsys, args)[0] == 0
    first = out.read_bytes()
    out.write_text("my own table\n")
    code, _, err = run(workdir, capsys, args)
    assert "exists; choose another name or remove it (give --force to replace it)" in assert_one_line_error(code, err)
    assert out.read_text() == "my own table\n"
    assert run(workdir, capsys, args + ["--force"])[0] == 0
    assert out.read_bytes() == first
    assert not [p for p in workdir.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_ingest_on_a_full_disk_leaves_nothing(workdir, capsys, monkeypatch):
    import qcat.training.clicklogs.clicktable

    def full_disk(table, path):
        Path(path).write_text("query,category\nhalf a ro")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(qcat.training.clicklogs.clicktable, "write_table", full_disk)
    before = snapshot(workdir)
    code, _, err = run(workdir, capsys, ["data", "ingest", CLICKS, "--taxonomy", BESTBUY, "--out", "t.parquet"])
    assert "--out t.parquet: cannot write (No space left on device)" in assert_one_line_error(code, err.splitlines()[-1])
    assert snapshot(workdir) == before


def _train_nb(out) -> list:
    return ["train", "nb", "--log", CLICKS, "--taxonomy", BESTBUY, "--min-clicks", "1", "--out", out]


def test_train_on_a_full_disk_leaves_nothing_and_a_rerun_works(workdir, capsys, monkeypatch):
    """Disk full while the bundle is written: nothing at --out (no bundle without a manifest that
    a rerun would call "not empty"), no staging directory, no lock file."""
    from qcat.models.nb import NaiveBayesModel

    save = NaiveBayesModel.save

    def full_disk(self, directory):
        (Path(directory) / "vocabulary.txt").write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(Path(directory) / "nb.npz"))

    monkeypatch.setattr(NaiveBayesModel, "save", full_disk)
    before = snapshot(workdir)
    code, _, err = run(workdir, capsys, _train_nb("models/nb"))
    line = assert_one_line_error(code, err.splitlines()[-1])
    assert "--out models/nb: cannot write the model bundle (No space left on device)" in line
    assert snapshot(workdir) == before  # not even the parent directory it created
    monkeypatch.setattr(NaiveBayesModel, "save", save)
    code, _, err = run(workdir, capsys, _train_nb("models/nb"))
    assert code == 0, err
    assert (workdir / "models" / "nb" / "manifest.json").is_file()
    assert sorted(p.name for p in (workdir / "models").iterdir()) == ["nb"]


def test_train_refuses_an_out_that_appears_while_it_runs(workdir, capsys, monkeypatch):
    from qcat.models.nb import NaiveBayesModel

    save = NaiveBayesModel.save

    def someone_else_writes_out(self, directory):
        (workdir / "m").mkdir()
        (workdir / "m" / "theirs.txt").write_text("theirs")
        return save(self, directory)

    monkeypatch.setattr(NaiveBayesModel, "save", someone_else_writes_out)
    code, _, err = run(workdir, capsys, _train_nb("m"))
    assert "--out m appeared while this command ran" in assert_one_line_error(code, err.splitlines()[-1])
    assert [p.name for p in (workdir / "m").iterdir()] == ["theirs.txt"]
    assert not [p for p in workdir.iterdir() if p.name.startswith(".")]


def test_train_refuses_an_out_another_run_is_writing(workdir, capsys):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from qcat.console.output import OutputLock; "
                               "OutputLock(sys.argv[1]).acquire(); print('locked', flush=True); sys.stdin.read()",
         str(workdir / "m")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, out, err = run(workdir, capsys, _train_nb("m"))
        assert "--out m is being written by another qcat process" in assert_one_line_error(code, err)
        assert out == "" and not (workdir / "m").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # The holder ended without releasing (as a killed run would): its lock went with it, and the
    # next run takes it, writes the bundle and leaves no hidden file behind.
    code, _, err = run(workdir, capsys, _train_nb("m"))
    assert code == 0, err
    assert not [p for p in workdir.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_two_concurrent_trainings_into_one_out(workdir):
    """One writes the bundle (exit 0); the other is refused in one line (exit 2), whether it
    started while the first held --out or after the first had written it."""
    command = [sys.executable, "-m", "qcat.cli", *map(str, _train_nb(workdir / "m"))]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in runs]
    for p in runs:
        p.stdout.close()
        p.stderr.close()
    assert sorted(code for code, _ in results) == [0, 2], results
    refused = next(err for code, err in results if code == 2).strip().splitlines()[-1]
    assert "being written by another qcat process" in refused or "is a directory that is not empty" in refused
    manifest = json.loads((workdir / "m" / "manifest.json").read_text())
    assert sorted(manifest["files"]) == sorted(p.name for p in (workdir / "m").iterdir() if p.name != "manifest.json")
    assert not [p for p in workdir.iterdir() if p.name.startswith(".")]


# -- too little data, for every trainer --------------------------------------------------


@pytest.mark.parametrize("backend, name", [("nb", "NB"), ("xreg", "XReg")])
def test_training_on_a_two_row_log_is_one_line(backend, name, workdir, capsys):
    code, _, err = run(workdir, capsys, ["train", backend, "--log", "TWO", "--taxonomy", "TAX", "--out", "m"])
    assert code == 2
    assert (f"qcat: error: cannot train {name}: 2 training and 0 validation (query, category) pairs"
            in err.strip().splitlines()[-1])
    assert not (workdir / "m").exists() and not [p for p in workdir.iterdir() if p.name.startswith(".")]


def test_period_is_refused_with_log_for_a_hybrid_too(workdir, capsys, bestbuy_model_dir):
    """data_from_args refuses --period with --log for every backend; a hybrid reaches it after
    reading its parts (here an NB bundle relabelled as XReg: only its manifest is read)."""
    fake = workdir / "fake-xreg"
    shutil.copytree(bestbuy_model_dir, fake)
    manifest = json.loads((fake / "manifest.json").read_text())
    (fake / "manifest.json").write_text(json.dumps(manifest | {"backend": "xreg"}))
    code, _, err = run(workdir, capsys, ["train", "hybrid", "--nb", bestbuy_model_dir, "--xreg", fake, *LOG,
                                         "--period", "base", "--out", "m"])
    assert "--period base is for a corpus" in assert_one_line_error(code, err)
    assert not (workdir / "m").exists()


# -- the writers themselves --------------------------------------------------------------


def test_atomic_file_removes_its_staging_file_on_any_error(tmp_path):
    from qcat.console.output import atomic_file
    from qcat.errors import InputError

    target = tmp_path / "deep" / "er" / "out.csv"
    with pytest.raises(InputError, match=r"--out .*out.csv: cannot write \(Read-only file system\)"):
        with atomic_file(target) as staging:
            assert staging.name.endswith(".csv") and staging.parent == target.parent
            staging.write_text("half")
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    with pytest.raises(KeyboardInterrupt):
        with atomic_file(target) as staging:
            staging.write_text("half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with atomic_file(target) as staging:
        staging.write_text("whole")
    assert target.read_text() == "whole" and os.listdir(target.parent) == ["out.csv"]
    with pytest.raises(InputError, match="appeared while this command ran"):
        with atomic_file(target, overwrite=False) as staging:
            staging.write_text("new")
    assert target.read_text() == "whole" and os.listdir(target.parent) == ["out.csv"]


def test_memory_limit_values():
    from qcat.errors import InputError
    from qcat.training.clicklogs.ingest_duckdb import memory_limit

    assert [memory_limit(v) for v in ("4GB", "512MB", "2GiB", "1.5gb", "4G", "64MB")] == \
        ["4GB", "512MB", "2GiB", "1.5GB", "4GB", "64MB"]
    for bad in ("lots", "1KB", "63MB", "-1GB", "100%", "0", "inf GB", "4 GB and more"):
        with pytest.raises(InputError):
            memory_limit(bad)


@pytest.mark.slow
def test_a_terminated_training_leaves_nothing(workdir):
    """SIGTERM (a scheduler's timeout, `kill`) ends a training like Ctrl-C: nothing at --out, not
    the parent directory it made, no staging directory, no lock file."""
    import signal

    command = [sys.executable, "-m", "qcat.cli", "train", "xreg", "--log", str(CLICKS), "--taxonomy", str(BESTBUY),
               "--min-clicks", "1", "--out", str(workdir / "models" / "m")]
    before = snapshot(workdir)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:
            if line.startswith("dataset:"):
                break
        assert (workdir / "models" / ".m.qcat-lock").exists()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        process.kill()
        process.communicate()
    assert snapshot(workdir) == before


def test_golden_import_writes_only_what_its_suffix_says(workdir, capsys):
    golden = workdir / "golden.csv"
    golden.write_text("query,listing_id,relevance,grade\nsharp tv,L1,1,3\nsharp tv,L2,0,0\nnook,L3,1,2\n")
    before = snapshot(workdir)
    code, _, err = run(workdir, capsys, ["golden", "import", golden, "--out", "g8.xlsx"])
    assert "--out g8.xlsx: cannot tell the format from the name; use one of .csv, .csv.gz" in assert_one_line_error(code, err)
    assert snapshot(workdir) == before
    code, _, err = run(workdir, capsys, ["golden", "import", golden, "--out", "g8.csv.gz"])
    assert code == 0, err
    import gzip

    assert gzip.decompress((workdir / "g8.csv.gz").read_bytes()).decode().startswith("query,listing_id,relevance")
    assert not [p for p in workdir.iterdir() if p.name.startswith(".")]
