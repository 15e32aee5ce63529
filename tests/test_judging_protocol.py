"""benchmarks/bench_judging.py --driver protocol at a tiny size: three judges that speak the grading
panel's protocol (benchmarks/judging_protocol.py) grade through a real `qcat judge app` on a real
SQLite store for 18 s, a query a second each, and every key they typed is read back from the store."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_judging  # (beside judging_protocol.py, which it imports)


@pytest.mark.slow
def test_protocol_judges_lose_nothing_and_the_server_cpu_is_measured(tmp_path):
    row = bench_judging.run("sqlite", f"sqlite:///{tmp_path / 'bench.db'}", 3, 0, 0.02, tmp_path,
                            protocol={"pace": 60, "minutes": 0.3})
    assert row["keys_typed"] > 0
    assert row["grades_stored_as_typed"] == row["keys_typed"]  # nothing lost, every grade as typed
    assert row["graded_queries"] == row["queries"] and row["answers"] == {"saved": row["queries"]}
    assert row["unsettled_judges"] == 0 and row["ran_out"] == 0
    assert row["transitions"] > 0 and not math.isnan(row["enter_to_next_p90_s"])
    assert row["server_cpu_s_per_graded_query"] > 0 and row["server_peak_memory_mb"] > 0
    assert row["driver_cpu_s"] > 0
    assert row["store_server_cpu_s_per_graded_query"] is None  # SQLite: the store's work is the app's


def test_the_app_runs_without_streamlits_full_collection_after_every_script_run():
    """Issue 55 item 2: Streamlit's gc.collect(2) after each run was half the app's CPU per graded
    query (docs/benchmarks/judging.md); `qcat judge app` turns it off."""
    from qcat.judging.commands.app import app_command

    command, _ = app_command("sqlite:///x.db", None, 8501, "127.0.0.1")
    assert command[command.index("--runner.postScriptGC") + 1] == "false"
