"""``python -m pytest --cpu-times FILE``: the CPU each test costs, written a line a test.

Wall time (``--durations``) moves with the machine's load; CPU time hardly does, so it is the
figure to compare when the suite is made cheaper (docs/development/testing.md). Each line is one
test's setup, call and teardown together: ``{"test", "worker", "start", "wall", "cpu", "children_cpu"}`` (``start``: seconds since the epoch, to
draw each worker's timeline), where
``cpu`` is the pytest process's own (user + system) and ``children_cpu`` that of the processes it
started and waited for in the meantime (``qcat`` commands, servers, browsers). A module-scoped
fixture counts for the test that first asks for it. pytest-xdist workers append to the one file.
``python tests/cpu_time.py FILE`` sums it by module; ``python tests/cpu_time.py FILE --order >
tests/costliest_first.txt`` writes the order the modules are handed out in (tests/conftest.py);
``python tests/cpu_time.py BEFORE --compare AFTER`` a table of each module's CPU-s and test seconds
in two runs; ``python tests/cpu_time.py BEFORE --drift AFTER [PREFIX ...]`` how much faster or slower
the machine ran the tests a change did not touch (modules named by none of the prefixes); ``python tests/cpu_time.py FILE --record > tests/test_times.json`` the record of a full run that
``tests/test_suite_speed.py`` holds the fast loop to (each test's wall seconds).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections import Counter

import pytest


def pytest_addoption(parser) -> None:
    parser.addoption("--cpu-times", metavar="FILE", help="append each test's CPU seconds to FILE (JSON lines)")


DESELECTED = pytest.StashKey[list]()


def pytest_deselected(items) -> None:
    """Keep the tests ``-m``/``-k`` left out: tests/test_suite_speed.py checks every module collected."""
    if items:
        items[0].config.stash.setdefault(DESELECTED, []).extend(items)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = item.config.getoption("--cpu-times")
    if not path:
        yield
        return
    began = time.time()
    start = time.perf_counter(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    worker = getattr(item.config, "workerinput", {}).get("workerid", "master")  # not the environment: a
    record = {"test": item.nodeid, "worker": worker,  # pytest started by a worker's test inherits it
              "start": round(began, 3), "wall": round(time.perf_counter() - start[0], 3),
              "cpu": round(_cpu(resource.RUSAGE_SELF) - start[1], 3),
              "children_cpu": round(_cpu(resource.RUSAGE_CHILDREN) - start[2], 3)}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def _records(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def summary(path: str, top: int = 30) -> str:
    modules = by_module(path)
    lines = [f"{sum(n for *_, n in modules.values())} tests, {sum(c for c, *_ in modules.values()):.0f} CPU-s, "
             f"{sum(w for _, w, _ in modules.values()):.0f} s of test time",
             f"{'CPU-s':>8} {'test s':>8} {'tests':>5}  module"]
    costliest = sorted(modules.items(), key=lambda item: -item[1][0])[:top]  # stable: ties in the file's order
    lines += [f"{cpu:8.1f} {wall:8.1f} {count:5d}  {module}" for module, (cpu, wall, count) in costliest]
    return "\n".join(lines)


def by_module(path: str) -> dict[str, tuple[float, float, int]]:
    """Each module's CPU-s, test seconds and tests in ``path``."""
    figures: dict[str, list] = {}
    for record in _records(path):
        row = figures.setdefault(record["test"].split("::")[0], [0.0, 0.0, 0])
        row[0] += record["cpu"] + record["children_cpu"]
        row[1] += record["wall"]
        row[2] += 1
    return {module: tuple(row) for module, row in figures.items()}


def compare(before: str, after: str) -> str:
    """A Markdown table of each module's CPU-s and test seconds in two runs, the costliest before
    first, with the totals: testing.md's before/after."""
    old, new = by_module(before), by_module(after)
    none = (0.0, 0.0, 0)
    lines = ["| module | CPU-s before | CPU-s after | test s before | test s after | tests before | tests after |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for module in sorted(old.keys() | new.keys(), key=lambda m: (-old.get(m, none)[0], m)):
        (c0, w0, n0), (c1, w1, n1) = old.get(module, none), new.get(module, none)
        lines.append(f"| `{module.rsplit('/', 1)[-1]}` | {c0:.1f} | {c1:.1f} | {w0:.1f} | {w1:.1f} | {n0} | {n1} |")
    totals = [sum(row[i] for row in figures.values()) for figures in (old, new) for i in range(3)]
    lines.append(f"| all | {totals[0]:.0f} | {totals[3]:.0f} | {totals[1]:.0f} | {totals[4]:.0f} | {totals[2]} | {totals[5]} |")
    return "\n".join(lines)


def drift(before: str, after: str, touched: tuple[str, ...] = (), at_least: float = 3.0) -> tuple[float, int]:
    """The median of after/before CPU over the tests that took at least ``at_least`` CPU-s before,
    ran in both, and lie in no module whose file name starts with one of ``touched`` (the modules a
    change touched), and how many such tests there were: the machine's own drift between two runs."""
    old = {r["test"]: r["cpu"] + r["children_cpu"] for r in _records(before)}
    new = {r["test"]: r["cpu"] + r["children_cpu"] for r in _records(after)}
    ratios = sorted(new[test] / cpu for test, cpu in old.items() if cpu >= at_least and test in new
                    and not test.split("::")[0].rsplit("/", 1)[-1].startswith(touched))
    if not ratios:
        return float("nan"), 0
    middle = len(ratios) // 2
    return (ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2), len(ratios)


def costliest_first(path: str) -> list[str]:
    """The modules by their test time in ``path``, longest first: tests/costliest_first.txt."""
    wall = Counter()
    for record in _records(path):
        wall[record["test"].split("::")[0].rsplit("/", 1)[-1]] += record["wall"]
    return [module for module, _ in wall.most_common()]


def record(path: str) -> dict:
    """Each test's wall seconds (setup, call and teardown) in ``path``: tests/test_times.json."""
    return {"command": "python -m pytest --cpu-times FILE; python tests/cpu_time.py FILE --record",
            "tests": len(_records(path)),
            "seconds": {r["test"]: r["wall"] for r in sorted(_records(path), key=lambda r: r["test"])}}


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "--order":
        print("\n".join(costliest_first(sys.argv[1])))
    elif len(sys.argv) > 3 and sys.argv[2] == "--compare":
        print(compare(sys.argv[1], sys.argv[3]))
    elif len(sys.argv) > 3 and sys.argv[2] == "--drift":
        median, count = drift(sys.argv[1], sys.argv[3], tuple(sys.argv[4:]))
        print(f"median CPU after/before over {count} tests of untouched modules (>= 3 CPU-s before): {median:.3f}")
    elif len(sys.argv) > 2 and sys.argv[2] == "--record":
        print(json.dumps(record(sys.argv[1]), indent=0))
    else:
        print(summary(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30))
