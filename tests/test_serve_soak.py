"""Soak: `qcat serve` (2 workers) under 8 concurrent clients for 30 s while its model directory is
repointed and reloaded every 3 s (NB part, a tampered copy, the demo hybrid, ...), and memory over
50 reloads. Bounded; the 10-minute run and its figures are in docs/benchmarks.md
(python benchmarks/bench_serve.py --soak 600, --reload-memory 100)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_serve import reload_memory, soak, wrong_bundle_answers  # noqa: E402


@pytest.mark.slow  # 30 s of load on a 2-worker server
def test_reloads_under_load_fail_no_request_and_keep_memory_flat():
    report = soak(30.0, reload_every=3.0, clients=8, workers=2)
    assert report["requests"] > 5000
    assert report["failures"] == 0 and set(report["statuses"]) == {200}, report["statuses"]
    # Every third reload is the tampered copy: refused, the others swap.
    expected = [422 if i % 3 == 1 else 200 for i in range(len(report["reloads"]))]
    assert len(report["reloads"]) >= 6 and report["reloads"] == expected
    assert report["bundles_seen"] == 2  # the NB part and the demo hybrid both answered
    assert report["wrong_bundle"] == 0  # after a reload's 200, every worker answers with its bundle
    # A 30 s run holds only ~9 reloads: with 2 workers, memory is still settling then (+9% from
    # 10 to 30 reloads, flat after: docs/benchmarks.md), and two runs gave +17%. This bound only
    # catches a gross leak (a bundle kept per reload and worker adds ~150 MiB each time); the
    # flatness itself is test_memory_is_flat_over_reloads' and the 10-minute soak's.
    assert report["memory_growth"] <= 0.5, report["memory_mib"]


@pytest.mark.slow  # 50 reloads of a server
def test_memory_is_flat_over_reloads():
    """One worker, 50 reloads of the demo model: the RSS after 50 is within 2% of that after 30
    (it settles by then; an old bundle kept, or 1 MiB lost per reload as before, fails this)."""
    samples = reload_memory(50, workers=1)
    assert samples[-1] <= samples[3] * 1.02, samples


def test_wrong_bundle_counts_only_answers_outside_a_reloads_own_window():
    """The soak's wrong_bundle figure: while a reload is in flight (sent, not yet answered) either
    bundle may answer; after a 200 only the bundle it names, after a refusal (422) still the one
    before. Answers (sent at, bundle) against reloads (sent, answered, status, bundle)."""
    reloads = [(1.0, 1.5, 200, "B"), (3.0, 3.5, 422, None), (5.0, 5.5, 200, "A")]
    right = [(0.5, "A"), (1.2, "A"), (1.2, "B"), (2.0, "B"), (3.2, "B"), (4.0, "B"), (5.2, "B"), (6.0, "A")]
    assert wrong_bundle_answers(right, "A", reloads) == 0
    wrong = [(0.5, "B"), (2.0, "A"), (4.0, "A"), (4.0, None), (6.0, "B")]
    assert wrong_bundle_answers(right + wrong, "A", reloads) == len(wrong)
    assert wrong_bundle_answers([(9.0, "A")], "A", []) == 0 and wrong_bundle_answers([(9.0, "B")], "A", []) == 1
