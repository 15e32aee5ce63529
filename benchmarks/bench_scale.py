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
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale_log import generate_log, parse_size, size_name, write_query_sample
from scale_report import load_results, plot, print_table, save_results

DEFAULT_DIR = Path("/tmp/qcat-scale")
STAGES = ("generate", "ingest", "nb", "xreg", "classify", "evaluate")
ENGINES = ("duckdb", "spark")  # qcat data ingest --engine
LABEL = {"generate": "generate log", "ingest": "ingest", "nb": "NB train", "xreg": "XReg train",
         "classify": "classify (batch)", "evaluate": "qcat evaluate"}


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


def result_key(stage: str, engine: str) -> str:
    return f"ingest-{engine}" if stage == "ingest" else stage


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
