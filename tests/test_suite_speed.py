"""The fast loop stays fast (issue 54): `python -m pytest -m "not slow"` holds the tests that took
under a second, and at least one test of every module.

tests/test_times.json is the record of the last full run: each test's wall seconds (setup, call
and teardown), written by ``python tests/cpu_time.py FILE --record`` from a run with
``--cpu-times FILE`` (docs/development/testing.md says when and how). A test not marked slow that
took over 3 s there fails here, by name, until it is marked ``@pytest.mark.slow`` or made cheaper;
a test the record does not hold yet (a new one) passes until the next record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cpu_time import DESELECTED

TESTS = Path(__file__).parent
RECORD = TESTS / "test_times.json"
FAST_AT_MOST_S = 3.0


def collected(request) -> list[pytest.Item]:
    """Every test this run collected, those ``-m "not slow"`` (or ``-k``) left out included."""
    return [*request.session.items, *request.config.stash.get(DESELECTED, [])]


def fast(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is None


def test_no_test_outside_the_slow_mark_took_over_3_s_in_the_last_full_run(request) -> None:
    seconds = json.loads(RECORD.read_text(encoding="utf-8"))["seconds"]
    over = sorted(f"{item.nodeid} ({seconds[item.nodeid]:.1f} s)" for item in collected(request)
                  if fast(item) and seconds.get(item.nodeid, 0.0) > FAST_AT_MOST_S)
    assert not over, ("not marked slow, yet over 3 s in tests/test_times.json's run: mark them "
                      "@pytest.mark.slow or make them cheaper:\n" + "\n".join(over))


def test_every_module_keeps_a_test_in_the_fast_loop(request) -> None:
    modules: dict[str, bool] = {}
    for item in collected(request):
        module = item.nodeid.split("::")[0]
        modules[module] = modules.get(module, False) or fast(item)
    assert not [m for m, has_fast in modules.items() if not has_fast], "modules with no test outside the slow mark"


def test_the_record_names_tests_that_exist() -> None:
    """A record of another suite (tests renamed since, a wrong file) would check nothing."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    modules = {name.split("::")[0] for name in record["seconds"]}
    assert len(record["seconds"]) == record["tests"] > 1000
    assert all((TESTS.parent / module).is_file() for module in modules), sorted(
        m for m in modules if not (TESTS.parent / m).is_file())
