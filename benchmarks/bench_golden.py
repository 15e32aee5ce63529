"""Golden harness benchmark: `qcat golden evaluate` end to end on the demo corpus.

Run: python benchmarks/bench_golden.py --baseline MODEL --target MODEL [--per-segment 20000]
     [--mode boost] [--out DIR]                                (figures in docs/benchmarks.md)

With --per-segment 20000 the demo gives 824 head + 9,344 torso + 20,000 tail = 30,168 queries
(the demo log's base-period head and torso hold only 824 and 9,344 distinct queries). Each run is a fresh process, so the wall
time includes Python's start, reading the log's demand, simulating the golden judgments,
building the inventory and BM25 index, three searches, the metrics, 1,000 bootstrap draws per
delta and writing the report. The stage timings come from the report's JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--names", nargs=2, default=("NB", "target"))
    parser.add_argument("--per-segment", type=int, default=20_000)
    parser.add_argument("--mode", nargs="+", default=["boost", "filter"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/qcat-bench-golden"))
    args = parser.parse_args()
    for mode in args.mode:
        out = args.out / mode
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from qcat.cli import main; raise SystemExit(main())", "golden",
                        "evaluate", "--baseline", args.baseline, "--target", args.target, "--names", *args.names,
                        "--per-segment", str(args.per_segment), "--mode", mode, "--out", str(out)], check=True)
        wall = time.perf_counter() - started
        report = json.loads((out / "report.json").read_text())
        queries = report["systems"][0]["segments"]["all"]["queries"]
        print(f"\nmode {mode}: {queries:,} queries, {report['golden']['judgments']:,} judgments, "
              f"wall {wall:.1f} s end to end; stages {report['seconds']}")
        print("| system | segment | accuracy | precision | recall | F1 | AUC | NDCG* |")
        for system in report["systems"]:
            for segment, figures in system["segments"].items():
                print(f"| {system['name']} | {segment} | " + " | ".join(
                    f"{100 * figures[m]:.2f}" for m in ("accuracy", "precision", "recall", "F1", "AUC", "NDCG*")) + " |")
        print("| δ | segment | accuracy | precision | recall | F1 | AUC | NDCG* |")
        for entry in report["deltas"]:
            print(f"| {entry['target']} − {entry['baseline']} | {entry['segment']} | " + " | ".join(
                f"{100 * entry[m]['delta']:+.2f} [{100 * entry[m]['low']:+.2f}, {100 * entry[m]['high']:+.2f}]"
                for m in ("accuracy", "precision", "recall", "F1", "AUC", "NDCG*")) + " |")


if __name__ == "__main__":
    main()
