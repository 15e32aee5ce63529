"""``qcat judge create-session|sessions|release|add-gold|report|export``: a session from engines or
result files, its claims, gold questions, report and exports."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from qcat.judging.commands.common import display_url, existing_session, say
from qcat.judging.store.connection import resolve_url


def run_create(args: argparse.Namespace) -> int:
    from qcat.errors import InputError
    from qcat.judging.grading.sessions import (
        SEGMENTS,
        build_queries,
        check_session_name_free,
        default_name,
        judge_facing_name,
        store_session,
    )
    from qcat.judging.store.connection import open_store

    if args.queries is not None and args.queries < len(SEGMENTS):
        raise InputError(f"--queries must be at least {len(SEGMENTS)} (one per segment), got {args.queries}")
    if args.judges_per_query < 1:
        raise InputError(f"--judges-per-query must be at least 1, got {args.judges_per_query}")
    if args.kind == "categories":
        return create_categories(args)
    for flag, used in (("--model", args.model is not None), ("--traffic", args.traffic is not None),
                       ("--top-k", args.top_k != 3), ("--log", args.log is not None),
                       ("--include-training-queries", args.include_training_queries),
                       ("--taxonomy", args.taxonomy is not None), ("--select", args.select is not None),
                       ("--exclude-gold", args.exclude_gold is not None), ("--precision", args.precision is not None)):
        if used:
            raise InputError(f"{flag} applies to --kind categories only (a result session compares --baseline and "
                             "--target, or --results files)")
    if args.results is not None and (args.baseline is not None or args.target is not None):
        raise InputError("give either --results files or --baseline and --target model bundles, not both")
    if args.results is None and (args.baseline is None or args.target is None):
        raise InputError("say what to compare: --baseline MODEL --target MODEL (qcat's search), or "
                         "--results BASELINE_FILE --results TARGET_FILE (any search system's result lists)")
    search_flags = [flag for flag, used in (("--corpus", args.corpus is not None), ("--period", args.period != "base"),
                                            ("--mode", args.mode != "boost"), ("--boost-weight", args.boost_weight != 1.0),
                                            ("--categories", args.categories != 3)) if used]
    if args.results is not None and search_flags:
        raise InputError(f"{', '.join(search_flags)} set{'s' * (len(search_flags) == 1)} qcat's own search, which "
                         "--results does not run: leave it out")
    for flag, value in (("--default-segment", args.default_segment), ("--topics", args.topics),
                        ("--listings", args.listings)):
        if args.results is None and value is not None:
            raise InputError(f"{flag} applies to --results files only")
    guidelines = read_guidelines(args.guidelines) if args.guidelines is not None else None
    store = open_store(args.url)  # fail early when the database is not ready
    if args.results is not None:
        return create_from_results(args, store, guidelines)
    from qcat.bundles.bundle import read_manifest
    from qcat.evaluation.golden.search import SearchConfig

    for model in (args.baseline, args.target):
        read_manifest(model)  # a missing or tampered bundle fails before the queries are searched
    name = args.name if args.name is not None else default_name(str(args.baseline), str(args.target))
    check_session_name_free(store, name, args.display_name)
    config = SearchConfig(top_n=5, mode=args.mode, boost_weight=args.boost_weight, categories=args.categories)
    built = build_queries(args.baseline, args.target, args.queries or 4500, args.corpus, args.period, args.seed, config,
                          say, differing_top=args.differing_only)
    if not built.queries and args.differing_only is not None:
        raise InputError(f"no query left to judge: every query searched showed the same top {args.differing_only} "
                         f"listings with both models ({sum(built.stats['identical_skipped'].values()):,} queries)")
    if guidelines is not None:
        built.stats["guidelines"] = guidelines
    session_id = store_session(store, name, str(args.baseline), str(args.target), built.queries,
                               judges_per_query=args.judges_per_query, seed=args.seed,
                               corpus=built.stats["corpus"], settings=built.stats, display_name=args.display_name)
    store.dispose()
    say(f"session {session_id} {name!r} (judges see {judge_facing_name(session_id, args.display_name)!r}): "
        f"{len(built.queries):,} queries, baseline/target placed left/right at random" + _identical_note(built.stats))
    print(session_id)
    return 0


def create_categories(args: argparse.Namespace) -> int:
    """``create-session --kind categories``: one or two models' top categories for sampled queries."""
    from qcat.bundles.bundle import read_manifest
    from qcat.errors import InputError
    from qcat.judging.grading.categories import build_category_queries
    from qcat.judging.grading.selection.exclusions import never_ask
    from qcat.judging.grading.selection.rank import check_selection
    from qcat.judging.grading.sessions import check_session_name_free, default_name, judge_facing_name, store_session
    from qcat.judging.store.connection import open_store

    for flag, used in (("--baseline", args.baseline is not None), ("--target", args.target is not None),
                       ("--results", args.results is not None), ("--topics", args.topics is not None),
                       ("--listings", args.listings is not None), ("--differing-only", args.differing_only is not None),
                       ("--mode", args.mode != "boost"), ("--boost-weight", args.boost_weight != 1.0),
                       ("--categories", args.categories != 3)):
        if used:
            raise InputError(f"{flag} applies to result sessions; a category session names its models with --model "
                             "(once or twice)")
    if not args.model or len(args.model) > 2:
        raise InputError("--kind categories judges one or two models: give --model MODEL once or twice "
                         f"(got {len(args.model or [])})")
    if len(args.model) == 2 and args.model[0].resolve() == args.model[1].resolve():
        raise InputError(f"--model {args.model[0]} is given twice: compare two different models, or give one")
    if args.traffic is not None and args.period != "base":
        raise InputError("--period chooses the click log's queries, which --traffic replaces: leave it out")
    if args.traffic is not None and args.include_training_queries:
        raise InputError("--include-training-queries applies to queries drawn from a click log (--log, --corpus); a "
                         "--traffic file is judged as given (the report says how many of its queries each model "
                         "trained on)")
    if args.traffic is None and args.default_segment is not None:
        raise InputError("--default-segment applies to --traffic files (and --results) only")
    if (args.log is None) != (args.taxonomy is None):
        raise InputError("--log and --taxonomy go together: the click log to draw the queries from, and its taxonomy")
    if args.log is not None and (args.traffic is not None or args.corpus is not None or args.period != "base"):
        raise InputError("--log draws the queries from your click log (the whole of it): leave out "
                         + ("--traffic" if args.traffic is not None else "--corpus" if args.corpus is not None
                            else "--period"))
    check_selection(args.select, args.queries, len(args.model))
    source = args.corpus
    if args.log is not None:
        from qcat.training.data.corpus import LogCorpus

        source = LogCorpus(args.log, args.taxonomy, min_clicks=1)
    guidelines = read_guidelines(args.guidelines) if args.guidelines is not None else None
    store = open_store(args.url)  # fail early when the database is not ready
    for model in args.model:
        read_manifest(model)  # a missing or tampered bundle fails before any work
    if args.precision is not None:
        from qcat.judging.grading.nodes import check_node_calibrations

        check_node_calibrations(args.model)  # a model that cannot answer a node is refused in one line
    baseline, target = str(args.model[0]), str(args.model[1]) if len(args.model) == 2 else ""
    name = args.name if args.name is not None else default_name(baseline, target)
    check_session_name_free(store, name, args.display_name)
    never = never_ask(store, args.exclude_gold or (), judged=args.select is not None)
    built = build_category_queries(args.model, args.top_k, args.queries if args.traffic is not None else
                                   (args.queries or 4500), source, args.period, args.seed, args.traffic,
                                   args.default_segment, say, args.include_training_queries, args.select, never,
                                   args.precision)
    if guidelines is not None:
        built.stats["guidelines"] = guidelines
    session_id = store_session(store, name, baseline, target, built.queries, judges_per_query=args.judges_per_query,
                               seed=args.seed, corpus=built.stats.get("corpus", ""), settings=built.stats,
                               display_name=args.display_name, kind="categories")
    store.dispose()
    say(f"session {session_id} {name!r} (judges see {judge_facing_name(session_id, args.display_name)!r}): "
        f"{len(built.queries):,} queries, each with " + (f"the union of both models' top {args.top_k} categories"
                                                         if target else f"the model's top {args.top_k} categories")
        + (f" and {'each' if target else 'its'} node answer at precision {args.precision:g}" if args.precision else "")
        + ", in an order drawn per judge")
    print(session_id)
    return 0


MAX_GUIDELINES = 100_000


def read_guidelines(path: Path) -> str:
    """The session's Markdown guidelines, checked: a readable UTF-8 file, not empty, not huge."""
    from qcat.errors import InputError
    from qcat.inputs import read_bytes

    _, raw, _ = read_bytes(path, "--guidelines")  # the input layer's path and byte order mark rules
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"--guidelines {path}: cannot read it as UTF-8 text ({exc.__class__.__name__})") from None
    if not text.strip():
        raise InputError(f"--guidelines {path} is empty: write the guidelines judges should read")
    if len(text) > MAX_GUIDELINES:
        raise InputError(f"--guidelines {path} has {len(text):,} characters, more than {MAX_GUIDELINES:,}: shorten it")
    return text


def _identical_note(stats: dict) -> str:
    skipped = stats.get("identical_skipped")
    if skipped is None:
        return ""
    n = sum(skipped.values())
    return (f"; {n:,} quer{'y' if n == 1 else 'ies'} with the same top {stats['differing_top']} in both systems left "
            "out (ties in the report, no graders)")


def create_from_results(args: argparse.Namespace, store, guidelines: str | None) -> int:
    """``create-session --results``: a session from two systems' result lists (qcat.judging.grading.imports)."""
    from qcat.judging.grading.imports import read_listings, read_results, read_topics, report_bad_rows
    from qcat.judging.grading.sessions import check_session_name_free, judge_facing_name, select_imported, store_session

    topics = read_topics(args.topics) if args.topics is not None else None
    listings = read_listings(args.listings) if args.listings is not None else None
    imported = read_results(args.results, args.default_segment, topics, listings)
    report_bad_rows(imported, say)
    baseline, target = imported.systems
    name = args.name if args.name is not None else f"{baseline} vs {target}"
    check_session_name_free(store, name, args.display_name)
    built = select_imported(imported.queries, args.queries, args.seed, args.differing_only)
    built.stats.update(results=[str(path) for path in args.results], rows=imported.rows,
                       bad_rows=len(imported.bad_rows), beyond_top=imported.beyond_top)
    if guidelines is not None:
        built.stats["guidelines"] = guidelines
    session_id = store_session(store, name, baseline, target, built.queries, judges_per_query=args.judges_per_query,
                               seed=args.seed, corpus="", settings=built.stats, display_name=args.display_name)
    store.dispose()
    say(f"read {imported.rows:,} rows of {len(imported.queries):,} queries from {', '.join(map(str, args.results))}" +
        (f"; {len(imported.bad_rows):,} rows could not be used (listed above)" if imported.bad_rows else "") +
        (f"; {imported.beyond_top:,} listings ranked below the top 5 are not shown" if imported.beyond_top else ""))
    say(f"session {session_id} {name!r} (judges see {judge_facing_name(session_id, args.display_name)!r}): "
        f"{len(built.queries):,} queries, baseline {baseline!r} and target {target!r} placed left/right at random"
        + _identical_note(built.stats))
    print(session_id)
    return 0


def run_guidelines(args: argparse.Namespace) -> int:
    from qcat.judging.pages import standard_guidelines

    print(standard_guidelines(args.kind), end="")
    return 0


def run_sessions(args: argparse.Namespace) -> int:
    from qcat.judging.grading.sessions import session_overview
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    rows = session_overview(store)
    if not rows:
        say(f"{display_url(resolve_url(args.url))} has no judging sessions yet: create one with "
            f"`qcat judge create-session`")
    for row in rows:
        models = (f"categories of {row['baseline']}" + (f" and {row['target']}" if row['target'] else "")
                  if row["kind"] == "categories" else f"baseline {row['baseline']}  target {row['target']}")
        print(f"{row['id']:>4}  {row['name']}  (judges see {row['display_name']!r}; {row['queries']:,} queries, "
              f"{row['complete']:,} with all "
              f"{row['judges_per_query']} judges)  {models}")
    store.dispose()
    return 0


def run_release(args: argparse.Namespace) -> int:
    from qcat.judging.grading.assignment import release
    from qcat.judging.grading.judges import find_judge
    from qcat.judging.grading.sessions import find_query, find_session
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    with store.sessions() as session:
        session_id = find_session(session, args.session).id if args.session is not None else None
        judge_id = find_judge(session, args.judge).id if args.judge is not None else None
        query_id = find_query(session, args.query, session_id).id if args.query is not None else None
    released = release(store, judge_id=judge_id, query_id=query_id, session_id=session_id)
    store.dispose()
    whose = f"judge {args.judge!r}" if args.judge is not None else f"query {args.query!r}"
    for claim in released:
        print(f"released query {claim.query_id} {claim.query!r} of session {claim.session!r} held by judge "
              f"{claim.judge!r} (last active {claim.active_at:%Y-%m-%d %H:%M})")
    say(f"released {len(released)} open claim{'s' * (len(released) != 1)} of {whose}" if released else
        f"nothing to release: {whose} holds no open claim{' in that session' if session_id is not None else ''}")
    return 0


def run_report(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    kind = existing_session(store, args.session)  # before the heavy imports: errors come fast
    from qcat.evaluation.report_files import clean_json, write_report_files
    from qcat.judging.reporting import categories
    from qcat.judging.reporting.report import build_report, draw_all, render_html, render_markdown

    if kind == "categories":
        build_report, draw_all = categories.build_category_report, categories.draw_all
        render_markdown, render_html = categories.render_markdown, categories.render_html
    from qcat.errors import InputError
    from qcat.judging.reporting.export import selected

    selection = selected(store, args.session, args.min_judges)
    if not selection.results.judgments:  # its tables would be nan: say so, as export does (issue 53, item 5)
        store.dispose()
        raise InputError(nothing_to_report(selection, args.session))
    report = build_report(store, args.session, bootstrap=args.bootstrap, seed=args.seed, min_judges=args.min_judges)
    store.dispose()
    written = write_report_files(report, args.out, draw_all(report), render_markdown, render_html)
    say(f"wrote {', '.join(str(p) for p in written)}")
    if args.json:
        print(json.dumps(clean_json(report), indent=2))
    return 0


def run_add_gold(args: argparse.Namespace) -> int:
    from qcat.judging.grading.gold import add_gold
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    try:
        added = add_gold(store, args.session, args.file)
    finally:
        store.dispose()
    say(f"session {added.session!r}: {added.queries:,} gold question{'s' * (added.queries != 1)} with {added.grades:,} "
        f"known grades from {args.file} ({added.gold_queries:,} in the session now); every judge gets them, and they "
        "are left out of the session's results" +
        (f"; {added.already_judged:,} already judged: those judgments now count as gold answers"
         if added.already_judged else ""))
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Every file asked for, or none: each is written to a temporary sibling and renamed only once
    all of them are written, so a refusal (no finished judgments, a listing id qrels cannot hold)
    or a write error leaves nothing behind."""
    from contextlib import ExitStack

    from qcat.console.output import atomic_file
    from qcat.errors import InputError
    from qcat.judging.store.connection import open_store

    if not (args.csv or args.qrels or args.golden or args.gold):
        raise InputError("say what to write: --csv FILE, --qrels FILE, --golden FILE (a result session) and/or "
                         "--gold FILE (a category session)")
    check_distinct_outputs((("--csv", args.csv), ("--qrels", args.qrels), ("--golden", args.golden),
                            ("--gold", args.gold)))
    store = open_store(args.url)
    try:
        existing_session(store, args.session)
        from qcat.judging.reporting.export import (
            selected,
            write_csv,
            write_golden_csv,
            write_graded_gold_file,
            write_qrels,
        )

        selection = selected(store, args.session, args.min_judges)
        if not selection.results.judgments:
            raise InputError(nothing_to_export(selection, args.session))
        written = []
        with ExitStack() as staged:
            for path, writer in ((args.csv, write_csv), (args.qrels, write_qrels), (args.golden, write_golden_csv),
                                 (args.gold, write_graded_gold_file)):
                if path is not None:
                    staging = staged.enter_context(atomic_file(path, flag=None))
                    written.append((path, writer(store, args.session, staging, args.min_judges)))
    finally:
        store.dispose()
    for path, rows in written:
        say(f"wrote {rows:,} rows to {path}")
    say(f"{len(selection.results.queries):,} queries graded by at least {selection.needed} judges exported; "
        f"{selection.left_out:,} queries graded by fewer left out" +
        (" (--min-judges 1 exports every judgment)" if selection.left_out else ""))
    return 0


def check_distinct_outputs(outputs) -> None:
    """Refuse, before anything is written, two outputs given one file (the second would replace
    the first, both reported written): the same path, spelt alike or not (a link, ``./``)."""
    import os

    from qcat.errors import InputError, shown

    seen: dict[str, tuple[str, Path]] = {}
    for flag, path in outputs:
        if path is None:
            continue
        try:  # an existing file by its inode (a hard link too), else by its resolved path
            status = os.stat(path)
            key = f"{status.st_dev}:{status.st_ino}"
        except OSError:
            key = os.path.realpath(os.path.abspath(path))
        if key in seen:
            other, first = seen[key]
            same = shown(str(path)) if str(path) == str(first) else f"{shown(str(first))} and {shown(str(path))}"
            raise InputError(f"{other} and {flag} name one file, {same}: give each output a file of its own "
                             "(nothing written)")
        seen[key] = (flag, path)


def nothing_to_export(selection, session: str) -> str:
    """Why an export of no judgment is refused, and what to do first."""
    name = selection.results.name
    if selection.left_out:
        return (f"judging session {name!r}: no query is graded by {selection.needed} judges yet "
                f"({selection.left_out:,} by fewer): nothing written; --min-judges 1 exports every judgment")
    return (f"judging session {name!r} has no finished judgments yet: nothing written. Judges grade its queries "
            f"first (qcat judge app --session {shlex.quote(str(session))}); qcat judge sessions shows the progress")


def nothing_to_report(selection, session: str) -> str:
    """Why a report of no graded query is refused (its tables would be nan), and what to do first."""
    name = selection.results.name
    if selection.left_out:
        return (f"judging session {name!r}: nothing graded yet by {selection.needed} judges ({selection.left_out:,} "
                "queries by fewer): no report written; --min-judges 1 reports on every judgment")
    return (f"judging session {name!r}: nothing graded yet: no report written. Judges grade its queries first "
            f"(qcat judge app --session {shlex.quote(str(session))}); qcat judge sessions shows the progress")
