"""Soak: `qcat serve` (2 workers) under 8 concurrent clients for 30 s while its model directory is repointed
and reloaded every 3 s (NB part, a tampered copy, the demo hybrid, ...). Bounded; the 60 s run
and its figures are in docs/benchmarks.md (python benchmarks/bench_serve.py --soak 60)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_serve import soak  # noqa: E402


def test_reloads_under_load_fail_no_request_and_keep_memory_flat():
    report = soak(30.0, reload_every=3.0, clients=8, workers=2)
    assert report["requests"] > 5000
    assert report["failures"] == 0 and set(report["statuses"]) == {200}, report["statuses"]
    # Every third reload is the tampered copy: refused, the others swap.
    expected = [422 if i % 3 == 1 else 200 for i in range(len(report["reloads"]))]
    assert len(report["reloads"]) >= 6 and report["reloads"] == expected
    assert report["bundles_seen"] == 2  # the NB part and the demo hybrid both answered
    assert report["wrong_bundle"] == 0  # after a reload's 200, every worker answers with its bundle
    assert abs(report["memory_growth"]) <= 0.10, report["memory_mib"]
