"""Output that misled (issue 37, items 9-14): a bundle's unlisted files, another application's
database, modes under the umask, errors for standard input and symbolic-link loops, the golden
harness checking the models' taxonomy before simulating, and .gitignore's report directories."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import qcat

from qcat.cli import main

ROOT = Path(__file__).resolve().parent.parent
TAXONOMY = "id\tpath\tparent\nT\tToys\t\nK\tToys > Lego\tT\nV\tTVs\t\n"


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def toy_log(directory: Path) -> tuple[Path, Path]:
    (directory / "taxonomy.tsv").write_text(TAXONOMY)
    log = directory / "log.csv"
    log.write_text("query,category,clicks\n" + "".join(f"lego set {i},K,3\ntv model {i},V,3\n" for i in range(60)))
    return log, directory / "taxonomy.tsv"


def error_of(capsys, argv: list) -> str:
    """The one error line of ``qcat ARGV`` run in-process (exit 2)."""
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qcat: error: "), lines
    return lines[0].removeprefix("qcat: error: ")


def test_info_says_unlisted_files_are_present_and_ignored(bestbuy_model_dir, tmp_path, capsys):
    """Item 9: a file not in the manifest, and `qcat info` still said "files 7, all hashes verified"."""
    bundle = tmp_path / "model"
    shutil.copytree(bestbuy_model_dir, bundle)
    assert main(["info", str(bundle)]) == 0
    listed = capsys.readouterr().out
    assert "all hashes verified\n" in listed and "unlisted entr" not in listed
    (bundle / "notes.txt").write_text("mine")
    (bundle / "old").mkdir()
    assert main(["info", str(bundle)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("files"))
    assert line.endswith("all hashes verified; 2 unlisted entries present and ignored (not in the manifest, not "
                         "verified): 'notes.txt', 'old/'")


@pytest.mark.slow
def test_db_upgrade_refuses_another_applications_database(tmp_path):
    """Item 10: qcat's tables were added to any SQLite file without asking."""
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as connection:
        connection.execute("create table customers (id integer primary key, name text)")
        connection.execute("insert into customers (name) values ('ann')")
    result = qcat("db", "upgrade", "--url", db)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "sqlite:///" in result.stderr and "already holds 1 table (customers) but no qcat migration history" in \
        result.stderr and "--allow-other-tables" in result.stderr
    with sqlite3.connect(db) as connection:
        assert [r[0] for r in connection.execute("select name from sqlite_master where type = 'table'")] == ["customers"]
    result = qcat("db", "upgrade", "--url", db, "--allow-other-tables")
    assert result.returncode == 0, result.stderr
    assert qcat("db", "upgrade", "--url", db).returncode == 0  # qcat's own now: an upgrade needs no flag
    with sqlite3.connect(db) as connection:
        assert connection.execute("select count(*) from customers").fetchone() == (1,)


def test_outputs_get_the_mode_the_umask_gives(tmp_path, umask_022, capsys, monkeypatch):
    """Item 11: bundle directories came out 0700 and written files 0600 under umask 022."""
    monkeypatch.setenv("QCAT_QUIET", "1")
    log, taxonomy = toy_log(tmp_path)
    assert main(["train", "nb", "--log", str(log), "--taxonomy", str(taxonomy), "--min-clicks", "1",
                 "--out", str(tmp_path / "nb")]) == 0
    assert mode(tmp_path / "nb") == 0o755 and mode(tmp_path / "nb" / "manifest.json") == 0o644
    assert main(["data", "ingest", str(log), "--taxonomy", str(taxonomy), "--out", str(tmp_path / "t.parquet")]) == 0
    assert mode(tmp_path / "t.parquet") == 0o644
    golden = tmp_path / "golden.csv"
    golden.write_text("query,listing_id,relevance,grade\nsharp tv,L1,1,3\nnook,L3,1,2\n")
    assert main(["golden", "import", str(golden), "--out", str(tmp_path / "g.csv")]) == 0
    assert mode(tmp_path / "g.csv") == 0o644
    os.umask(0o027)
    assert main(["golden", "import", str(golden), "--out", str(tmp_path / "g2.csv.gz")]) == 0
    assert mode(tmp_path / "g2.csv.gz") == 0o640


@pytest.mark.slow
def test_stdin_and_symlink_loops_are_named_for_what_they_are(tmp_path, capsys):
    """Item 12: `--log /dev/stdin` said "no such file", a model path in a symlink loop "does not exist"."""
    log, taxonomy = toy_log(tmp_path)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    result = subprocess.run([sys.executable, "-m", "qcat.cli", "train", "nb", "--log", "/dev/stdin", "--taxonomy",
                             str(taxonomy), "--out", str(tmp_path / "m")], input=log.read_text(), text=True,
                            capture_output=True, timeout=120)
    assert result.returncode == 2 and result.stderr.strip() == (
        "qcat: error: --log /dev/stdin: is not a regular file but a pipe, terminal or device: reading standard input "
        "is not supported; save the input to a file and give that")
    loop = "is a symbolic link loop (following it leads back to itself)"
    assert error_of(capsys, ["train", "nb", "--log", tmp_path / "a", "--taxonomy", taxonomy, "--out", tmp_path / "m"]) \
        == f"--log {tmp_path / 'a'}: {loop}"
    assert error_of(capsys, ["train", "nb", "--log", log, "--taxonomy", tmp_path / "b", "--out", tmp_path / "m"]) \
        == f"--taxonomy {tmp_path / 'b'}: {loop}"
    assert error_of(capsys, ["evaluate", "--model", tmp_path / "m", "--log", "-", "--taxonomy", taxonomy]) \
        == "--log -: '-' (standard input) is not supported: give a file"
    assert error_of(capsys, ["info", tmp_path / "a"]) == f"model directory {tmp_path / 'a'} {loop}"
    assert error_of(capsys, ["info", tmp_path / "gone"]) == \
        f"model directory {tmp_path / 'gone'} is a symbolic link to '{tmp_path / 'nowhere'}', which does not exist"
    assert main(["db", "upgrade", "--url", str(tmp_path / "j.db")]) == 0
    assert error_of(capsys, ["judge", "create-session", "--results", tmp_path / "a", "--results", log,
                             "--url", tmp_path / "j.db"]) == f"--results {tmp_path / 'a'}: {loop}"
    assert not (tmp_path / "m").exists()


def test_golden_evaluate_checks_the_taxonomy_before_simulating(tmp_path, capsys, monkeypatch):
    """Item 13: models on a user taxonomy were refused only after ~42 s of simulated judgments."""
    monkeypatch.setenv("QCAT_QUIET", "1")
    log, taxonomy = toy_log(tmp_path)
    assert main(["train", "nb", "--log", str(log), "--taxonomy", str(taxonomy), "--min-clicks", "1",
                 "--out", str(tmp_path / "nb")]) == 0
    error = error_of(capsys, ["golden", "evaluate", "--baseline", tmp_path / "nb", "--target", tmp_path / "nb",
                              "--out", tmp_path / "report"])  # one line: nothing simulated before it
    assert error.startswith(f"model {tmp_path / 'nb'} predicts categories that the corpus taxonomy lacks")
    assert not (tmp_path / "report").exists()


def test_gitignore_lists_every_default_report_directory():
    """Item 14: .gitignore listed /golden-report/ while `qcat golden evaluate` writes qcat-golden-report/."""
    from qcat.evaluation.cli import DEFAULT_OUT as EVALUATE
    from qcat.evaluation.golden.cli import DEFAULT_OUT as GOLDEN
    from qcat.judging.commands.parsers import DEFAULT_REPORT as JUDGING

    ignored = set((ROOT / ".gitignore").read_text().splitlines())
    assert {f"/{d}/" for d in (EVALUATE, GOLDEN, JUDGING)} <= ignored
    assert "/golden-report/" not in ignored  # a name no command or walkthrough writes
