"""Generate a large click log for ingestion benchmarks, and time one ingestion of it.

    python benchmarks/bench_ingest.py generate --rows 10000000 --out /tmp/log.parquet
    /usr/bin/time -v python -m qcat.cli data ingest /tmp/log.parquet \\
        --taxonomy demo/qcat_demo/corpus/taxonomy.tsv --out /tmp/table.parquet

    python benchmarks/bench_ingest.py cache   # the demo's base period: ingested, then from QCAT_INGEST_CACHE

Queries are drawn Zipf-like from ``--queries`` distinct strings, each with a few categories
of the demo taxonomy; clicks, impressions and dates are random. Written in chunks, so
generating 100M rows needs little memory.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def generate(rows: int, n_queries: int, out: Path, taxonomy: Path, seed: int = 0, chunk: int = 2_000_000) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from qcat.taxonomy import load_taxonomy

    rng = np.random.default_rng(seed)
    leaves = np.asarray(load_taxonomy(taxonomy).leaves, dtype=object)
    words = np.asarray([f"w{i}" for i in range(20_000)], dtype=object)
    lengths = rng.integers(1, 5, n_queries)
    queries = np.asarray([" ".join(rng.choice(words, n).tolist()).title() for n in lengths], dtype=object)
    query_categories = rng.integers(0, len(leaves), (n_queries, 3))  # each query has 3 plausible categories
    weights = 1.0 / np.arange(1, n_queries + 1)  # Zipf, s = 1
    weights /= weights.sum()
    days = np.datetime64("2025-01-01") + np.arange(365)
    with pq.ParquetWriter(out, pa.schema([("query", pa.string()), ("category", pa.string()), ("clicks", pa.int32()),
                                          ("impressions", pa.int32()), ("date", pa.date32())])) as writer:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            q = rng.choice(n_queries, n, p=weights)
            category = leaves[query_categories[q, rng.integers(0, 3, n)]]
            clicks = rng.integers(1, 4, n)
            writer.write_table(pa.table({
                "query": pa.array(queries[q], pa.string()), "category": pa.array(category, pa.string()),
                "clicks": pa.array(clicks, pa.int32()), "impressions": pa.array(clicks + rng.integers(0, 20, n), pa.int32()),
                "date": pa.array(rng.choice(days, n).astype("datetime64[D]"), pa.date32()),
            }))


def time_cache(repeats: int) -> None:
    """The demo corpus's base period as `qcat train`/`evaluate` read it: ingested (no cache), ingested
    and written to an empty QCAT_INGEST_CACHE, then read back from it; the median of ``repeats``
    runs of each, in seconds of wall and of this process's CPU (DuckDB's threads included)."""
    import os
    import shutil
    import statistics
    import tempfile

    from qcat.training.data.corpus import Corpus

    corpus = Corpus.open()
    taxonomy = corpus.taxonomy()
    cache = Path(tempfile.mkdtemp(prefix="qcat-ingest-cache-"))

    def timed(setting: str | None, empty: bool) -> tuple[float, float]:
        if setting is None:
            os.environ.pop("QCAT_INGEST_CACHE", None)
        else:
            os.environ["QCAT_INGEST_CACHE"] = setting
        if empty:
            shutil.rmtree(cache, ignore_errors=True)
        wall, cpu = time.perf_counter(), time.process_time()
        corpus.ingest("base", taxonomy)
        return time.perf_counter() - wall, time.process_time() - cpu

    try:
        for name, setting, empty in (("ingested, no cache", None, False), ("ingested and written", str(cache), True),
                                     ("read from the cache", str(cache), False)):
            runs = [timed(setting, empty) for _ in range(repeats)]
            print(f"{name}: {statistics.median(w for w, _ in runs):.2f} s wall, "
                  f"{statistics.median(c for _, c in runs):.2f} CPU-s (median of {repeats})")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--rows", type=int, default=10_000_000)
    gen.add_argument("--queries", type=int, default=300_000)
    gen.add_argument("--taxonomy", type=Path, default=Path(__file__).resolve().parent.parent / "demo/qcat_demo/corpus/taxonomy.tsv")
    gen.add_argument("--out", type=Path, required=True)
    cache = sub.add_parser("cache")
    cache.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.action == "cache":
        time_cache(args.repeats)
        return
    started = time.perf_counter()
    generate(args.rows, args.queries, args.out, args.taxonomy)
    print(f"wrote {args.rows:,} rows to {args.out} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
