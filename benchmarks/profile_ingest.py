"""Where `qcat.training.clicklogs.clicklog.ingest` spends its time and memory, step by step.

Run: python benchmarks/profile_ingest.py /tmp/qcat-scale/log_10M.parquet /tmp/qcat-scale/taxonomy.tsv

Ingestion itself is not changed: DuckDB's connection is wrapped so every SQL statement it
runs is timed with the process's resident memory before, after and at its peak (sampled
every 20 ms), and the Python between statements (normalizing distinct queries, resolving
categories, building the ClickTable) shows up as the gaps. A cProfile summary follows.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path

import duckdb


def rss_gb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e9
    return 0.0


class Sampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak = 0.0
        self.running = True

    def run(self):
        while self.running:
            self.peak = max(self.peak, rss_gb())
            time.sleep(0.02)

    def reset(self):
        self.peak = rss_gb()


STEPS: list[tuple[str, float, float, float, float]] = []  # (what, start s, seconds, rss after, peak during)


class Connection:
    """A DuckDB connection that records each statement."""

    def __init__(self, con, sampler, started):
        self._con, self._sampler, self._started = con, sampler, started
        self._last = time.perf_counter()

    def _gap(self, now):
        if now - self._last > 0.05:
            STEPS.append(("(python between statements)", self._last - self._started, now - self._last, rss_gb(),
                          self._sampler.peak))

    def execute(self, sql, *args, **kwargs):
        now = time.perf_counter()
        self._gap(now)
        self._sampler.reset()
        # DuckDB finds Python objects named in the SQL (``from query_map``) among the calling
        # frame's variables: run the statement in a frame that holds the caller's.
        caller = sys._getframe(1)
        scope = {**caller.f_locals, "_con": self._con, "_sql": sql, "_args": args, "_kwargs": kwargs}
        exec("_result = _con.execute(_sql, *_args, **_kwargs)", caller.f_globals, scope)
        result = scope["_result"]
        end = time.perf_counter()
        what = " ".join(sql.split())[:90]
        STEPS.append((what, now - self._started, end - now, rss_gb(), self._sampler.peak))
        self._last = end
        self._sampler.reset()
        return Result(result, self, what)

    def __getattr__(self, name):
        return getattr(self._con, name)


class Result:
    def __init__(self, result, connection, what):
        self._result, self._connection, self._what = result, connection, what

    def __getattr__(self, name):
        attribute = getattr(self._result, name)
        if name not in ("fetchall", "fetchnumpy", "fetchone", "df", "arrow"):
            return attribute

        def fetch(*args, **kwargs):
            started = time.perf_counter()
            self._connection._sampler.reset()
            value = attribute(*args, **kwargs)
            end = time.perf_counter()
            STEPS.append((f"  .{name}() of: {self._what[:60]}", started - self._connection._started, end - started,
                          rss_gb(), self._connection._sampler.peak))
            self._connection._last = end
            return value

        return fetch


def main() -> int:
    from qcat.taxonomy import load_taxonomy
    from qcat.training.clicklogs import clicklog

    log, taxonomy_path = Path(sys.argv[1]), Path(sys.argv[2])
    taxonomy = load_taxonomy(taxonomy_path)
    sampler = Sampler()
    sampler.start()
    started = time.perf_counter()
    real_connect = duckdb.connect
    clicklog.duckdb.connect = lambda *a, **k: Connection(real_connect(*a, **k), sampler, started)
    profile = cProfile.Profile()
    profile.enable()
    result = clicklog.ingest(log, taxonomy)
    profile.disable()
    total = time.perf_counter() - started
    clicklog.duckdb.connect = real_connect
    print(result.report.format())
    print(f"\ningest: {total:.1f} s; resident memory now {rss_gb():.2f} GB\n")
    print(f"{'start s':>8} {'seconds':>8} {'RSS after':>9} {'peak':>6}  step")
    for what, start, seconds, after, peak in STEPS:
        if seconds >= 0.05:
            print(f"{start:8.1f} {seconds:8.1f} {after:8.2f}G {peak:5.2f}G  {what}")
    print()
    pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
