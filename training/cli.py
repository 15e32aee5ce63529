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
