"""``qcat data ...``: click logs: ingest, simulate, build the demo corpus and model."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from qcat.cli import float_at_least, float_in, int_at_least, share
from qcat.errors import InputError
from qcat.training.clicklogs.clicklog import INTERNAL_NODE_RULES
from qcat.training.commands.data_flags import add_data_flags


def build_parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``qcat {command}`` (the CLI reference is generated from it)."""
    from qcat.cli import ArgumentParser

    parser = ArgumentParser(prog=f"qcat {command}")
    _add_data_commands(parser.add_subparsers(dest="action", metavar="ACTION", required=True))
    return parser


def main(command: str, argv: list[str]) -> int:
    args = build_parser(command).parse_args(argv)
    return args.run(args)


def _add_data_commands(sub: argparse._SubParsersAction) -> None:
    ingest = sub.add_parser("ingest", help="validate and aggregate a click log (CSV, TSV, Parquet, JSONL)")
    ingest.add_argument("log", help="click-log file (with --engine spark: any path or URI Spark reads)")
    ingest.add_argument("--taxonomy", type=Path, required=True, help="taxonomy file (tsv/csv, Google txt, Best Buy json)")
    ingest.add_argument("--taxonomy-format", choices=("tsv", "csv", "google", "bestbuy"), default=None)
    ingest.add_argument("--format", choices=("csv", "tsv", "parquet", "jsonl"), default=None, help="default: from the file name")
    ingest.add_argument("--min-clicks", type=float_at_least(0), default=3, help="drop (query, category) pairs with fewer clicks (default 3)")
    ingest.add_argument("--date-from", default=None, help="keep rows dated on or after (YYYY-MM-DD)")
    ingest.add_argument("--date-to", default=None, help="keep rows dated before (YYYY-MM-DD)")
    ingest.add_argument("--strict", action="store_true", help="stop at the first unusable row, naming it")
    ingest.add_argument("--internal-nodes", choices=INTERNAL_NODE_RULES, default="other",
                        help="rows naming a non-leaf category: other (default) counts them for an explicit Other leaf "
                        "under the node, refuse stops with their counts, keep trains on the node itself (the model "
                        "may then answer it)")
    ingest.add_argument("--out", type=Path, default=None, help="write the aggregated table (.parquet or .csv)")
    ingest.add_argument("--force", action="store_true", help="replace --out if it exists (refused otherwise)")
    ingest.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                        help="duckdb (default; exact row numbers) or spark (any path Spark reads)")
    ingest.add_argument("--spark-master", default="local[2]", help="Spark master URL for --engine spark (default local[2])")
    ingest.set_defaults(run=run_ingest)

    simulate = sub.add_parser("simulate", help="simulate a year of search clicks over a catalog")
    simulate.add_argument("--catalog", type=Path, default=None, help="listings CSV (default: the demo catalog)")
    simulate.add_argument("--out", type=Path, required=True, help="click log to write (.parquet or .csv)")
    simulate.add_argument("--intents-out", type=Path, default=None, help="also write each query's intended listing/category")
    simulate.add_argument("--seed", type=int_at_least(0), default=0)
    simulate.add_argument("--click-noise", type=float_in(0, 1, high_open=True), default=0.03,
                          help="share of clicks on off-intent categories, in [0, 1) (default 0.03)")
    simulate.add_argument("--typo-rate", type=share(), default=0.02, help="share of query tokens with a typo, in [0, 1] (default 0.02)")
    simulate.set_defaults(run=run_simulate)

    audit = sub.add_parser("audit", help="find the leaves the training data cannot tell apart: report and confusable.tsv")
    add_data_flags(audit, out_help="report directory to write (report.md, report.json, confusable.tsv)",
                   out_default=Path("qcat-audit"), confusable=False)
    found = audit.add_argument_group("what counts as confusable (docs: guide/confusable.md)")
    found.add_argument("--folds", type=int_at_least(2, 20), default=5,
                       help="folds of the training queries the fast model is cross-fitted over (default 5)")
    found.add_argument("--min-confusions", type=int_at_least(1), default=3,
                       help="cross-fitted confusions a pair needs, both ways together, or else split texts (default 3)")
    found.add_argument("--min-lift", type=float_at_least(0), default=5.0,
                       help="how many times more often than chance the pair is confused, or its texts split "
                            "(default 5)")
    found.add_argument("--min-rate", type=share(), default=0.01,
                       help="confusions (or split texts) over the two leaves' queries, in [0, 1] (default 0.01)")
    found.add_argument("--min-shared", type=int_at_least(0), default=2,
                       help="training texts clicked under both leaves a pair needs (default 2)")
    found.add_argument("--max-partners", type=int_at_least(1), default=4,
                       help="a leaf with more confusable partners is reported as a finding and none of its pairs "
                            "enter the map (default 4)")
    found.add_argument("--force", action="store_true", help="replace the files of an earlier audit in --out")
    audit.add_argument("--gold", type=Path, default=None, metavar="FILE",
                       help="a graded gold file (query, category, grade 0-3; `qcat judge export --gold` writes one): "
                            "also count the acceptable answers people gave besides the exact one that the map's pairs "
                            "explain, and the map's pairs people rejected (report.md, report.json; "
                            "docs: guide/confusable.md#checking-the-map-against-peoples-grades)")
    audit.set_defaults(run=run_audit)

    demo = sub.add_parser("build-demo", help="rebuild the demo corpus and the bundled demo model from a catalog")
    demo.add_argument("--catalog", type=Path, default=None, help="listings CSV (default: the demo corpus's catalog)")
    demo.add_argument("--corpus-out", type=Path, default=None, help="default: the installed qcat-demo corpus (demo/qcat_demo/corpus)")
    demo.add_argument("--model-out", type=Path, default=None, help="default: the installed qcat-demo model (demo/qcat_demo/model)")
    demo.add_argument("--seed", type=int_at_least(0), default=0)
    demo.add_argument("--model-only", action="store_true",
                      help="retrain only the demo model, on the corpus as it is (the simulated log is deterministic: "
                           "rebuilding it under the query normalizer corpus.json records gives the same rows; the "
                           "shipped log was simulated under normalizer 1, before query folding)")
    demo.add_argument("--catalog-source", choices=("choose", "log", "both"), default="choose",
                      help="train the model on the simulated log alone, on the log plus the catalog's listings and "
                           "short forms (held-out listings excluded), or build both and ship, of those that keep the "
                           "corpus and model under 25 MiB, the one with the higher validation objective (default choose)")
    demo.set_defaults(run=run_build_demo)


def run_ingest(args: argparse.Namespace) -> int:
    from qcat.console.output import atomic_file, check_writable_file
    from qcat.taxonomy import load_taxonomy
    from qcat.training.clicklogs.clicklog import ingest
    from qcat.training.clicklogs.clicktable import table_output, write_table

    if args.out:
        table_output(args.out)
        check_writable_file(args.out, overwrite=args.force, force_flag="--force")
    if args.engine == "duckdb":
        from qcat.training.clicklogs.ingest_duckdb import memory_limit

        memory_limit()  # a bad $QCAT_DUCKDB_MEMORY_LIMIT fails before the log is read
    taxonomy = load_taxonomy(args.taxonomy, args.taxonomy_format)
    result = ingest(
        args.log, taxonomy, min_clicks=args.min_clicks, strict=args.strict,
        date_from=args.date_from, date_to=args.date_to, fmt=args.format,
        engine=args.engine, spark_master=args.spark_master, internal_nodes=args.internal_nodes,
    )
    print(result.report.format())
    problem = result.report.nothing_kept()
    if problem:
        raise InputError(f"{args.log}: {problem}" + (f"; {args.out} not written" if args.out else ""))
    if args.out:
        # Into a temporary sibling, renamed when complete: a failure leaves nothing at --out.
        with atomic_file(args.out, overwrite=args.force, force_flag="--force") as staging:
            write_table(result.table, staging)
        print(f"wrote {len(result.table):,} pairs to {args.out}")
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    from qcat.console.output import atomic_file, check_writable_file
    from qcat.training.data.corpus import Corpus
    from qcat.training.data.listings import load_catalog
    from qcat.training.simulator.simulate import (
        LOG_SUFFIXES,
        SimulationConfig,
        simulate_clicklog,
        write_intents,
        write_log,
    )

    outputs = {"--out": args.out, "--intents-out": args.intents_out}
    for flag, path in outputs.items():
        if path is not None:
            check_writable_file(path, flag, LOG_SUFFIXES)  # before the simulation runs
    if args.intents_out is not None and args.intents_out.resolve() == args.out.resolve():
        raise InputError(f"--intents-out {args.intents_out} is --out too; give two files")
    started = time.perf_counter()
    catalog = load_catalog(args.catalog or Corpus.open().path("catalog"))
    config = SimulationConfig(seed=args.seed, click_noise=args.click_noise, typo_rate=args.typo_rate)
    log = simulate_clicklog(catalog, catalog.taxonomy(), config)
    # Each into a temporary sibling, renamed when complete: a failure leaves nothing at the path.
    with atomic_file(args.out, "--out") as staging:
        write_log(log, staging)
    if args.intents_out:
        with atomic_file(args.intents_out, "--intents-out") as staging:
            write_intents(log.intent, staging)
    print(f"simulated {len(log):,} rows of {len(log.intent):,} queries over {len(catalog):,} listings "
          f"into {args.out} ({time.perf_counter() - started:.1f} s)")
    return 0


def run_audit(args: argparse.Namespace) -> int:
    import shlex
    import sys

    from qcat.taxonomy.confusable import FILE_NAME
    from qcat.training.audit.confusable_pairs import AuditSettings, audit
    from qcat.training.audit.report import write_audit
    from qcat.training.commands.data_flags import data_from_args, load_dataset

    started = time.perf_counter()
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} is a file; give a directory for the audit")
    if (args.out / FILE_NAME).exists() and not args.force:
        raise InputError(f"--out {args.out} holds an earlier audit ({FILE_NAME}); give --force to replace it, or "
                         f"another --out")
    gold = None
    if args.gold is not None:
        from qcat.measure.graded_gold import read_graded_gold

        gold = read_graded_gold(args.gold, "--gold")  # a bad file fails before the audit runs
    data = data_from_args(args)
    dataset, source, _ = load_dataset(args, data)  # the validation and real-text sets are never read here
    if gold is not None:
        gold = gold.check_against(dataset.taxonomy, "the data's taxonomy")
    settings = AuditSettings(folds=args.folds, min_confusions=args.min_confusions, min_lift=args.min_lift,
                             min_rate=args.min_rate, min_shared=args.min_shared, max_partners=args.max_partners)
    found = audit(dataset, settings)
    command = "qcat " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    agreement = None
    if gold is not None:
        from qcat.training.audit.gold_check import gold_agreement

        agreement = {"source": gold.source, "sha256": gold.sha256} | gold_agreement(
            [(p["leaf_a"], p["leaf_b"]) for p in found.confusable], gold.grades, name=dataset.taxonomy.path_of)
    written = write_audit(found, args.out, source, command, agreement)
    print(f"training split: {found.queries:,} queries; the fast model missed {found.held_out_errors:,} of "
          f"{found.held_out_queries:,} held out ({found.held_out_errors / max(found.held_out_queries, 1):.1%})")
    print(f"{len(found.confusable)} confusable pairs explain {found.explained_share():.1%} of those errors; "
          f"{len(found.hubs)} leaves have more than {settings.max_partners} partners (reported, not credited)")
    for pair in found.confusable[:10]:
        print(f"  {pair['confusions']:>4} confusions, {pair['shared_texts']:>4} shared texts: {pair['path_a']}  <->  "
              f"{pair['path_b']}")
    if agreement is not None:
        from qcat.training.audit.gold_check import agreement_line

        print(agreement_line(agreement, str(gold.source)))
    print(f"wrote {', '.join(map(str, written))} ({time.perf_counter() - started:.1f} s)")
    return 0


def run_build_demo(args: argparse.Namespace) -> int:
    from qcat.training.commands.build_demo import build_demo

    return build_demo(args)
