"""``qcat data ...`` and ``qcat train ...``: the training side of the command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from qcat.errors import InputError


def main(command: str, argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"qcat {command}")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    if command == "data":
        _add_data_commands(sub)
    else:
        _add_train_commands(sub)
    args = parser.parse_args(argv)
    return args.run(args)


# -- qcat data -------------------------------------------------------------------------


def _add_data_commands(sub: argparse._SubParsersAction) -> None:
    ingest = sub.add_parser("ingest", help="validate and aggregate a click log (CSV, TSV, Parquet, JSONL)")
    ingest.add_argument("log", type=Path)
    ingest.add_argument("--taxonomy", type=Path, required=True, help="taxonomy file (tsv/csv, Google txt, Best Buy json)")
    ingest.add_argument("--taxonomy-format", choices=("tsv", "csv", "google", "bestbuy"), default=None)
    ingest.add_argument("--format", choices=("csv", "tsv", "parquet", "jsonl"), default=None, help="default: from the file name")
    ingest.add_argument("--min-clicks", type=float, default=3, help="drop (query, category) pairs with fewer clicks (default 3)")
    ingest.add_argument("--date-from", default=None, help="keep rows dated on or after (YYYY-MM-DD)")
    ingest.add_argument("--date-to", default=None, help="keep rows dated before (YYYY-MM-DD)")
    ingest.add_argument("--strict", action="store_true", help="stop at the first unusable row, naming it")
    ingest.add_argument("--out", type=Path, default=None, help="write the aggregated table (.parquet or .csv)")
    ingest.set_defaults(run=run_ingest)

    simulate = sub.add_parser("simulate", help="simulate a year of search clicks over a catalog")
    simulate.add_argument("--catalog", type=Path, default=None, help="listings CSV (default: the demo catalog)")
    simulate.add_argument("--out", type=Path, required=True, help="click log to write (.parquet or .csv)")
    simulate.add_argument("--intents-out", type=Path, default=None, help="also write each query's intended listing/category")
    simulate.add_argument("--seed", type=int, default=0)
    simulate.add_argument("--click-noise", type=float, default=0.03, help="share of clicks on off-intent categories")
    simulate.add_argument("--typo-rate", type=float, default=0.02, help="share of query tokens with a typo")
    simulate.set_defaults(run=run_simulate)

    demo = sub.add_parser("build-demo", help="rebuild the demo corpus and the bundled demo model from a catalog")
    demo.add_argument("--catalog", type=Path, default=None, help="listings CSV (default: the demo corpus's catalog)")
    demo.add_argument("--corpus-out", type=Path, default=None, help="default: training/demo")
    demo.add_argument("--model-out", type=Path, default=None, help="default: qcat/demo_model")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(run=run_build_demo)


def run_ingest(args: argparse.Namespace) -> int:
    from qcat.taxonomy import load_taxonomy
    from training.clicklog import ingest
    from training.clicktable import write_table

    taxonomy = load_taxonomy(args.taxonomy, args.taxonomy_format)
    result = ingest(
        args.log, taxonomy, min_clicks=args.min_clicks, strict=args.strict,
        date_from=args.date_from, date_to=args.date_to, fmt=args.format,
    )
    print(result.report.format())
    if args.out:
        write_table(result.table, args.out)
        print(f"wrote {len(result.table):,} pairs to {args.out}")
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    from training.catalog import load_catalog
    from training.corpus import Corpus
    from training.simulate import SimulationConfig, simulate_clicklog, write_intents, write_log

    started = time.perf_counter()
    catalog = load_catalog(args.catalog or Corpus.open().path("catalog"))
    config = SimulationConfig(seed=args.seed, click_noise=args.click_noise, typo_rate=args.typo_rate)
    log = simulate_clicklog(catalog, catalog.taxonomy(), config)
    write_log(log, args.out)
    if args.intents_out:
        write_intents(log.intent, args.intents_out)
    print(f"simulated {len(log):,} rows of {len(log.intent):,} queries over {len(catalog):,} listings "
          f"into {args.out} ({time.perf_counter() - started:.1f} s)")
    return 0


def run_build_demo(args: argparse.Namespace) -> int:
    """Catalog -> taxonomy -> simulated log -> corpus.json -> NB demo model, reproducibly."""
    import shutil
    from datetime import date

    from training import nb_trainer
    from training.catalog import load_catalog
    from training.corpus import DEMO_DIR, META_FILE, Corpus
    from training.logstats import format_stats, table1_stats
    from training.simulate import SimulationConfig, catalog_brand_queries, simulate_clicklog, write_intents, write_log

    started = time.perf_counter()
    corpus_dir = args.corpus_out or DEMO_DIR
    model_dir = args.model_out or Path(__file__).resolve().parent.parent / "qcat" / "demo_model"
    source = args.catalog or DEMO_DIR / "catalog.csv.gz"
    catalog = load_catalog(source)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    if source.resolve() != (corpus_dir / "catalog.csv.gz").resolve():
        shutil.copyfile(source, corpus_dir / "catalog.csv.gz")
    taxonomy = catalog.taxonomy()
    taxonomy.save_tsv(corpus_dir / "taxonomy.tsv")
    config = SimulationConfig(seed=args.seed)
    log = simulate_clicklog(catalog, taxonomy, config)
    write_log(log, corpus_dir / "clicklog.parquet")
    write_intents(log.intent, corpus_dir / "intents.parquet")
    print(f"simulated {len(log):,} log rows ({time.perf_counter() - started:.1f} s)")
    start = date.fromisoformat(config.start_date)
    middle = date(start.year + (start.month + 5) // 12, (start.month + 5) % 12 + 1, start.day)
    end = start.replace(year=start.year + 1)
    meta = {
        "catalog": "catalog.csv.gz",
        "taxonomy": "taxonomy.tsv",
        "log": "clicklog.parquet",
        "intents": "intents.parquet",
        "periods": {"candidate": [start.isoformat(), middle.isoformat()], "base": [middle.isoformat(), end.isoformat()]},
        "min_clicks": 3,
        "split_seed": args.seed,
        "split_fractions": [0.8, 0.1, 0.1],
        "simulation": {k: v for k, v in vars(config).items()},
    }
    (corpus_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    corpus = Corpus.open(corpus_dir)
    whole_year = corpus.ingest("all", taxonomy).table
    print("whole-year log statistics (eBay Table 1):")
    print(format_stats(table1_stats(whole_year, brands=catalog_brand_queries(catalog))))
    dataset = corpus.dataset("base")
    model = nb_trainer.fit(dataset)
    model.config["data"] = {"corpus": "demo", "period": "base"}
    model.metrics["test"] = nb_trainer.evaluate_pr(model, dataset.test)
    if model_dir.exists():
        shutil.rmtree(model_dir)
    model.save(model_dir)
    print(f"demo model: test {json.dumps(model.metrics['test'])} -> {model_dir}")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


# -- qcat train ------------------------------------------------------------------------


def _add_train_commands(sub: argparse._SubParsersAction) -> None:
    nb = sub.add_parser("nb", help="train the Naive Bayes backend (eBay §3.2)")
    source = nb.add_argument_group("data (default: the demo corpus, base period)")
    source.add_argument("--corpus", type=Path, default=None, help="corpus directory with corpus.json")
    source.add_argument("--period", choices=("base", "candidate", "all"), default="base")
    source.add_argument("--log", type=Path, default=None, help="a click log instead of a corpus (needs --taxonomy)")
    source.add_argument("--taxonomy", type=Path, default=None)
    source.add_argument("--min-clicks", type=float, default=3)
    source.add_argument("--seed", type=int, default=0, help="split seed for --log (train/validation/test by query)")
    nb.add_argument("--out", type=Path, required=True, help="model bundle directory to write")
    nb.set_defaults(run=run_train_nb)


def load_dataset(args: argparse.Namespace):
    from qcat.taxonomy import load_taxonomy
    from training.clicklog import ingest
    from training.corpus import Corpus
    from training.dataset import Dataset

    if args.log is not None:
        if args.taxonomy is None:
            raise InputError("--log needs --taxonomy")
        taxonomy = load_taxonomy(args.taxonomy)
        result = ingest(args.log, taxonomy, min_clicks=args.min_clicks)
        print(result.report.format())
        return Dataset.from_table(result.table, taxonomy, seed=args.seed), {"log": str(args.log)}
    corpus = Corpus.open(args.corpus)
    return corpus.dataset(args.period), {"corpus": str(corpus.directory), "period": args.period}


def run_train_nb(args: argparse.Namespace) -> int:
    from training import nb_trainer

    started = time.perf_counter()
    dataset, source = load_dataset(args)
    print(f"dataset: {len(dataset.table.queries):,} queries, {len(dataset.table):,} pairs, "
          f"{len(dataset.table.categories):,} categories ({time.perf_counter() - started:.1f} s)")
    model = nb_trainer.fit(
        dataset,
        progress=lambda t, a, s: print(f"  threshold {t:g} alpha {a:g}: validation PR@1 {s:.4f}"),
    )
    model.config["data"] = source
    model.metrics["test"] = nb_trainer.evaluate_pr(model, dataset.test)
    model.save(args.out)
    print(f"chose threshold {model.config['threshold']:g}, alpha {model.config['alpha']:g}")
    print("validation " + json.dumps(model.metrics["validation"]))
    print("test       " + json.dumps(model.metrics["test"]))
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
