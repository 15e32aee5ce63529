"""``qcat evaluate``: score model bundles on a corpus split and write the report."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from qcat.cli import ArgumentParser, float_at_least, float_in, int_at_least, positive_float
from qcat.errors import InputError
from qcat.evaluation.report_files import clean_json

DEFAULT_OUT = Path("qcat-report")


def build_parser(command: str = "") -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="qcat evaluate",
        description="Score model bundles on a corpus split; write report.md, report.html and report.json.",
    )
    parser.add_argument("--model", type=Path, action="append", required=True, metavar="DIR",
                        help="model bundle (repeat to compare; deltas are against the first)")
    parser.add_argument("--name", action="append", default=None, metavar="NAME",
                        help="display name of each --model, in order (default: the directory name)")
    data = parser.add_argument_group("data (default: the demo corpus)")
    data.add_argument("--corpus", type=Path, default=None, help="corpus directory with corpus.json")
    data.add_argument("--log", type=Path, default=None,
                      help="your click log instead of a corpus (with --taxonomy): evaluated on the test queries "
                           "of the same seeded split that `qcat train --log` trains on")
    data.add_argument("--taxonomy", type=Path, default=None, help="the taxonomy of --log")
    data.add_argument("--min-clicks", type=float_at_least(0), default=None,
                      help="as for `qcat train --log` (default: what the models were trained on this log with, else 3)")
    data.add_argument("--split-seed", type=int_at_least(0), default=None,
                      help="as for `qcat train --log` (default: what the models were trained on this log with, else 0)")
    data.add_argument("--internal-nodes", choices=("other", "refuse", "keep"), default=None,
                      help="as for `qcat train --log` (default: what the models were trained on this log with, else other)")
    parser.add_argument("--period", choices=("base", "candidate", "all"), default="base")
    parser.add_argument("--split", choices=("train", "validation", "test"), default="test")
    parser.add_argument("--query-set", dest="query_sets", action="append", default=None, metavar="SET",
                        choices=("simulated", "real-title", "real-2tok", "real-queries"),
                        help="query set to report (repeat; default: every set the corpus has): simulated "
                             "(the click log's split by head/torso/tail), real-title, real-2tok, real-queries")
    parser.add_argument("--confusable", type=Path, default=None, metavar="FILE",
                        help="confusable leaves (two leaf ids a line, tab-separated: `qcat data audit` writes one) that "
                             "lenient top-1 credits; default: the map the bundle recorded, else the one the corpus ships")
    judged = parser.add_argument_group("human-judged categories (docs: guide/evaluating.md#human-judged-categories)")
    judged.add_argument("--gold", type=Path, default=None, metavar="FILE",
                        help="a graded gold file (tab-separated query, category, grade 0-3[, segment]; `qcat judge "
                             "export --gold` writes one): also score each model's top k on its queries against "
                             "people's grades (judged exact and acceptable top-1, severe, precision@k, the share of "
                             "top-1 answers nobody judged, with 95%% bootstrap intervals), printed and reported "
                             "beside the click-based figures")
    judged.add_argument("--gold-k", type=int_at_least(1, 100), default=None, metavar="K",
                        help="how many answers per query to take and score for --gold's precision@k (default: the "
                             "file's `# top_k` line, the k its judges saw, else 5)")
    judged.add_argument("--precision", type=float_in(0, 1, low_open=True, high_open=True), default=None, metavar="P",
                        help="with --gold: score each model's node answers at precision P (0 < P < 1) against the "
                             "file's grades: people's acceptable rate of the graded nodes, the share of queries with "
                             "no node, the nodes nobody graded counted apart (default: the file's `# precision` line, "
                             "the P its session showed judges; neither: no node figures). A model without a node "
                             "calibration has none")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"report directory (default: ./{DEFAULT_OUT})")
    parser.add_argument("--json", action="store_true", help="also print the report JSON on stdout")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="score a category needs to count as predicted for P, R and F1 (default 0.5)")
    parser.add_argument("-k", type=int_at_least(1), default=5, help="k of nDCG, PSP, PSnDCG, coverage and XReg metrics (default 5)")
    propensity = parser.add_mutually_exclusive_group()
    propensity.add_argument("--fit-propensity", action="store_true",
                            help="fit the propensity model's A and B on the corpus instead of A=0.55, B=1.5")
    propensity.add_argument("--propensity", type=positive_float(), nargs=2, metavar=("A", "B"), default=None,
                            help="propensity model parameters")
    return parser


def main(command: str, argv: list[str]) -> int:
    args = build_parser(command).parse_args(argv)
    from qcat.evaluation.evaluate import evaluate
    from qcat.evaluation.propensity import PropensityModel
    from qcat.evaluation.scoring import ScoringOptions

    if not 0 <= args.threshold <= 1:
        raise InputError(f"--threshold must lie in [0, 1], got {args.threshold}")
    if not 1 <= args.k <= 10:
        raise InputError(f"-k must lie in 1..10 (models are asked for their top 10), got {args.k}")
    if args.log is not None and args.corpus is not None:
        raise InputError("give --corpus or --log, not both")
    if (args.log is None) != (args.taxonomy is None):
        raise InputError("--log and --taxonomy go together: a click log and the taxonomy its categories come from")
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} is a file; give a directory for the report")
    if args.gold_k is not None and args.gold is None:
        raise InputError("--gold-k is the k of --gold FILE: give the graded gold file too")
    if args.precision is not None and args.gold is None:
        raise InputError("--precision scores node answers against --gold FILE's grades: give the graded gold file too")
    gold = None
    if args.gold is not None:
        from qcat.measure.graded_gold import read_graded_gold

        gold = read_graded_gold(args.gold, "--gold")  # a bad file fails before any model or data is read
        from qcat.evaluation.gold import sample_warning

        if (warning := sample_warning(gold)) is not None:
            print(warning, file=sys.stderr)
        check_node_precision(args.model, args.precision, gold)
    data = args.corpus
    if args.log is not None:
        from qcat.inputs.paths import check_file
        from qcat.training.data.corpus import LogCorpus
        from qcat.training.data.provenance import log_settings

        check_file(args.log, "--log")
        settings = log_settings(args.log, args.model, {"min_clicks": args.min_clicks, "split_seed": args.split_seed,
                                                       "internal_nodes": args.internal_nodes})
        data = LogCorpus(args.log, args.taxonomy, **settings)
    elif args.min_clicks is not None or args.split_seed is not None or args.internal_nodes is not None:
        raise InputError("--min-clicks, --split-seed and --internal-nodes are for --log; a corpus sets its own in "
                         "corpus.json")
    propensity = None
    if args.propensity:
        a, b = args.propensity
        if not (a > 0 and b > 0):
            raise InputError(f"--propensity needs A > 0 and B > 0, got {a:g} {b:g}")
        propensity = PropensityModel(a, b)
    started = time.perf_counter()
    report = evaluate(
        args.model, args.name, data, args.period, args.split,
        ScoringOptions(threshold=args.threshold, k=args.k), fit=args.fit_propensity, propensity=propensity,
        query_sets=args.query_sets,
        progress=lambda message: print(message, file=sys.stderr), confusable=args.confusable,
        gold=gold, gold_k=args.gold_k,
    )
    if gold is not None:
        add_gold_nodes(report, gold, args.precision)
        print_gold(report, sys.stderr if args.json else sys.stdout)  # stdout stays one JSON document with --json
    written = write_report(report, args.out)
    print(f"wrote {', '.join(str(p) for p in written)} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    if args.json:
        print(json.dumps(clean_json(report), indent=2))
    return 0


def write_report(report: dict, out: Path) -> list[Path]:
    """Write report.json, report.md (with plots/*.svg) and a self-contained report.html."""
    from qcat.evaluation.html import render_html
    from qcat.evaluation.plots import draw_all
    from qcat.evaluation.report import render_markdown
    from qcat.evaluation.report_files import write_report_files

    return write_report_files(report, out, draw_all(report), render_markdown, render_html)


def print_gold(report: dict, stream) -> None:
    """One line per model of its human-judged figures on all the gold's queries, then one per
    model after the first against the first; with node answers (``gold_nodes``), each model's
    line of them after its own."""
    from qcat.evaluation.gold import UNSEEN, gold_line, node_line, paired_line

    models = report["models"]
    precision = report["gold"].get("precision")
    for model in models:
        print(gold_line(model["name"], model["gold"]["all"], report["gold"]), file=stream)
        if UNSEEN in model["gold"]:
            print(gold_line(f"{model['name']} on unseen queries", model["gold"][UNSEEN], report["gold"]), file=stream)
        if precision is not None:
            nodes = model.get("gold_nodes")
            print(node_line(model["name"], nodes and nodes["all"], model["gold"]["all"]["acceptable"], precision,
                            report["gold"]["source"]), file=stream)
    for model in models[1:]:
        on_unseen = UNSEEN in model["gold_paired"]
        print(paired_line(model["name"] + (" on unseen queries" if on_unseen else ""), models[0]["name"],
                          model["gold_paired"][UNSEEN if on_unseen else "all"]), file=stream)


def check_node_precision(model_dirs: list[Path], given: float | None, gold) -> None:
    """Before any work: ``--precision`` for models none of which has a node calibration is refused,
    in one line; a ``--precision`` other than the one the file's nodes were shown at is warned of."""
    from qcat.bundles.bundle import read_manifest
    from qcat.models.calibration.nodes import NODES_FILE, no_node_calibration

    if given is None:
        return
    if not any(NODES_FILE in read_manifest(d, verify=False).data["files"] for d in model_dirs):
        raise InputError(no_node_calibration(model_dirs[0]))
    shown = gold.precision()
    if shown is not None and abs(shown - given) > 1e-9:
        print(f"warning: --precision {given:g}, but {gold.source}'s judges saw node answers at precision {shown:g}: "
              "nodes at another precision may not have been graded (they are counted as ungraded)", file=sys.stderr)


def add_gold_nodes(report: dict, gold, given: float | None) -> None:
    """Each model's node answers on the gold's queries (``gold_nodes``; None without a node
    calibration) at ``--precision``, else the file's ``# precision``; nothing when neither."""
    from qcat.evaluation.gold import gold_precision, score_gold_nodes

    precision, origin = gold_precision(gold, given)
    if precision is None:
        return
    report["gold"] |= {"precision": precision, "precision_from": origin}
    for model in report["models"]:
        model["gold_nodes"] = score_gold_nodes(model["directory"], gold, precision)
