"""``qcat golden``: the golden-data search harness.

- ``generate``: simulated golden judgments for the demo corpus's queries;
- ``import``: read golden data (qcat CSV or ESCI JSON), report skipped rows, write qcat CSV;
- ``evaluate``: baseline vs target classifier (and no classifier) through the mini search;
  ``--baseline-precision``/``--target-precision`` P: that side answers by node at precision P.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

from qcat.cli import ArgumentParser, float_at_least, float_in, int_at_least, share
from qcat.console.output import check_writable_file
from qcat.errors import InputError
from qcat.evaluation.report_files import clean_json

GOLDEN_SOURCES = "qcat.golden_sources"
DEFAULT_OUT = Path("qcat-golden-report")


def _common_golden(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("csv", "esci", "sql"), default=None,
                        help="golden data format (default: esci for .json, else csv; sql with --golden-session)")
    parser.add_argument("--strict", action="store_true", help="stop at the first bad row instead of skipping it")
    parser.add_argument("--golden-session", default=None, metavar="SESSION",
                        help="read a judging session (id or name) from the judging store given as the golden "
                             "data: a database URL or SQLite file (see qcat judge)")


def load_golden_source(source: str, args: argparse.Namespace):
    """Golden data from a file, or (``--golden-session``) from a judging store."""
    if args.golden_session is not None or args.format == "sql":
        if args.golden_session is None:
            raise InputError("--format sql reads a judging store: give --golden-session SESSION")
        return judging_store_reader()(source, args.golden_session)
    from qcat.evaluation.golden.importers import load_golden

    return load_golden(Path(source), args.format, args.strict)


def judging_store_reader():
    """``(store URL, session) -> GoldenSet`` for a judging session. The judging package provides it
    through the ``qcat.golden_sources`` entry point (pyproject.toml): the harness sits below the
    judging app in the layout, so it names the reader instead of importing it."""
    found = entry_points(group=GOLDEN_SOURCES, name="judging-store")
    if not found:
        raise InputError(f"--golden-session: no {GOLDEN_SOURCES!r} entry point 'judging-store' is installed; "
                         'reinstall qcat with the judge extra: pip install "qcat[judge]"')
    try:
        return next(iter(found)).load()
    except ImportError as exc:  # the judge extra is missing: the message names it
        raise InputError(f"--golden-session: {exc}") from None


def build_parser(command: str = "") -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="qcat golden", description="Golden-data search harness (eBay §4.2.2).")
    commands = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    generate = commands.add_parser("generate", help="simulate golden judgments for the demo corpus")
    generate.add_argument("--corpus", type=Path, default=None, help="corpus directory (default: the demo corpus)")
    generate.add_argument("--period", choices=("base", "candidate", "all"), default="base",
                          help="log period whose demand picks the queries (default: base, the latest)")
    generate.add_argument("--per-segment", type=int_at_least(1), default=10_000, help="golden queries per segment (default 10000)")
    generate.add_argument("--seed", type=int_at_least(0), default=0)
    generate.add_argument("--out", type=Path, required=True, help="golden CSV to write (.csv or .csv.gz)")

    convert = commands.add_parser("import", help="validate golden data and write it as qcat CSV")
    convert.add_argument("file", metavar="FILE", help="golden data file (or judging store with --golden-session)")
    _common_golden(convert)
    convert.add_argument("--out", type=Path, default=None, help="golden CSV to write (default: only report)")

    evaluate = commands.add_parser("evaluate", help="compare two classifiers through the mini search")
    evaluate.add_argument("--baseline", type=Path, required=True, metavar="MODEL", help="baseline model bundle")
    evaluate.add_argument("--target", type=Path, required=True, metavar="MODEL", help="target model bundle")
    evaluate.add_argument("--names", nargs=2, default=None, metavar=("BASELINE", "TARGET"),
                          help="display names (default: the directory names)")
    evaluate.add_argument("--golden", default=None, metavar="FILE",
                          help="golden data (default: simulated for the demo corpus); with --golden-session a "
                               "judging store's URL or SQLite file")
    _common_golden(evaluate)
    evaluate.add_argument("--corpus", type=Path, default=None,
                          help="corpus: catalog, taxonomy and the log whose demand makes the segments (default: demo)")
    evaluate.add_argument("--period", choices=("base", "candidate", "all"), default="base")
    evaluate.add_argument("--no-demand", action="store_true", help="ignore the log: one query set of golden queries")
    evaluate.add_argument("--mode", choices=("boost", "filter"), default="boost", help="how categories act (default boost)")
    evaluate.add_argument("--boost-weight", type=float_at_least(0), default=1.0, help="weight of the category score (default 1)")
    evaluate.add_argument("--categories", type=int_at_least(1), default=3, help="categories a filtered search keeps (default 3)")
    evaluate.add_argument("-n", "--top-n", type=int_at_least(1), default=5, help="listings returned per query (default 5)")
    for side in ("baseline", "target"):
        evaluate.add_argument(f"--{side}-precision", type=float_in(0, 1, low_open=True, high_open=True), default=None,
                              metavar="P", help=f"the {side} answers each query by its deepest taxonomy node right at "
                              "least P of the time (the bundle's node calibration) instead of its top categories: "
                              "the listings beneath it are boosted or kept, a query without a node is left "
                              "unboosted/unfiltered (default: top categories)")
    evaluate.add_argument("--candidates", type=int_at_least(1), default=200, help="BM25 candidates re-ranked (default 200)")
    evaluate.add_argument("--sample-fraction", type=share(), default=0.1,
                          help="share of the catalog added to the inventory (default 0.1)")
    evaluate.add_argument("--per-segment", type=int_at_least(1), default=10_000, help="queries per segment (default 10000)")
    evaluate.add_argument("--bootstrap", type=int_at_least(0), default=1000, help="bootstrap draws for the intervals (default 1000)")
    evaluate.add_argument("--seed", type=int_at_least(0), default=0)
    evaluate.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"report directory (default ./{DEFAULT_OUT})")
    evaluate.add_argument("--json", action="store_true", help="also print the report JSON on stdout")
    return parser


def main(command: str, argv: list[str]) -> int:
    args = build_parser(command).parse_args(argv)
    say = lambda message: print(message, file=sys.stderr)  # noqa: E731
    if args.action == "import":
        return run_import(args, say)
    if args.action == "generate":
        return run_generate(args, say)
    return run_evaluate(args, say)


GOLDEN_SUFFIXES = (".csv", ".csv.gz")  # what GoldenSet.save_csv writes


def run_import(args: argparse.Namespace, say) -> int:
    if args.out:
        check_writable_file(args.out, "--out", GOLDEN_SUFFIXES)
    golden = load_golden_source(args.file, args)
    say(golden.report.format())
    if args.out:
        golden.save_csv(args.out)
        say(f"wrote {args.out}")
    return 0


def run_generate(args: argparse.Namespace, say) -> int:
    from qcat.evaluation.golden.demo import DemoGoldenConfig, generate_demo_golden
    from qcat.evaluation.golden.query_sets import log_demand
    from qcat.training.data.corpus import Corpus

    check_writable_file(args.out, "--out", GOLDEN_SUFFIXES)
    corpus = Corpus.open(args.corpus)
    golden = generate_demo_golden(corpus, log_demand(corpus, args.period),
                                  DemoGoldenConfig(per_segment=_positive(args.per_segment, "--per-segment"), seed=args.seed))
    golden.save_csv(args.out)
    say(f"wrote {len(golden):,} simulated judgments of {len(set(golden.query.tolist())):,} queries to {args.out}")
    return 0


def _positive(value: int, flag: str) -> int:
    if value < 1:
        raise InputError(f"{flag} must be positive, got {value}")
    return value


def run_evaluate(args: argparse.Namespace, say) -> int:
    from qcat.evaluation.golden.demo import DemoGoldenConfig, generate_demo_golden
    from qcat.evaluation.golden.harness import HarnessConfig, check_names, golden_evaluate, load_checked_models
    from qcat.evaluation.golden.query_sets import log_demand
    from qcat.evaluation.golden.report import draw_all, render_html, render_markdown
    from qcat.evaluation.golden.search import SearchConfig
    from qcat.evaluation.report_files import write_report_files
    from qcat.training.data.corpus import Corpus

    started = time.perf_counter()
    precisions = (args.baseline_precision, args.target_precision)
    names = tuple(args.names) if args.names else tuple(
        directory.resolve().name + ("" if precision is None else f" node@{precision:g}")
        for directory, precision in zip((args.baseline, args.target), precisions))
    if names[0] == names[1] and not args.names:
        names = (f"{names[0]} (baseline)", f"{names[1]} (target)")
    check_names(names)
    config = HarnessConfig(
        search=SearchConfig(top_n=args.top_n, candidates=args.candidates, mode=args.mode,
                            boost_weight=args.boost_weight, categories=args.categories),
        per_segment=args.per_segment, sample_fraction=args.sample_fraction, bootstrap=args.bootstrap, seed=args.seed,
        precisions=precisions,
    )
    corpus = Corpus.open(args.corpus)
    if args.golden_session is not None and args.golden is None:
        raise InputError("--golden-session needs --golden: the judging store's URL or SQLite file")
    taxonomy = corpus.taxonomy()
    # Models on another taxonomy are refused before golden data is read or simulated (which takes long).
    models = load_checked_models(names, (args.baseline, args.target), taxonomy, precisions)
    golden = load_golden_source(args.golden, args) if args.golden else None
    catalog = corpus.catalog()
    demand = None if args.no_demand and golden is not None else log_demand(corpus, args.period)
    if golden is None:
        say("no --golden given: simulating golden judgments for the demo corpus's queries")
        golden = generate_demo_golden(corpus, demand, DemoGoldenConfig(per_segment=args.per_segment, seed=args.seed),
                                      catalog, taxonomy)
        demand = None if args.no_demand else demand
    say(golden.report.format())
    report = golden_evaluate(golden, args.baseline, args.target, catalog, taxonomy, demand, config,
                             names, progress=say, models=models)
    report["seconds"]["end_to_end"] = round(time.perf_counter() - started, 2)
    written = write_report_files(report, args.out, draw_all(report), render_markdown, render_html)
    for line in node_summary(report):
        say(line)
    say(f"wrote {', '.join(str(p) for p in written)} ({time.perf_counter() - started:.1f} s)")
    if args.json:
        print(json.dumps(clean_json(report), indent=2))
    return 0


def node_summary(report: dict) -> list[str]:
    """With a side answering by node, per set: each such side's node (mean depth, no node) and the
    target − baseline PR@k and NDCG* (points, 95% intervals); nothing otherwise."""
    from qcat.evaluation.golden.report import interval, label, node_systems
    from qcat.evaluation.golden.system_metrics import PR_AT_K

    def number(value: float | None) -> str:
        return "–" if value is None or math.isnan(value) else f"{value:.2f}"

    by_node = node_systems(report)
    if not by_node:
        return []
    first = report["deltas"][0]
    lines = [f"{first['target']} − {first['baseline']} (points, {report['options']['bootstrap']:,}-draw 95% intervals):"]
    for entry in report["deltas"]:
        if (entry["target"], entry["baseline"]) != (first["target"], first["baseline"]):
            continue
        segment = entry["segment"]
        figures = [(s["name"], s["node"]["segments"][segment]) for s in by_node]
        nodes = "; ".join(f"{name}: mean depth {number(f['mean_depth'])}, no node {100 * f['no_node_share']:.1f}%"
                          for name, f in figures)
        deltas = ", ".join(f"δ {label(report, m)} {interval(entry[m])}" for m in (PR_AT_K, "NDCG*"))
        lines.append(f"  {segment} ({by_node[0]['node']['segments'][segment]['queries']:,} queries): {deltas}; {nodes}")
    return lines
