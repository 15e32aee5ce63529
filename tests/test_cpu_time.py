"""tests/cpu_time.py: ``--cpu-times FILE`` records each test's CPU (its processes' too), and its
summary and module order add up what the file holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cpu_time import compare, costliest_first, drift, summary

TESTS = Path(__file__).parent


@pytest.mark.slow
def test_each_test_gets_a_line_with_its_own_and_its_processes_cpu(tmp_path) -> None:
    (tmp_path / "test_spin.py").write_text(
        "import subprocess, sys, time\n"
        "def spin(seconds):\n"
        "    end = time.process_time() + seconds\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "def test_here():\n    spin(0.3)\n"
        "def test_in_a_child():\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nend = time.process_time() + 0.3\\n"
        "while time.process_time() < end: pass'], check=True)\n"
        "def test_waits():\n    time.sleep(0.3)\n")
    out = tmp_path / "cpu.jsonl"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "cpu_time", "-p", "no:cacheprovider", "-n", "0",
                             "-c", os.devnull, "--rootdir", str(tmp_path), "--cpu-times", str(out),
                             str(tmp_path / "test_spin.py")],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(TESTS)}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    records = {r["test"].split("::")[1]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(records) == {"test_here", "test_in_a_child", "test_waits"}
    assert records["test_here"]["cpu"] >= 0.3 and records["test_here"]["children_cpu"] == 0
    assert records["test_in_a_child"]["children_cpu"] >= 0.3 and records["test_in_a_child"]["cpu"] < 0.3
    assert records["test_waits"]["wall"] >= 0.3 and records["test_waits"]["cpu"] < 0.1
    assert all(r["worker"] == "master" and r["start"] > 0 for r in records.values())


def test_summary_and_order_add_up_the_file(tmp_path) -> None:
    lines = [{"test": "tests/test_a.py::one", "wall": 1.0, "cpu": 0.5, "children_cpu": 2.0},
             {"test": "tests/test_a.py::two", "wall": 2.0, "cpu": 1.0, "children_cpu": 0.0},
             {"test": "tests/test_b.py::one", "wall": 4.0, "cpu": 0.25, "children_cpu": 0.0}]
    path = tmp_path / "cpu.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    text = summary(str(path)).splitlines()
    assert text[0] == "3 tests, 4 CPU-s, 7 s of test time"
    assert text[2].split() == ["3.5", "3.0", "2", "tests/test_a.py"]  # CPU first: 0.5 + 2 + 1
    assert text[3].split() == ["0.2", "4.0", "1", "tests/test_b.py"]
    assert costliest_first(str(path)) == ["test_b.py", "test_a.py"]  # by test time: 4 s before 3 s


def test_compare_lays_two_runs_side_by_side_costliest_first(tmp_path) -> None:
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    before.write_text("".join(json.dumps(line) + "\n" for line in [
        {"test": "tests/test_a.py::one", "wall": 1.0, "cpu": 0.5, "children_cpu": 2.0},
        {"test": "tests/test_b.py::one", "wall": 4.0, "cpu": 3.0, "children_cpu": 0.0}]))
    after.write_text("".join(json.dumps(line) + "\n" for line in [
        {"test": "tests/test_a.py::one", "wall": 0.5, "cpu": 0.25, "children_cpu": 0.0},
        {"test": "tests/test_c.py::new", "wall": 0.125, "cpu": 0.125, "children_cpu": 0.0}]))
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in compare(str(before), str(after)).splitlines()]
    assert rows[2] == ["`test_b.py`", "3.0", "0.0", "4.0", "0.0", "1", "0"]  # 3 CPU-s before: first
    assert rows[3] == ["`test_a.py`", "2.5", "0.2", "1.0", "0.5", "1", "1"]
    assert rows[4] == ["`test_c.py`", "0.0", "0.1", "0.0", "0.1", "0", "1"]  # new since
    assert rows[5] == ["all", "6", "0", "5", "1", "2", "2"]


def test_drift_is_the_median_ratio_over_the_untouched_modules_costly_tests(tmp_path) -> None:
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    runs = {"tests/test_a.py::one": (4.0, 5.0), "tests/test_a.py::two": (3.0, 3.3),  # 1.25 and 1.1
            "tests/test_b.py::one": (10.0, 12.0),  # 1.2
            "tests/test_a.py::cheap": (1.0, 9.0),  # under 3 CPU-s before: not counted
            "tests/test_touched.py::one": (5.0, 1.0),  # a module the change touched: not counted
            "tests/test_b.py::gone": (6.0, None)}  # not in the second run
    before.write_text("".join(json.dumps({"test": t, "wall": 1.0, "cpu": b / 2, "children_cpu": b / 2}) + "\n"
                              for t, (b, _) in runs.items()))
    after.write_text("".join(json.dumps({"test": t, "wall": 1.0, "cpu": a, "children_cpu": 0.0}) + "\n"
                             for t, (_, a) in runs.items() if a is not None))
    median, count = drift(str(before), str(after), ("test_touched",))
    assert count == 3 and median == pytest.approx(1.2)
    assert drift(str(before), str(after), ("test_touched", "test_b"))[0] == pytest.approx((1.25 + 1.1) / 2)


def test_the_order_names_modules_that_exist() -> None:
    named = [line for line in (TESTS / "costliest_first.txt").read_text().splitlines() if line]
    assert len(named) == len(set(named)) and all((TESTS / name).is_file() for name in named)
