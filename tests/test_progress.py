"""Progress lines: drawn on a terminal, never in a pipe or with --quiet; a compilation is announced."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from qcat.console.progress import announce_compilation


def run_on_terminal(args: list[str], env: dict | None = None) -> tuple[int, str, str]:
    """Run ``python -m qcat.cli ARGS`` with stderr on a pseudo-terminal; (exit, stdout, stderr)."""
    controller, terminal = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "qcat.cli", *map(str, args)], stdout=subprocess.PIPE,
                               stderr=terminal, stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120", **(env or {})})
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal's other end closed: the process is done with it
            break
        if not chunk:
            break
        drawn += chunk
    stdout = process.stdout.read().decode()
    process.stdout.close()
    code = process.wait(120)
    os.close(controller)
    return code, stdout, drawn.decode(errors="replace")


def ingest_args(data_dir, tmp_path):
    return ["data", "ingest", data_dir / "bestbuy_clicks_sample.csv", "--taxonomy",
            data_dir / "bestbuy_categories_2016.json.gz", "--min-clicks", "1", "--out", tmp_path / f"t{time.time_ns()}.parquet"]


@pytest.mark.slow
def test_a_terminal_sees_progress_and_a_pipe_does_not(data_dir, tmp_path):
    code, stdout, drawn = run_on_terminal(ingest_args(data_dir, tmp_path))
    assert code == 0 and "798 used" in stdout
    assert "ingesting" in drawn and "bestbuy_clicks_sample.csv" in drawn
    piped = subprocess.run([sys.executable, "-m", "qcat.cli", *map(str, ingest_args(data_dir, tmp_path))],
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "ingesting" not in piped.stderr + piped.stdout


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [{"args": ["--quiet"]}, {"env": {"QCAT_QUIET": "1"}}], ids=["--quiet", "QCAT_QUIET"])
def test_quiet_draws_nothing_even_on_a_terminal(data_dir, tmp_path, quiet):
    code, stdout, drawn = run_on_terminal(quiet.get("args", []) + ingest_args(data_dir, tmp_path), quiet.get("env"))
    assert code == 0 and "798 used" in stdout and "ingesting" not in drawn


def dispatcher(index_path):
    """What announce_compilation reads of a numba dispatcher: its cache's index file."""
    return SimpleNamespace(_cache=SimpleNamespace(_cache_file=SimpleNamespace(_index_path=str(index_path))))


def test_a_compilation_is_announced_only_when_nothing_is_cached(tmp_path, capsys, monkeypatch):
    (tmp_path / "present.nbi").write_bytes(b"")
    cached, uncached = dispatcher(tmp_path / "present.nbi"), dispatcher(tmp_path / "missing.nbi")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    announce_compilation("the test kernels", cached)
    assert capsys.readouterr().err == ""
    announce_compilation("the test kernels", uncached)
    assert capsys.readouterr().err == "qcat: compiling the test kernels, once (numba keeps them cached on this machine)\n"
    monkeypatch.setenv("QCAT_QUIET", "1")
    announce_compilation("the test kernels", uncached)
    assert capsys.readouterr().err == ""
