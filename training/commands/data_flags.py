"""The data flags of ``qcat train`` (``--corpus``/``--log``/``--catalog`` and their settings) and
the data they name: checked, read, recorded, and trained on (with a catalog, once per catalog
setting). Commands that combine bundles fill the flags from the bundles' record."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qcat.cli import float_at_least, int_at_least, positive_float
from qcat.errors import InputError
from qcat.inputs.paths import check_file
from qcat.training.clicklogs.clicklog import INTERNAL_NODE_RULES


def add_data_flags(parser: argparse.ArgumentParser, out_help: str = "model bundle directory to write",
                   out_default: Path | None = None, confusable: bool = True) -> None:
    """The data flags; ``confusable``: also ``--confusable FILE``, the map a trained bundle records."""
    source = parser.add_argument_group("data (default: the demo corpus, base period)")
    source.add_argument("--corpus", type=Path, default=None, help="corpus directory with corpus.json")
    source.add_argument("--period", choices=("base", "candidate", "all"), default=None,
                        help="period of the corpus (default base)")
    source.add_argument("--log", type=Path, default=None, help="a click log instead of a corpus (needs --taxonomy)")
    source.add_argument("--taxonomy", type=Path, default=None)
    source.add_argument("--min-clicks", type=float_at_least(0), default=None,
                        help="drop (query, category) pairs with fewer clicks (default 3; 1 for logs of single clicks)")
    source.add_argument("--split-seed", dest="split_seed", type=int_at_least(0), default=None,
                        help="split seed for --log (train/validation/test by query; default 0)")
    source.add_argument("--internal-nodes", choices=INTERNAL_NODE_RULES, default=None,
                        help="rows naming a non-leaf category: other (default) counts them for an explicit Other leaf "
                        "under the node, refuse stops with their counts, keep trains on the node itself (the model "
                        "may then answer it)")
    catalog = parser.add_argument_group("catalog (listings as a second training source; docs: guide/catalog.md)")
    catalog.add_argument("--catalog", type=Path, default=None, metavar="FILE",
                         help="listings (listing_id, title, category or category_path[, brand, popularity]; CSV, TSV, "
                              "Parquet or JSONL) whose titles and short forms join the training split")
    catalog.add_argument("--catalog-only", action="store_true",
                         help="train on the catalog alone (cold start), also with a corpus (its real-text sets still "
                              "validate); without --corpus or --log give --taxonomy")
    catalog.add_argument("--title-weight", type=positive_float(), default=None,
                         help="clicks one listing's title counts for (default: chosen from 1, 3, 10)")
    catalog.add_argument("--short-weight", type=float_at_least(0), default=None,
                         help="clicks each short form of a title counts for, 0 = none (default: chosen from 0, 1, 3)")
    catalog.add_argument("--short-forms", type=rule_list, default=None, metavar="RULES",
                         help="comma-separated short-form rules from lead2, lead3, nobrand, brandnoun, catgram, or all "
                              "(default: chosen, starting from all)")
    if confusable:
        parser.add_argument("--confusable", type=Path, default=None, metavar="FILE",
                            help="a confusable map (`qcat data audit` writes one) to record in the bundle: qcat evaluate "
                                 "then reports lenient top-1 with it")
    parser.add_argument("--out", type=Path, required=out_default is None, default=out_default,
                        help=out_help + ("" if out_default is None else f" (default ./{out_default})"))


def record_confusable(args: argparse.Namespace, model, taxonomy) -> None:
    """Record ``--confusable FILE`` (checked against ``taxonomy``) in the model's config."""
    from qcat.taxonomy.confusable import CONFIG_KEY, load_confusable

    if getattr(args, "confusable", None) is not None:
        model.config[CONFIG_KEY] = load_confusable(args.confusable, taxonomy).to_config()


def rule_list(text: str) -> tuple[str, ...]:
    """``--short-forms``: an argparse ``type``."""
    from qcat.training.catalog.short_forms import parse_rules

    try:
        return parse_rules(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def data_from_args(args: argparse.Namespace):
    """The corpus or click log the data flags name (checked, not yet read) and its ``data``
    block (:mod:`qcat.training.data.provenance`)."""
    if args.catalog is not None:
        if args.catalog.is_dir():
            raise InputError(f"--catalog {args.catalog}: is a directory; give the catalog file (CSV, TSV, Parquet or "
                             f"JSONL)")
        check_file(args.catalog, "--catalog")
    if getattr(args, "confusable", None) is not None:  # a bad map fails now, not after training
        from qcat.taxonomy.confusable import load_confusable

        load_confusable(args.confusable)
    data = _base_data(args)
    if args.catalog is None:
        for flag, value in (("--catalog-only", args.catalog_only), ("--title-weight", args.title_weight),
                            ("--short-weight", args.short_weight), ("--short-forms", args.short_forms)):
            if value not in (None, False):
                raise InputError(f"{flag} is for --catalog FILE")
        return data
    check_short_forms(args.short_forms, args.short_weight)
    return _catalog_data(args, data)


def check_short_forms(rules: tuple[str, ...] | None, weight: float | None) -> None:
    """Refuse short-form flags that contradict each other: a weight for short forms that no rule
    makes, or rules whose forms weigh nothing."""
    if rules == () and weight:
        raise InputError(f"--short-forms none makes no short forms, so --short-weight {weight:g} would weigh nothing: "
                         f"give rules (e.g. --short-forms all) or drop --short-weight")
    if rules and weight == 0:
        raise InputError(f"--short-weight 0 leaves out every short form, so --short-forms {','.join(rules)} would do "
                         f"nothing: give a weight above 0 or --short-forms none")


def _catalog_data(args: argparse.Namespace, data):
    """``data`` (a corpus or log and its ``data`` block, or None) with the catalog (checked, not yet read)."""
    from qcat.training.catalog.data import CatalogData
    from qcat.training.data.corpus import LogCorpus
    from qcat.training.data.provenance import catalog_source, file_source

    if data is None:
        if args.taxonomy is None:
            raise InputError("--catalog without --log or --corpus (cold start) needs --taxonomy")
        check_file(args.taxonomy, "--taxonomy")
        args.catalog_only = True
        catalog = CatalogData(args.catalog, None, args.taxonomy, True, args.split_seed or 0,
                              args.internal_nodes or "other", None)
        source = file_source("taxonomy", args.taxonomy) | {"split_seed": catalog.split_seed,
                                                           "internal_nodes": catalog.internal_nodes}
    else:
        base, source = data
        if args.catalog_only and isinstance(base, LogCorpus):
            raise InputError("--catalog-only trains without the log: drop --log (give --taxonomy)")
        is_log = isinstance(base, LogCorpus)
        catalog = CatalogData(args.catalog, base, None, args.catalog_only,
                              base.split_seed if is_log else base.meta.get("split_seed", 0), base.internal_nodes,
                              None if is_log else args.period)
        source = dict(source)
    return catalog, source | catalog_source(args.catalog, catalog.base, catalog.catalog_only)


def _base_data(args: argparse.Namespace):
    """The corpus or click log of the data flags and its ``data`` block; None for a catalog
    alone (``--catalog`` and ``--taxonomy`` without ``--corpus`` or ``--log``)."""
    from qcat.training.data.corpus import Corpus, LogCorpus
    from qcat.training.data.provenance import corpus_source, log_source

    if args.catalog is not None and args.log is None and args.corpus is None and args.taxonomy is not None:
        if args.period is not None:
            raise InputError(f"--period {args.period} is for a corpus; a catalog alone is one period")
        return None
    if args.catalog is not None and args.log is None and args.corpus is None and not _is_demo_catalog(args.catalog):
        raise InputError(f"--catalog {args.catalog} needs --taxonomy, the taxonomy its categories name (or --log/--corpus "
                         f"with theirs); without it qcat would read it against the demo corpus's taxonomy")
    if args.log is not None:
        if args.taxonomy is None:
            raise InputError("--log needs --taxonomy")
        if args.corpus is not None:
            raise InputError("give --corpus or --log, not both")
        if args.period is not None:
            raise InputError(f"--period {args.period} is for a corpus; a click log (--log) is one period: "
                             f"select dates with qcat data ingest --date-from/--date-to")
        check_file(args.log, "--log")
        from qcat.training.clicklogs.ingest_duckdb import memory_limit

        memory_limit()  # a bad $QCAT_DUCKDB_MEMORY_LIMIT fails before any work
        check_file(args.taxonomy, "--taxonomy")
        log = LogCorpus(args.log, args.taxonomy, 3 if args.min_clicks is None else args.min_clicks,
                        args.split_seed or 0, args.internal_nodes or "other")
        return log, log_source(log)
    for flag, value in (("--min-clicks", args.min_clicks), ("--split-seed", args.split_seed),
                        ("--taxonomy", args.taxonomy), ("--internal-nodes", args.internal_nodes)):
        if value is not None:
            raise InputError(f"{flag} is for --log; a corpus sets its own in corpus.json")
    corpus = Corpus.open(args.corpus)
    args.period = args.period or "base"
    return corpus, corpus_source(corpus, args.period)


def _is_demo_catalog(path: Path) -> bool:
    """Whether ``path`` is the demo corpus's own catalog file (which trains with the demo corpus)."""
    from qcat.training.data.corpus import Corpus

    try:
        return path.resolve() == Corpus.open(None).path("catalog").resolve()
    except (InputError, OSError):
        return False


def load_dataset(args: argparse.Namespace, data=None):
    """The training data, where it came from (the ``data`` block every bundle records) and the
    validation sets model choices are made on (:func:`qcat.training.selection.objective.validation_sets`: a
    corpus's real-text sets count too). ``data``: :func:`data_from_args`'s answer, if known."""
    from qcat.training.catalog.data import CatalogData
    from qcat.training.data.corpus import LogCorpus
    from qcat.training.selection.objective import validation_sets

    corpus, source = data or data_from_args(args)
    if isinstance(corpus, CatalogData):
        if isinstance(corpus.base, LogCorpus):
            _print_log_report(args, corpus.base)
        dataset, counts = corpus.dataset(fixed_settings(args))
        print(corpus.prepare()[1].format())
        return dataset, source, validation_sets(dataset, corpus)
    if isinstance(corpus, LogCorpus):
        dataset = _print_log_report(args, corpus)
    else:
        dataset = corpus.dataset(args.period)
    return dataset, source, validation_sets(dataset, corpus)


def _print_log_report(args: argparse.Namespace, corpus):
    """Print a click log's ingestion report; refuse a log that leaves nothing; warn when it is small."""
    report = corpus.ingest().report
    print(report.format())
    if report.nothing_kept():
        raise InputError(f"{args.log}: {report.nothing_kept()}; nothing to train on")
    dataset = corpus.dataset()
    warn_if_small(dataset, report)
    return dataset


def fixed_settings(args: argparse.Namespace):
    """The catalog settings the flags give, defaults for the others (for a single dataset)."""
    from qcat.training.catalog.source import CatalogSettings

    fixed = {k: v for k, v in catalog_flags(args).items() if v is not None}
    return CatalogSettings(**fixed)


def catalog_flags(args: argparse.Namespace) -> dict:
    return {"title_weight": args.title_weight, "short_weight": args.short_weight, "rules": args.short_forms}


def fit_on_data(args: argparse.Namespace, data, fit_one, name: str):
    """Train with ``fit_one(dataset, sets) -> model`` on the data flags' data: once, or with a
    catalog once per catalog setting (:func:`qcat.training.catalog.source.choose`), keeping the best
    on the validation objective. Returns the model, its dataset, ``data`` block and sets."""
    from qcat.training.catalog.data import CatalogData

    dataset, source, sets = load_dataset(args, data)
    if not isinstance(data[0], CatalogData):
        return fit_one(dataset, sets), dataset, source, sets
    print_objective(sets)
    model, dataset, record = data[0].fit(fit_one, sets, catalog_flags(args), name)
    return model, dataset, source | {"catalog_training": record}, sets


def data_args_from(args: argparse.Namespace, recorded: dict, where: Path) -> None:
    """Fill the data flags a user left out from a bundle's ``data`` block, so that a command
    that combines bundles reads the data they were trained on, never a default corpus."""
    from qcat.training.data.provenance import check_file_unchanged

    if args.catalog is None and "catalog" in recorded and recorded["catalog"] != "corpus":
        check_file_unchanged(recorded, "catalog", where)
        args.catalog = Path(recorded["catalog"])
    if "catalog" in recorded:
        args.catalog_only = args.catalog_only or bool(recorded.get("catalog_only"))
    if args.log is None and args.corpus is None:
        if "catalog" in recorded and "log_sha256" not in recorded:  # a catalog alone (cold start)
            check_file_unchanged(recorded, "taxonomy", where)
            args.taxonomy = args.taxonomy or Path(recorded["taxonomy"])
            args.split_seed = recorded.get("split_seed") if args.split_seed is None else args.split_seed
            args.internal_nodes = recorded.get("internal_nodes") if args.internal_nodes is None else args.internal_nodes
        elif "log" in recorded:
            for kind in ("log", "taxonomy"):
                if kind in recorded:
                    check_file_unchanged(recorded, kind, where)
            args.log = Path(recorded["log"])
            args.taxonomy = args.taxonomy or (Path(recorded["taxonomy"]) if "taxonomy" in recorded else None)
            if args.taxonomy is None:
                raise InputError(f"{where} was trained on --log {recorded['log']} but records no taxonomy file: "
                                 f"give --log and --taxonomy")
        elif "corpus" in recorded:
            args.corpus = None if recorded["corpus"] == "demo" else Path(recorded["corpus"])
        else:
            raise InputError(f"{where} records no training data (a bundle from before qcat recorded it): "
                             f"give --log and --taxonomy, or --corpus")
    if args.log is not None:
        args.min_clicks = recorded.get("min_clicks") if args.min_clicks is None else args.min_clicks
        args.split_seed = recorded.get("split_seed") if args.split_seed is None else args.split_seed
        args.internal_nodes = recorded.get("internal_nodes") if args.internal_nodes is None else args.internal_nodes
    elif args.period is None:
        args.period = recorded.get("period")
    if args.catalog is None and recorded.get("catalog") == "corpus":  # the corpus's own catalog file
        from qcat.training.data.corpus import Corpus

        args.catalog = Corpus.open(args.corpus).path("catalog")


MIN_SPLIT_QUERIES = 50  # fewer validation or test queries than this cannot choose or measure a model


def warn_if_small(dataset, report) -> None:
    """Say, with the count at each step, when a log leaves too little to train or evaluate on."""
    sizes = {name: len(dataset.part(name).queries) for name in ("train", "validation", "test")}
    if min(sizes["validation"], sizes["test"]) >= MIN_SPLIT_QUERIES:
        return
    print(f"warning: too little data to train or evaluate reliably: {report.rows_used:,} usable rows -> "
          f"{report.pairs_aggregated:,} (query, category) pairs -> {report.pairs_kept:,} pairs of "
          f"{report.queries_kept:,} queries with at least {report.min_clicks:g} clicks -> "
          f"{sizes['train']:,} train / {sizes['validation']:,} validation / {sizes['test']:,} test queries "
          f"(under {MIN_SPLIT_QUERIES} in a split)", file=sys.stderr)
    if report.pairs_below_min_clicks > report.pairs_kept:
        print(f"warning: --min-clicks {report.min_clicks:g} dropped {report.pairs_below_min_clicks:,} of "
              f"{report.pairs_aggregated:,} pairs; for a click log of single clicks without aggregated counts "
              f"(one row per click), try --min-clicks 1", file=sys.stderr)


def print_objective(sets) -> None:
    print("validation objective: " + ", ".join(f"{weight:.2f} x PR@1 {name} ({len(table.queries):,} queries)"
                                               for name, (table, weight) in sets.items()))


def real_text_line(model, sets) -> str | None:
    """PR@1 on each validation set, the data's own split beside the real-text sets a corpus has (the
    demo's held-out titles and two-token queries), for every training summary: the simulated split
    can rise with the catalog while real text stays flat. None where the data has no real-text set."""
    from qcat.training.selection.objective import objective

    if len(sets) < 2:
        return None
    per_set = objective(model, sets)[1]
    own, *real = sets
    return (f"validation PR@1: {own} {per_set[own]:.4f}; real text " +
            ", ".join(f"{name} {per_set[name]:.4f}" for name in real) + " (text the simulator never saw)")
