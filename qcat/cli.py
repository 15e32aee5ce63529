"""The ``qcat`` command line.

``classify`` and ``info`` live here and import only the serving runtime; the command
groups of other packages (``data``, ``train``, ``evaluate``) are imported only when they are run,
so that classifying stays fast and never loads training code.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Iterable, Iterator

from qcat.errors import EmptyQueryError, QcatError

# command -> (module with main(command, argv), one-line help)
DELEGATED = {
    "data": ("training.cli", "click logs: ingest, simulate, build the demo corpus"),
    "train": ("training.cli", "train a model bundle (nb)"),
    "evaluate": ("evaluation.cli", "score models on a corpus split; write a head/torso/tail report"),
    "golden": ("evaluation.golden.cli", "golden-data search harness: generate, import, evaluate (baseline vs target)"),
    "db": ("judging_app.cli", "judging store migrations: upgrade, downgrade, current"),
    "judge": ("judging_app.cli", "side-by-side human judging: create-session, add-judge, app, report, export"),
}
BATCH = 2048


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qcat", description="Categorize e-commerce search queries into leaf categories.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    classify = commands.add_parser("classify", help="classify queries (arguments, or one per line on stdin)")
    classify.add_argument("queries", nargs="*", metavar="QUERY", help="queries; read from stdin when none is given")
    classify.add_argument("--model", type=Path, default=None, help="model bundle directory (default: the bundled demo model)")
    classify.add_argument("-k", type=int, default=5, help="number of categories per query (default 5)")
    classify.add_argument("--json", action="store_true", help="one JSON object per query")
    classify.add_argument("--explain", action="store_true", help="say which model answered and why")
    classify.add_argument("--backend", choices=("nb", "xmlq", "hybrid"), default=None,
                          help="with a hybrid bundle: answer with one part only, or route by length (default)")
    classify.add_argument("--cutoff", type=int, choices=(1, 2, 3, 4), default=None,
                          help="with a hybrid bundle: queries of at most this many tokens go to NB (default: the bundle's)")

    info = commands.add_parser("info", help="show a model bundle's manifest summary (and verify it)")
    info.add_argument("model", type=Path, metavar="MODEL_DIR")
    info.add_argument("--json", action="store_true", help="print the whole manifest as JSON")

    for name, (_, help_text) in DELEGATED.items():
        commands.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in DELEGATED:
            module = importlib.import_module(DELEGATED[argv[0]][0])
            return module.main(argv[0], argv[1:])
        args = build_parser().parse_args(argv)
        if args.command == "classify":
            return run_classify(args)
        return run_info(args)
    except QcatError as exc:
        print(f"qcat: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); silence the flush at exit too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # last resort: a one-line message, never a traceback
        if os.environ.get("QCAT_DEBUG"):
            raise
        print(f"qcat: internal error: {type(exc).__name__}: {exc} (set QCAT_DEBUG=1 for details)", file=sys.stderr)
        return 70


def _batches(items: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_classify(args: argparse.Namespace) -> int:
    from qcat.classifier import Classifier
    from qcat.normalize import tokenize

    if args.k < 1:
        raise QcatError(f"-k must be at least 1, got {args.k}")
    if args.queries:
        sources = [(f"argument {i}", q) for i, q in enumerate(args.queries, start=1)]
        for where, query in sources:
            if not tokenize(query):
                raise EmptyQueryError(f"{where}: query {query!r} is empty after normalization")
    else:
        sources = ((f"stdin line {i}", line.rstrip("\r\n")) for i, line in enumerate(sys.stdin, start=1))
    classifier = Classifier.load(args.model, backend=args.backend, cutoff=args.cutoff)
    failures = 0
    for batch in _batches(sources, BATCH):
        is_valid = [bool(tokenize(query)) for _, query in batch]
        results = iter(classifier.classify([q for (_, q), ok in zip(batch, is_valid) if ok], args.k))
        for (where, query), ok in zip(batch, is_valid):
            if not ok:
                failures += 1
                message = f"{where}: query {query!r} is empty after normalization"
                print(f"qcat: error: {message}", file=sys.stderr)
                if args.json:
                    print(json.dumps({"query": query, "error": message}, ensure_ascii=False))
                continue
            print_result(next(results), classifier, args)
    return 2 if failures else 0


def print_result(result, classifier, args: argparse.Namespace) -> None:
    if args.json:
        record = result.to_json()
        if args.explain:
            record["explanation"] = [f"answered by {result.source}"] + classifier.explain(result.query, args.k)
        print(json.dumps(record, ensure_ascii=False))
        return
    print(f"{result.query}  [{result.backend}: {result.source}]")
    if args.explain:
        for line in classifier.explain(result.query, args.k):
            print(f"  # {line}")
    for rank, category in enumerate(result.categories, start=1):
        print(f"  {rank:>2}. {category.score:.3f}  {category.id:<10} {category.path}")


def run_info(args: argparse.Namespace) -> int:
    from qcat.bundle import read_manifest
    from qcat.classifier import model_from_manifest

    manifest = read_manifest(args.model)
    model = model_from_manifest(manifest)  # loads fully: catches inconsistent arrays too
    if args.json:
        print(json.dumps(manifest.data, indent=2, sort_keys=True))
        return 0
    data = manifest.data
    print(f"model bundle   {manifest.directory}")
    print(f"backend        {data['backend']}  (format {data['format_version']}, qcat {data.get('qcat_version')})")
    print(f"created        {data.get('created')}")
    print(f"labels         {len(model.labels):,} categories")
    print(f"taxonomy hash  {data['taxonomy_hash'][:16]}…   vocabulary hash {str(data.get('vocabulary_hash'))[:16]}…")
    print(f"files          {len(data['files'])}, all hashes verified")
    for name, digest in sorted(data.get("parts", {}).items()):
        print(f"part           {name}/  (manifest sha256 {digest[:16]}…, verified with its files)")
    for key, value in sorted(manifest.config.items()):
        print(f"config         {key} = {value}")
    for key, value in sorted(manifest.metrics.items()):
        if key != "tuning_grid":
            print(f"metric         {key} = {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
