"""Scale benchmark (issue 15, part 2): the pipeline from a raw click log to an evaluated model
at 1M, 10M and 100M rows, with wall time and peak memory of every stage.

Run:  python benchmarks/bench_scale.py --sizes 1M,10M,100M --out /tmp/qcat-scale/results.json
      python benchmarks/bench_scale.py --sizes 1M,10M --stages ingest --engines duckdb,spark
      python benchmarks/bench_scale.py --report --out /tmp/qcat-scale/results.json  (table, fit, plot only)

The generated data (``--data-dir``, default /tmp/qcat-scale) is a synthetic taxonomy and,
per size, a Parquet click log written in row groups (never one in-memory table):

* taxonomy: 16 departments x 20 groups x 20 leaves = 6,400 leaves (synthetic: the Google
  product taxonomy shipped in tests/data has 4,719 leaves, fewer than the 5,000 asked for);
* the query universe grows with the log: ``distinct = 2 * rows ** 0.8`` (1M rows: 126k queries,
  10M: 796k, 100M: 5.0M); a query's popularity is Zipfian (rank ** -1.05), so fewer distinct
  queries than the universe appear in a log;
* a query is 1-5 tokens: one or two from its leaf's 12 topic tokens (Zipfian) and the rest
  from a 50,000-token vocabulary (Zipfian, rank ** -1.0);
* a query has three plausible categories, its leaf and two siblings; a row clicks the first
  with probability 0.75, the second 0.15, the third 0.07, and a random leaf 0.03 (noise);
* a row is one (query, category, clicks, date): clicks 1 + Geometric(0.5) - 1 (1-~10), dates
  over 2025.

Each stage runs the ``qcat`` command line in a child process; wall time is the child's and
peak memory its maximum resident set size (``os.wait4``'s ``ru_maxrss``). Results merge into
``--out`` per (stage, size, engine), so rerunning one stage keeps the others.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = Path("/tmp/qcat-scale")
STAGES = ("generate", "ingest", "nb", "xreg", "classify", "evaluate")
ENGINES = ("duckdb", "spark")  # qcat data ingest --engine
LABEL = {"generate": "generate log", "ingest": "ingest", "nb": "NB train", "xreg": "XReg train",
         "classify": "classify (batch)", "evaluate": "qcat evaluate"}

# -- the generator ---------------------------------------------------------------------

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


# -- running a stage -------------------------------------------------------------------


def qcat(*args: str) -> list[str]:
    return [sys.executable, "-m", "qcat.cli", *args]


def run_child(command: list[str], *, stdin=None, stdout_file=None, timeout: float | None = None,
              echo=True, env: dict[str, str] | None = None) -> dict:
    """Run ``command`` (with ``env`` added to the environment); its wall time, peak RSS
    (``os.wait4``) and exit status."""
    env = dict(os.environ,
               PYTHONUNBUFFERED="1", **(env or {}))
    started = time.perf_counter()
    out = open(stdout_file, "wb") if stdout_file else subprocess.PIPE
    child = subprocess.Popen(command, stdin=open(stdin, "rb") if stdin else subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT if not stdout_file else subprocess.PIPE, env=env, cwd=ROOT)
    tail: list[str] = []
    stream = child.stdout if not stdout_file else child.stderr
    deadline = started + timeout if timeout else None
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip().split("\r")[-1].strip()
        if not line or "\u2595" in line:  # DuckDB's progress bar
            continue
        tail = (tail + [line])[-20:]
        if echo:
            print(f"    [{time.perf_counter() - started:7.1f} s] {line}", flush=True)
        if deadline and time.perf_counter() > deadline:
            child.kill()
            break
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if stdout_file:
        out.close()
    return {"seconds": round(time.perf_counter() - started, 2), "peak_gb": round(usage.ru_maxrss * 1024 / 1e9, 3),
            "rc": child.returncode, "tail": tail[-5:]}


class Paths:
    def __init__(self, directory: Path, rows: int):
        self.dir = directory
        self.taxonomy = directory / "taxonomy.tsv"
        name = size_name(rows)
        self.log = directory / f"log_{name}.parquet"
        self.table = directory / f"table_{name}.parquet"
        self.nb = directory / f"nb_{name}"
        self.xreg = directory / f"xreg_{name}"
        self.queries = directory / f"queries_{name}.txt"
        self.report = directory / f"report_{name}"


def run_stage(stage: str, rows: int, engine: str, paths: Paths, args) -> dict | None:
    """One stage at one size; None when it is skipped."""
    if stage == "generate":
        command = [sys.executable, str(Path(__file__).resolve()), "--generate-only", str(rows),
                   "--data-dir", str(paths.dir), "--seed", str(args.seed)]
        result = run_child(command, timeout=args.timeout)
        if result["rc"] == 0:
            result.update(json.loads((paths.dir / f"generate_{size_name(rows)}.json").read_text()))
        return result
    if not paths.log.exists() and stage != "generate":
        print(f"  {stage} {size_name(rows)}: no log at {paths.log}; run --stages generate first")
        return None
    if stage == "ingest":
        out = paths.table if engine == "duckdb" else paths.dir / f"table_{size_name(rows)}_{engine}.parquet"
        command = qcat("data", "ingest", str(paths.log), "--taxonomy", str(paths.taxonomy), "--out", str(out),
                       "--engine", engine, "--force")  # a rerun replaces its own table
        limit = {"QCAT_DUCKDB_MEMORY_LIMIT": args.duckdb_memory_limit} if args.duckdb_memory_limit else {}
        result = run_child(command, timeout=args.timeout, env=limit)
        result["duckdb_memory_limit"] = args.duckdb_memory_limit if engine == "duckdb" else None
        return result
    if not paths.table.exists():
        print(f"  {stage} {size_name(rows)}: no aggregated table at {paths.table}; run --stages ingest first")
        return None
    source = ["--log", str(paths.table), "--taxonomy", str(paths.taxonomy)]
    if stage in ("nb", "xreg"):
        bundle = paths.nb if stage == "nb" else paths.xreg
        shutil.rmtree(bundle, ignore_errors=True)
        return run_child(qcat("train", stage, *source, "--out", str(bundle)), timeout=args.timeout)
    if not (paths.nb / "manifest.json").exists():
        print(f"  {stage} {size_name(rows)}: no NB bundle at {paths.nb}; run --stages nb first")
        return None
    if stage == "classify":
        n = write_query_sample(paths.log, paths.queries, args.classify_queries, args.seed)
        result = run_child(qcat("classify", "--model", str(paths.nb), "-k", "5", "--json"), stdin=paths.queries,
                           stdout_file=os.devnull, timeout=args.timeout)
        result["queries"] = n
        result["queries_per_s"] = round(n / result["seconds"]) if result["seconds"] else None
        return result
    if stage == "evaluate":
        shutil.rmtree(paths.report, ignore_errors=True)
        return run_child(qcat("evaluate", "--model", str(paths.nb), *source, "--out", str(paths.report)),
                         timeout=args.timeout)
    raise ValueError(stage)


# -- results, fits, table, plot ----------------------------------------------------------


def result_key(stage: str, engine: str) -> str:
    return f"ingest-{engine}" if stage == "ingest" else stage


def load_results(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"runs": {}}


def save_results(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=True))
    tmp.replace(path)


def fit_exponent(rows: list[int], values: list[float]) -> tuple[float, float] | None:
    """(a, b) of value = a * rows ** b, least squares in log-log; None under two points."""
    points = [(r, v) for r, v in zip(rows, values) if v and v > 0]
    if len({r for r, _ in points}) < 2:
        return None
    x = np.log([r for r, _ in points])
    y = np.log([v for _, v in points])
    b, log_a = np.polyfit(x, y, 1)
    return float(math.exp(log_a)), float(b)


def series(results: dict) -> dict[str, list[tuple[int, dict]]]:
    out: dict[str, list[tuple[int, dict]]] = {}
    for key, run in results["runs"].items():
        stage = key.rsplit("@", 1)[0]
        if run.get("rc") == 0:
            out.setdefault(stage, []).append((run["rows"], run))
    return {stage: sorted(points, key=lambda p: p[0]) for stage, points in sorted(out.items())}


def print_table(results: dict) -> str:
    data = series(results)
    sizes = sorted({rows for points in data.values() for rows, _ in points})
    header = "| stage | " + " | ".join(f"{size_name(s)} rows" for s in sizes) + " | time exponent b | memory exponent b |"
    lines = [header, "|" + "---|" * (len(sizes) + 3)]
    for stage, points in data.items():
        by_size = dict(points)
        cells = []
        for s in sizes:
            run = by_size.get(s)
            cells.append(f"{run['seconds']:,.1f} s, {run['peak_gb']:.2f} GB" if run else "-")
        t = fit_exponent([r for r, _ in points], [p["seconds"] for _, p in points])
        m = fit_exponent([r for r, _ in points], [p["peak_gb"] for _, p in points])
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {t[1]:.2f} |" if t else f"| {stage} | "
                     + " | ".join(cells) + " | - |")
        lines[-1] += f" {m[1]:.2f} |" if m else " - |"
    text = "\n".join(lines)
    print(text)
    return text


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    for stage, points in data.items():
        rows = [r for r, _ in points]
        for axis, field in ((left, "seconds"), (right, "peak_gb")):
            values = [p[field] for _, p in points]
            fit = fit_exponent(rows, values)
            label = f"{stage} (b={fit[1]:.2f})" if fit else stage
            axis.plot(rows, values, marker="o", label=label)
    for axis, title in ((left, "wall time (s)"), (right, "peak RSS (GB)")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("click-log rows")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    fig.suptitle("qcat pipeline at scale (2 cores, shared machine)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    print(f"plotted {path}")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1M", help="click-log rows, comma-separated (e.g. 1M,10M,100M)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    parser.add_argument("--engines", default="duckdb", help="ingestion engines, comma-separated (duckdb,spark)")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--out", type=Path, default=None, help="results JSON (merged per stage and size; "
                                                               "default DATA_DIR/results.json)")
    parser.add_argument("--plot", type=Path, default=None, help="SVG of time and memory against rows")
    parser.add_argument("--classify-queries", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a stage may run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duckdb-memory-limit", default=None, metavar="SIZE",
                        help="DuckDB ingestion's memory_limit (QCAT_DUCKDB_MEMORY_LIMIT; default the engine's 4GB)")
    parser.add_argument("--report", action="store_true", help="only print the table and fits (and --plot)")
    parser.add_argument("--generate-only", type=parse_size, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    if args.generate_only is not None:
        paths = Paths(args.data_dir, args.generate_only)
        info = generate_log(args.generate_only, paths.log, paths.taxonomy, args.seed,
                            progress=lambda m: print(m, flush=True))
        (args.data_dir / f"generate_{size_name(args.generate_only)}.json").write_text(json.dumps(info))
        return 0
    out = args.out or args.data_dir / "results.json"
    results = load_results(out)
    if not args.report:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
        stages = [s.strip() for s in args.stages.split(",") if s.strip()]
        if unknown := [s for s in stages if s not in STAGES]:
            parser.error(f"unknown stage(s) {unknown}; expected some of {', '.join(STAGES)}")
        engines = [e.strip() for e in args.engines.split(",") if e.strip()]
        if unknown := [e for e in engines if e not in ENGINES]:
            parser.error(f"unknown engine(s) {unknown}; expected some of {', '.join(ENGINES)}")
        for rows in sizes:
            paths = Paths(args.data_dir, rows)
            for stage in stages:
                for engine in (engines if stage == "ingest" else ["-"]):
                    key = result_key(stage, engine)
                    print(f"== {key} at {size_name(rows)} rows (load average {load_average()})", flush=True)
                    before = load_average()
                    result = run_stage(stage, rows, engine, paths, args)
                    if result is None:
                        continue
                    result.update({"rows": rows, "stage": key, "load_before": before, "load_after": load_average(),
                                   "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                    results["runs"][f"{key}@{rows}"] = result
                    save_results(out, results)
                    state = "ok" if result["rc"] == 0 else f"FAILED (exit {result['rc']}): {result['tail']}"
                    print(f"== {key} at {size_name(rows)}: {result['seconds']:,.1f} s, peak {result['peak_gb']:.2f} GB "
                          f"{state}", flush=True)
    print_table(results)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
