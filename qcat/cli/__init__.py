"""The ``qcat`` command line.

``classify``, ``serve``, ``info`` (:mod:`qcat.cli.info`) and ``labelwise`` (:mod:`qcat.cli.labelwise`) import
only the serving runtime; the command groups of other packages (``data``, ``train``, ``evaluate``)
are imported only when they are run, so that classifying stays fast and never loads training code.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from pathlib import Path
from typing import Iterable, Iterator

from qcat.console.extras import COMMAND_MODULES, EXTRA_INCLUDES, EXTRA_MODULES, first_missing
from qcat.console.output import json_line
from qcat.console.progress import QUIET_ENV
from qcat.errors import EmptyQueryError, InputError, QcatError, printable_message
from qcat.text.lines import MAX_K as LIMIT_K
from qcat.version import __version__

# command -> (module with main(command, argv) and build_parser(command), one-line help)
DELEGATED = {
    "data": ("qcat.training.commands.data", "click logs: ingest, simulate, build the demo corpus"),
    "train": ("qcat.training.commands.train", "train a model bundle (nb, xmlq, xreg, hybrid, rerank)"),
    "evaluate": ("qcat.evaluation.cli", "score models on a corpus split; write a head/torso/tail report"),
    "golden": ("qcat.evaluation.golden.cli", "golden-data search harness: generate, import, evaluate (baseline vs target)"),
    "db": ("qcat.judging.cli", "judging store migrations: upgrade, downgrade, current"),
    "judge": ("qcat.judging.cli", "side-by-side human judging: create-session, add-judge, app, report, export"),
}
# The extra each delegated command needs (the modules each brings: qcat/console/extras.py): a command
# whose extra is missing names it, with the pip line, before it parses or imports anything. A
# command whose actions use parts of it (qcat train xmlq, rerank) checks its action's part.
COMMAND_EXTRAS = {"data": "data", "train": "train", "evaluate": "eval", "golden": "eval", "db": "judge", "judge": "judge"}
KERAS_BACKENDS = {"tensorflow", "jax", "torch"}
BATCH = 2048


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors (a bad number, a missing option) are one line,
    ``qcat: error: PROG: MESSAGE``, exit status 2, like every other user error."""

    def error(self, message: str):
        raise InputError(f"{self.prog}: {message}")


def int_at_least(low: int, high: int | None = None):
    """An argparse ``type``: an integer in [low, high], the flag named in the error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"in {low}..{high}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return value
    return parse


def float_in(low: float | None = None, high: float | None = None, *, low_open: bool = False,
             high_open: bool = False):
    """An argparse ``type``: a finite number in the interval from ``low`` to ``high`` (either
    may be None: unbounded; ``*_open``: the bound itself excluded). NaN and infinities are
    refused, whatever the bounds."""
    if low is not None and high is not None:
        bound = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        bound = f"{'greater than' if low_open else 'of at least'} {low:g}"
    elif high is not None:
        bound = f"{'less than' if high_open else 'of at most'} {high:g}"
    else:
        bound = None

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        finite = math.isfinite(value)
        ok = finite and (low is None or (value > low if low_open else value >= low)) \
            and (high is None or (value < high if high_open else value <= high))
        if not ok:
            raise argparse.ArgumentTypeError(f"must be a {'' if finite else 'finite '}number{' ' + bound if bound else ''}, "
                                             f"got {text}")
        return value
    return parse


def float_at_least(low: float):
    """An argparse ``type``: a finite number of at least ``low``."""
    return float_in(low)


def positive_float():
    """An argparse ``type``: a finite number greater than 0."""
    return float_in(0, low_open=True)


def share():
    """An argparse ``type``: a share, a number in [0, 1]."""
    return float_in(0, 1)


# The most categories one query may ask for: -k of classify, as `qcat serve --max-k`'s default.
MAX_K = 100
# The most a serving operator may allow with `qcat serve --max-k` (arrays are sized by k).
SERVE_MAX_K = LIMIT_K
# The most threads a training command starts.
MAX_THREADS = 256


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="qcat", description="Categorize e-commerce search queries into leaf categories.")
    parser.add_argument("--version", action="store_true", help="print qcat's version and exit")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress lines (they are drawn only on a terminal anyway; also QCAT_QUIET=1)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    classify = commands.add_parser("classify", help="classify queries (arguments, or one per line on stdin)")
    classify.add_argument("queries", nargs="*", metavar="QUERY", help="queries; read from stdin when none is given")
    classify.add_argument("--model", type=Path, default=None, help="model bundle directory (default: the bundled demo model)")
    classify.add_argument("-k", type=int_at_least(1, MAX_K), default=5,
                          help=f"number of categories per query, 1..{MAX_K} (default 5)")
    classify.add_argument("--json", action="store_true", help="one JSON object per query")
    classify.add_argument("--explain", action="store_true", help="say which model answered and why")
    classify.add_argument("--backend", choices=("nb", "xmlq", "xreg", "hybrid"), default=None,
                          help="the bundle's backend, or with a hybrid bundle: answer with one part only, "
                               "or route by length (default)")
    classify.add_argument("--cutoff", type=int, choices=(1, 2, 3, 4), default=None,
                          help="with a hybrid bundle: queries of at most this many tokens go to NB (default: the bundle's)")
    classify.add_argument("--min-score", type=share(), default=None, metavar="P",
                          help="return only categories scoring at least P, in [0, 1] (calibrated probabilities; a "
                               "query may get none); default: the top k whatever their scores")
    classify.add_argument("--no-overrides", action="store_true",
                          help="ignore the bundle's judged overrides (qcat train ... --judged FILE --overrides): "
                               "answer every query with the model alone")
    classify.add_argument("--precision", type=float_in(0, 1, low_open=True, high_open=True), default=None, metavar="P",
                          help="also answer the deepest taxonomy node (department, aisle, ... or leaf) that is right "
                               "at least P of the time, in (0, 1), e.g. 0.9 (the bundle needs a node calibration)")

    info = commands.add_parser("info", help="show a model bundle's manifest summary (and verify it)")
    info.add_argument("model", type=Path, metavar="MODEL_DIR")
    info.add_argument("--json", action="store_true", help="print the whole manifest as JSON")

    labelwise = commands.add_parser("labelwise", help="the queries of a file most relevant to a category (XReg labelwise inference)")
    labelwise.add_argument("category", metavar="CATEGORY", help="a category id or an 'A > B > C' path")
    labelwise.add_argument("--queries", type=Path, required=True, metavar="FILE", help="candidate queries, one per line")
    labelwise.add_argument("-n", type=int_at_least(1), default=10, help="number of queries to return (default 10)")
    labelwise.add_argument("--model", type=Path, default=None,
                           help="an xreg bundle, or a hybrid with an xreg part (default: $QCAT_MODEL or the demo model)")
    labelwise.add_argument("--factor", type=positive_float(), default=None,
                           help="F: each tree node keeps F x (its share of training points) of the queries "
                                "(default: the bundle's, 4)")
    labelwise.add_argument("--json", action="store_true", help="one JSON object with the ranked queries")

    serve = commands.add_parser("serve", help="serve the classifier over HTTP (JSON API, metrics, safe reload)")
    serve.add_argument("--model", type=Path, default=None, help="model bundle directory (default: $QCAT_MODEL or the demo model)")
    serve.add_argument("--backend", choices=("nb", "xmlq", "xreg", "hybrid"), default=None,
                       help="as for classify: with a hybrid bundle, answer with one part only")
    serve.add_argument("--cutoff", type=int, choices=(1, 2, 3, 4), default=None, help="as for classify (hybrid bundles)")
    serve.add_argument("--no-overrides", action="store_true", help="as for classify: the model alone, without "
                       "the bundle's judged overrides")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int_at_least(0, 65535), default=8080, help="port to listen on; 0 picks a free one (default 8080)")
    serve.add_argument("--workers", type=int_at_least(1, MAX_THREADS), default=1,
                       help=f"worker processes sharing the port, 1..{MAX_THREADS} (default 1)")
    serve.add_argument("--max-batch", type=int_at_least(1), default=1000, help="most queries in one request (default 1000)")
    serve.add_argument("--max-query-length", type=int_at_least(1), default=1000, help="most characters in one query (default 1000)")
    serve.add_argument("--max-body-bytes", type=int_at_least(64), default=1 << 20, help="largest request body (default 1 MiB)")
    serve.add_argument("--max-k", type=int_at_least(1, SERVE_MAX_K), default=MAX_K,
                       help=f"largest k a request may ask for, 1..{SERVE_MAX_K} (default {MAX_K})")
    serve.add_argument("--default-k", type=int_at_least(1, SERVE_MAX_K), default=5, help="k of a request that gives none (default 5)")
    serve.add_argument("--timeout", type=positive_float(), default=5.0,
                       help="seconds a request's headers and its body may take to arrive, and it may wait for "
                            "the model (default 5)")
    serve.add_argument("--keep-alive", type=positive_float(), default=5.0,
                       help="seconds an idle keep-alive connection stays open (default 5)")
    serve.add_argument("--max-connections", type=int_at_least(1), default=1000,
                       help="open connections per worker; past it requests get 503 (default 1000)")
    serve.add_argument("--drain", type=float_at_least(0), default=10.0,
                       help="on SIGTERM, seconds in-flight requests may take to finish (default 10)")
    serve.add_argument("--no-micro-batch", action="store_true",
                       help="classify each request on its own instead of batching concurrent ones")
    serve.add_argument("--no-access-log", action="store_true", help="no JSON access-log line per request")

    for name, (_, help_text) in DELEGATED.items():
        commands.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["--version"]:
            print(f"qcat {__version__}")
            return 0
        if argv[:1] == ["--quiet"]:
            os.environ[QUIET_ENV] = "1"
            argv = argv[1:]
        if argv and argv[0] in DELEGATED:
            require_extra(argv[0], argv[1] if len(argv) > 1 else None)
            try:
                module = importlib.import_module(DELEGATED[argv[0]][0])
                return module.main(argv[0], argv[1:])
            except ModuleNotFoundError as exc:
                raise missing_extra(argv[0], exc) from None
        args = build_parser().parse_args(argv)
        if args.command == "classify":
            return run_classify(args)
        if args.command == "labelwise":
            from qcat.cli.labelwise import run_labelwise

            return run_labelwise(args)
        if args.command == "serve":
            return run_serve(args)
        from qcat.cli.info import run_info

        return run_info(args)
    except QcatError as exc:
        print(f"qcat: error: {printable_message(str(exc))}", file=sys.stderr)
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
        print(f"qcat: internal error: {type(exc).__name__}: {printable_message(str(exc))} (set QCAT_DEBUG=1 for "
              f"details)", file=sys.stderr)
        return 70


def extra_error(command: str, extras: str, module: str) -> InputError:
    return InputError(f"qcat {command} needs the '{extras}' extra (module {module!r} is missing): "
                      f'pip install "qcat[{extras}]"')


def require_extra(command: str, action: str | None = None) -> None:
    """Refuse a command whose extra is not installed, naming the extra: the modules that
    ``command action`` uses (:data:`qcat.console.extras.COMMAND_MODULES`), or the whole extra for a
    command not split by action. With no known action (``qcat train --help``), only the
    extras that the command's extra includes."""
    extra = COMMAND_EXTRAS[command]
    split = any(name == command for name, _ in COMMAND_MODULES)
    modules = COMMAND_MODULES.get((command, action), () if split else None)
    if (module := first_missing(extra, modules)) is not None:
        raise extra_error(command, extra, module)


def missing_extra(command: str, exc: ModuleNotFoundError) -> Exception:
    """The one-line error for a module an option of a command needs (``--engine spark``: pyspark;
    XML-Q: a Keras backend), or ``exc`` itself when no extra brings the module (a bug)."""
    module = (exc.name or "").split(".")[0]
    if module in KERAS_BACKENDS:
        return InputError(f"qcat {command}: XML-Q needs a Keras backend and {module!r} is not installed: "
                          f"pip install tensorflow-cpu (or tensorflow[and-cuda], or jax[cuda12] with KERAS_BACKEND=jax)")
    extra = next((name for name, modules in EXTRA_MODULES.items() if module in modules), None)
    if extra is None:
        return exc
    wanted = COMMAND_EXTRAS[command]
    covered = {wanted, *EXTRA_INCLUDES.get(wanted, ())}
    return extra_error(command, wanted if extra in covered else f"{wanted},{extra}", module)


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
    from qcat.bundles.bundle import normalizer_mismatch
    from qcat.classifier import Classifier, Failure
    from qcat.text.normalize import tokenize

    if args.queries:
        sources = [(f"argument {i}", q) for i, q in enumerate(args.queries, start=1)]
        for where, query in sources:
            if not tokenize(query):
                raise EmptyQueryError(f"{where}: query {query!r} is empty after normalization")
    else:
        sources = stdin_queries(sys.stdin.buffer)
    classifier = Classifier.load(args.model, backend=args.backend, cutoff=args.cutoff,
                                 overrides=not args.no_overrides)
    classifier.check_precision(args.precision)  # a bundle that cannot answer it is refused before any query
    mismatch = normalizer_mismatch(classifier.manifest)
    if mismatch:
        print(f"qcat: warning: {mismatch}", file=sys.stderr)
    failures = classified = 0
    for batch in _batches(sources, BATCH):
        readable = [query for _, query in batch if not isinstance(query, Failure)]
        answers = iter(classifier.classify_each(readable, args.k, min_score=args.min_score, precision=args.precision))
        for where, query in batch:
            answer = query if isinstance(query, Failure) else next(answers)
            if isinstance(answer, Failure):
                failures += 1
                message = f"{where}: {answer.error}"
                print(f"qcat: error: {message}", file=sys.stderr)
                if args.json:
                    print(json_line({"query": answer.query, "error": message}))
                continue
            classified += 1
            print_result(answer, classifier, args)
    if not args.queries and classified + failures == 0:
        raise InputError("no queries to classify: stdin was empty (give queries as arguments or one per line on stdin)")
    return 2 if failures else 0


def stdin_queries(stream) -> Iterator[tuple[str, object]]:
    """(where, query) for each line of a binary stream: the query as text, or for a line that
    is not UTF-8 a ``Failure`` (its query shown with replacement characters), so that the rest
    is still read. A UTF-8 byte order mark starting the stream (Windows editors write one) is not
    part of the first query."""
    from qcat.classifier import Failure

    for number, raw in enumerate(stream, start=1):
        raw = raw.rstrip(b"\r\n")
        if number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        try:
            yield f"stdin line {number}", raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield f"stdin line {number}", Failure(raw.decode("utf-8", "replace"),
                                                  f"not valid UTF-8 (byte {exc.start + 1}: {raw[exc.start:exc.start + 1]!r})")


def print_result(result, classifier, args: argparse.Namespace) -> None:
    if args.json:
        record = result.to_json()
        if args.explain:
            record["explanation"] = [f"answered by {result.source}"] + classifier.explain(result.query, args.k)
        print(json_line(record))
        return
    print(f"{result.query}  [{result.backend}: {result.source}]")
    if args.explain:
        for line in classifier.explain(result.query, args.k):
            print(f"  # {line}")
    for rank, category in enumerate(result.categories, start=1):
        print(f"  {rank:>2}. {category.score:.3f}  {category.id:<10} {category.path}")
    if not result.categories and getattr(args, "min_score", None) is not None:
        print(f"      (no category scores at least {args.min_score:g})")
    if result.precision is not None:
        node = result.node
        print(f"  node at precision {result.precision:g}: " + (
            f"{node.probability:.3f}  {node.id:<10} {node.path}  (depth {node.depth}{', a leaf' if node.leaf else ''})"
            if node is not None else f"none ({result.node_why})"))


def run_serve(args: argparse.Namespace) -> int:
    from qcat.serve.config import ServeConfig
    from qcat.serve.runner import serve

    return serve(ServeConfig(
        model=args.model, backend=args.backend, cutoff=args.cutoff, overrides=not args.no_overrides, host=args.host,
        port=args.port, workers=args.workers, max_batch=args.max_batch, max_query_length=args.max_query_length,
        max_body_bytes=args.max_body_bytes, timeout_s=args.timeout, max_k=args.max_k, default_k=args.default_k,
        micro_batch=not args.no_micro_batch, access_log=not args.no_access_log, drain_s=args.drain,
        keep_alive_s=args.keep_alive, max_connections=args.max_connections))

