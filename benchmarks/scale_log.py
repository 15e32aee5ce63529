"""The scale benchmark's data (benchmarks/bench_scale.py): a synthetic taxonomy and a Parquet click
log of a given size, written in row groups (never one in-memory table), as its docstring describes;
sizes written as ``1M``; a sample of the log's queries for batch classification."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

DEPARTMENTS, GROUPS, LEAVES = 16, 20, 20
VOCABULARY = 50_000
TOPIC_TOKENS = 12
QUERY_LAW = (2.0, 0.8)  # distinct queries in the universe = c * rows ** b
QUERY_ZIPF, TOKEN_ZIPF, TOPIC_ZIPF = 1.05, 1.0, 1.0
CATEGORY_SHARES = (0.75, 0.15, 0.07, 0.03)  # first, second, third category, random leaf
ROW_GROUP = 1_000_000
CHUNK = 4_000_000


def parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * scale)


def size_name(rows: int) -> str:
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if rows >= scale and rows % (scale // 1000 or 1) == 0:
            value = rows / scale
            return f"{value:g}{unit}"
    return str(rows)


def distinct_queries(rows: int) -> int:
    c, b = QUERY_LAW
    return max(100, int(c * rows**b))


def _words(n: int, rng: np.random.Generator, syllables: int = 3) -> np.ndarray:
    """``n`` distinct pronounceable pseudo-words."""
    onsets = np.array(list("bcdfghjklmnprstvwz") + ["br", "ch", "cl", "st", "tr", "sh", "pl", "gr"])
    vowels = np.array(["a", "e", "i", "o", "u", "ai", "ea", "ou", "y"])
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        m = 2 * (n - len(words)) + 100
        parts = [onsets[rng.integers(0, len(onsets), m)].astype(object) + vowels[rng.integers(0, len(vowels), m)]
                 for _ in range(syllables)]
        lengths = rng.integers(1, syllables + 1, m)
        for i in range(m):
            word = "".join(parts[s][i] for s in range(lengths[i]))
            if word not in seen and len(word) > 2:
                seen.add(word)
                words.append(word)
                if len(words) == n:
                    break
    return np.asarray(words, dtype=object)


def zipf_cdf(n: int, s: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def zipf_draw(cdf: np.ndarray, size, rng: np.random.Generator) -> np.ndarray:
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(cdf) - 1)


def write_taxonomy(path: Path, seed: int = 0) -> list[str]:
    """The synthetic taxonomy (TSV id/path/parent); returns the leaf ids in leaf order."""
    rng = np.random.default_rng(seed + 7)
    names = _words(DEPARTMENTS + GROUPS * 4 + LEAVES * 8, rng, syllables=2)
    names = [n.capitalize() for n in names]
    lines, leaves = ["id\tpath\tparent"], []
    for d in range(DEPARTMENTS):
        department = names[d]
        d_id = f"d{d}"
        lines.append(f"{d_id}\t{department}\t")
        for g in range(GROUPS):
            group = f"{names[DEPARTMENTS + (d * GROUPS + g) % (GROUPS * 4)]} {g}"
            g_id = f"g{d}_{g}"
            lines.append(f"{g_id}\t{department} > {group}\t{d_id}")
            for leaf in range(LEAVES):
                name = f"{names[DEPARTMENTS + GROUPS * 4 + (g * LEAVES + leaf) % (LEAVES * 8)]} {leaf}"
                l_id = f"l{d}_{g}_{leaf}"
                lines.append(f"{l_id}\t{department} > {group} > {name}\t{g_id}")
                leaves.append(l_id)
    path.write_text("\n".join(lines) + "\n")
    return leaves


class QueryUniverse:
    """Every query a log of ``rows`` rows may hold: its text and its three categories."""

    def __init__(self, rows: int, n_leaves: int, seed: int = 0):
        import pyarrow as pa
        import pyarrow.compute as pc

        rng = np.random.default_rng(seed)
        self.size = n = distinct_queries(rows)
        vocabulary = _words(VOCABULARY, np.random.default_rng(seed + 1))
        # A leaf's topic tokens: a random sample of the vocabulary's mid range.
        topic = rng.integers(200, VOCABULARY, size=(n_leaves, TOPIC_TOKENS))
        leaf_cdf = zipf_cdf(n_leaves, 0.8)
        leaf_order = rng.permutation(n_leaves)
        leaf = leaf_order[zipf_draw(leaf_cdf, n, rng)]
        group_start = (leaf // LEAVES) * LEAVES
        second = group_start + (leaf % LEAVES + rng.integers(1, LEAVES, n)) % LEAVES
        third = group_start + (second % LEAVES + rng.integers(1, LEAVES - 1, n)) % LEAVES
        third = np.where(third == leaf, group_start + (third % LEAVES + 1) % LEAVES, third)
        self.categories = np.stack([leaf, second, third], axis=1).astype(np.int32)
        # Query text: 1-5 tokens, 1-2 topic tokens first, the rest from the vocabulary.
        length = rng.choice([1, 2, 3, 4, 5], size=n, p=[0.12, 0.33, 0.30, 0.17, 0.08])
        n_topic = np.minimum(length, 1 + (rng.random(n) < 0.35))
        tokens = zipf_draw(zipf_cdf(VOCABULARY, TOKEN_ZIPF), (n, 5), rng)
        topic_pick = zipf_draw(zipf_cdf(TOPIC_TOKENS, TOPIC_ZIPF), (n, 2), rng)
        tokens[:, 0] = topic[leaf, topic_pick[:, 0]]
        tokens[:, 1] = np.where(n_topic > 1, topic[leaf, topic_pick[:, 1]], tokens[:, 1])
        keep = np.arange(5)[None, :] < length[:, None]
        offsets = np.concatenate([[0], np.cumsum(length)]).astype(np.int32)
        flat = pa.array(vocabulary[tokens[keep]].tolist(), type=pa.string())
        self.text = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), flat), " ")
        self.cdf = zipf_cdf(n, QUERY_ZIPF)
        self.order = rng.permutation(n)  # popularity rank -> query


def generate_log(rows: int, out: Path, taxonomy: Path, seed: int = 0, progress=print) -> dict:
    """Write a Parquet click log of ``rows`` rows in chunks (row groups of 1M rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    started = time.perf_counter()
    leaves = np.asarray(write_taxonomy(taxonomy, seed), dtype=object)
    leaf_array = pa.array(leaves.tolist(), type=pa.string())
    universe = QueryUniverse(rows, len(leaves), seed)
    progress(f"  universe: {universe.size:,} queries over {len(leaves):,} leaves "
             f"({time.perf_counter() - started:.1f} s)")
    rng = np.random.default_rng(seed + 2)
    schema = pa.schema([("query", pa.string()), ("category", pa.string()), ("clicks", pa.int32()),
                        ("date", pa.date32())])
    day0 = (np.datetime64("2025-01-01") - np.datetime64("1970-01-01")).astype(np.int32)
    seen = np.zeros(universe.size, dtype=bool)
    tmp = out.with_suffix(".parquet.part")
    shares = np.cumsum(CATEGORY_SHARES)
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        done = 0
        while done < rows:
            n = min(CHUNK, rows - done)
            query = universe.order[zipf_draw(universe.cdf, n, rng)]
            seen[query] = True
            pick = np.searchsorted(shares, rng.random(n), side="right")
            category = np.where(pick < 3, universe.categories[query, np.minimum(pick, 2)],
                                rng.integers(0, len(leaves), n))
            clicks = rng.geometric(0.5, n).astype(np.int32)
            day = (day0 + rng.integers(0, 365, n)).astype(np.int32)
            table = pa.table({
                "query": universe.text.take(pa.array(query)),
                "category": leaf_array.take(pa.array(category)),
                "clicks": pa.array(clicks),
                "date": pa.array(day, type=pa.int32()).cast(pa.date32()),
            }, schema=schema)
            writer.write_table(table, row_group_size=ROW_GROUP)
            done += n
            progress(f"  wrote {done:,} / {rows:,} rows ({time.perf_counter() - started:.1f} s)")
    tmp.replace(out)
    return {"rows": rows, "universe_queries": universe.size, "distinct_query_ids": int(seen.sum()),
            "leaves": len(leaves), "bytes": out.stat().st_size, "seconds": round(time.perf_counter() - started, 2)}


def write_query_sample(log: Path, out: Path, n: int, seed: int = 0) -> int:
    """``n`` queries drawn as the log draws them (by row), for the batch-classification stage."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(log)
    rng = np.random.default_rng(seed + 3)
    groups = rng.choice(pf.num_row_groups, size=min(pf.num_row_groups, 4), replace=False)
    column = pf.read_row_groups(sorted(groups.tolist()), columns=["query"]).column("query")
    take = rng.integers(0, len(column), n)
    out.write_text("\n".join(column.take(take).to_pylist()) + "\n")
    return n
