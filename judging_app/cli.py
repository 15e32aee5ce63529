"""``qcat db`` (migrations) and ``qcat judge`` (sessions, judges, the app, results).

The database is ``--url``, else ``$QCAT_DB_URL``, else ``sqlite:///qcat-judging.db``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from qcat.cli import ArgumentParser, float_at_least, int_at_least, positive_float
from qcat.judging.store.connection import URL_ENV, resolve_url

DEFAULT_REPORT = Path("qcat-judging-report")


def _url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None,
                        help=f"database URL or SQLite file (default: ${URL_ENV}, else sqlite:///qcat-judging.db)")


def db_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="qcat db", description="Migrate the judging store (Alembic).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("upgrade", help="create or migrate the judging tables (to the newest revision)")
    _url(up)
    up.add_argument("--revision", default="head", help="target revision (default head)")
    down = actions.add_parser("downgrade", help="undo migrations (default: one step; 'base' drops every table)")
    _url(down)
    down.add_argument("--revision", default="-1", help="target revision (default -1)")
    down.add_argument("--yes", action="store_true",
                      help="drop tables even when they hold rows (refused otherwise, saying how many would go)")
    current = actions.add_parser("current", help="print the database's revision")
    _url(current)
    return parser


def judge_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="qcat judge", description="Blind side-by-side judging of two classifiers (eBay §4.2.3).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create-session", help="sample head/torso/tail queries and store both result lists")
    create.add_argument("--baseline", type=Path, default=None, metavar="MODEL", help="baseline model bundle")
    create.add_argument("--target", type=Path, default=None, metavar="MODEL", help="target model bundle")
    create.add_argument("--results", type=Path, action="append", default=None, metavar="FILE",
                        help="result lists of any search system instead of --baseline/--target (.jsonl, .csv or .tsv: "
                             "query, system, rank, listing_id, title[, category, brand, price, image_url, link, "
                             "segment, impressions]); twice: the baseline's file, then the target's; once: a file "
                             "with both systems (the first named is the baseline)")
    create.add_argument("--topics", type=Path, default=None, metavar="FILE",
                        help="with TREC run files (.run, .trec): the queries' text, 'qid<TAB>query' per line")
    create.add_argument("--listings", type=Path, default=None, metavar="FILE",
                        help="with --results: what the cards show per listing_id (CSV, TSV or JSONL: title, category, "
                             "brand, price, image_url, link), for rows that do not carry it (TREC runs)")
    create.add_argument("--default-segment", choices=("head", "torso", "tail"), default=None,
                        help="with --results: the segment of queries whose rows give neither segment nor impressions")
    create.add_argument("--differing-only", type=int_at_least(1), default=None, metavar="N",
                        help="keep only queries whose top N listings differ between the systems; the others are "
                             "counted as ties in the report, without graders")
    create.add_argument("--guidelines", type=Path, default=None, metavar="FILE.md",
                        help="Markdown guidelines shown to each judge on first sign-in, and one click away after")
    create.add_argument("--queries", type=int_at_least(1), default=None,
                        help="queries, one third per segment (default 4500; with --results: every query)")
    create.add_argument("--name", default=None, help="session name (default: 'BASELINE vs TARGET, time')")
    create.add_argument("--display-name", default=None,
                        help="what judges see as the session's name (default 'Session ID'; the name may tell which "
                             "models are compared)")
    create.add_argument("--judges-per-query", type=int_at_least(1), default=3, help="distinct judges per query (default 3)")
    create.add_argument("--corpus", type=Path, default=None, help="corpus directory (default: the demo corpus)")
    create.add_argument("--period", choices=("base", "candidate", "all"), default="base",
                        help="log period whose demand makes the segments (default base, the latest)")
    create.add_argument("--mode", choices=("boost", "filter"), default="boost", help="how categories act in search")
    create.add_argument("--boost-weight", type=float_at_least(0), default=1.0)
    create.add_argument("--categories", type=int_at_least(1), default=3, help="categories a filtered search keeps (default 3)")
    create.add_argument("--seed", type=int_at_least(0), default=0, help="seeds the query sample and the left/right placement")
    _url(create)

    add = actions.add_parser("add-judge", help="add a judge and print their sign-in token (shown only once)")
    add.add_argument("name", metavar="NAME")
    _url(add)

    add_admin = actions.add_parser("add-admin", help="add an admin (the app's admin page) and print their token (shown once)")
    add_admin.add_argument("name", metavar="NAME")
    _url(add_admin)

    reset = actions.add_parser("reset-token", help="give a judge a new token (the old one stops working; shown once)")
    reset.add_argument("name", metavar="JUDGE")
    _url(reset)

    deactivate = actions.add_parser("deactivate", help="stop a judge from signing in (claims released, judgments kept)")
    deactivate.add_argument("name", metavar="JUDGE")
    deactivate.add_argument("--reactivate", action="store_true", help="let a deactivated judge sign in again")
    _url(deactivate)

    members = actions.add_parser("members", help="name a session's judges: only they may judge it (none named: "
                                                 "every judge may)")
    members.add_argument("session", metavar="SESSION", help="session id or name")
    members.add_argument("--add", nargs="+", default=[], metavar="JUDGE", help="judges to add")
    members.add_argument("--remove", nargs="+", default=[], metavar="JUDGE", help="judges to remove")
    _url(members)

    listing = actions.add_parser("sessions", help="list the judging sessions and their progress")
    _url(listing)

    app = actions.add_parser("app", help="start the judging app (Streamlit)")
    _url(app)
    app.add_argument("--session", default=None, help="session id or name (default: judges choose)")
    app.add_argument("--port", type=int_at_least(1, 65535), default=8501)
    app.add_argument("--address", default="localhost", help="address to listen on (default localhost)")
    app.add_argument("--claim-timeout", type=positive_float(), default=30, metavar="MINUTES",
                     help="release a judge's claim on a query after this many idle minutes (fractions allowed: 0.5 "
                          "is 30 seconds), so that another judge gets the query (default 30)")
    app.add_argument("--sign-in-hours", type=positive_float(), default=12, metavar="HOURS",
                     help="a browser's sign-in expires on the server after this many hours; the judge then signs "
                          "in again with their token (default 12)")
    app.add_argument("--trusted-proxy", default=None, metavar="HEADER",
                     help="the app runs behind a reverse proxy that puts the client's address in this request header "
                          "(e.g. X-Forwarded-For; its last address is used): wrong tokens are then counted per client "
                          "address the proxy saw, not per the proxy's own address. Only set it when every request "
                          "comes through that proxy: a client could otherwise write the header itself")

    release = actions.add_parser("release", help="release open claims of a judge or of a query (for other judges)")
    _url(release)
    whose = release.add_mutually_exclusive_group(required=True)
    whose.add_argument("--judge", metavar="NAME", help="release every open claim of this judge")
    whose.add_argument("--query", metavar="TEXT_OR_ID", help="release every open claim of this query (id or text)")
    release.add_argument("--session", default=None, help="only in this session (id or name)")

    report = actions.add_parser("report", help="NDCG*, win/tie/loss and agreement of a session (eBay Table 5)")
    report.add_argument("session", metavar="SESSION", help="session id or name")
    _url(report)
    report.add_argument("--out", type=Path, default=DEFAULT_REPORT, help=f"report directory (default ./{DEFAULT_REPORT})")
    report.add_argument("--bootstrap", type=int_at_least(0), default=1000, help="bootstrap draws for the intervals (default 1000)")
    report.add_argument("--seed", type=int_at_least(0), default=0)
    report.add_argument("--min-judges", type=int_at_least(1), default=None,
                        help="count queries graded by at least this many judges (default: all of the session's)")
    report.add_argument("--json", action="store_true", help="also print the report JSON on stdout")

    gold = actions.add_parser("add-gold", help="make queries of a session gold questions, with their known grades")
    _url(gold)
    gold.add_argument("--session", required=True, help="session id or name")
    gold.add_argument("--file", type=Path, required=True, metavar="FILE",
                      help="CSV (TSV when it ends in .tsv) with the columns query, listing_id, grade (0-3): a grade "
                           "for every listing shown for each gold query; other columns are ignored")

    backup = actions.add_parser("backup", help="copy a SQLite store safely while the app runs (PostgreSQL: pg_dump)")
    _url(backup)
    backup.add_argument("--out", type=Path, required=True, metavar="FILE", help="the backup file (a SQLite database)")
    backup.add_argument("--force", action="store_true", help="overwrite --out if it exists")

    export = actions.add_parser("export", help="write a session's judgments as CSV and/or TREC qrels")
    export.add_argument("session", metavar="SESSION", help="session id or name")
    _url(export)
    export.add_argument("--csv", type=Path, default=None, help="every judgment, one row each")
    export.add_argument("--qrels", type=Path, default=None, help="TREC qrels: qid 0 docno grade (mean of the judges, rounded)")
    export.add_argument("--golden", type=Path, default=None, help="qcat golden CSV (for qcat golden evaluate --golden)")
    export.add_argument("--min-judges", type=int_at_least(1), default=None,
                        help="export queries graded by at least this many judges (default: all of the session's, "
                             "the queries the report counts; 1: every judgment)")
    return parser


def main(command: str, argv: list[str]) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from qcat.judging.store.connection import database_error

    args = (db_parser() if command == "db" else judge_parser()).parse_args(argv)
    run = run_db if command == "db" else JUDGE_ACTIONS[args.action]
    try:
        return run(args)
    except SQLAlchemyError as exc:  # one line naming the store: no SQL, no parameters, no traceback
        raise database_error(args.url, exc) from None


def say(message: str) -> None:
    print(message, file=sys.stderr)


def run_db(args: argparse.Namespace) -> int:
    from qcat.errors import InputError
    from qcat.judging.store import migrate
    from qcat.judging.store.connection import current_revision, make_engine, sqlite_file

    url = resolve_url(args.url)
    if args.action != "upgrade":
        # Only upgrade creates a database: reading (or downgrading) a SQLite file that does not
        # exist would create an empty one.
        engine = make_engine(url)
        path = sqlite_file(engine)
        engine.dispose()
        if path is not None and not path.exists():
            raise InputError(f"no judging database at {path}: `qcat db {args.action}` does not create one, "
                             f"`qcat db upgrade --url {display_url(url)}` does")
    if args.action == "current":
        engine = make_engine(url)
        print(current_revision(engine) or "(empty: run `qcat db upgrade`)")
        engine.dispose()
        return 0
    if args.action == "upgrade":
        before, after = migrate.upgrade(url, args.revision)
    else:
        before, after = migrate.downgrade(url, args.revision, drop_data=args.yes)
    say(f"{display_url(url)}: revision {before or 'empty'} -> {after or 'empty'}")
    return 0


def display_url(url: str) -> str:
    from qcat.judging.store.connection import parse_url

    return parse_url(url).render_as_string(hide_password=True)


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
    from qcat.bundle import read_manifest
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


MAX_GUIDELINES = 100_000


def read_guidelines(path: Path) -> str:
    """The session's Markdown guidelines, checked: a readable UTF-8 file, not empty, not huge."""
    from qcat.errors import InputError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--guidelines {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
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


def run_add_judge(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.judges import add_judge

    store = open_store(args.url)
    judge, token = add_judge(store, args.name)
    store.dispose()
    say(f"judge {judge.id} {judge.name!r} added. Their sign-in token (shown only this once; only a hash is stored):")
    print(token)
    return 0


def run_add_admin(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.judges import add_admin

    store = open_store(args.url)
    admin, token = add_admin(store, args.name)
    store.dispose()
    say(f"admin {admin.id} {admin.name!r} added. Their admin token (shown only this once; only a hash is stored); "
        f"it signs in to the app's admin page:")
    print(token)
    return 0


def _judge_id(store, name: str) -> int:
    from qcat.judging.store.judges import find_judge

    with store.sessions() as session:
        return find_judge(session, name).id


def run_reset_token(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.judges import reset_token

    store = open_store(args.url)
    token = reset_token(store, _judge_id(store, args.name))
    store.dispose()
    say(f"judge {args.name!r} has a new token (shown only this once); the old one no longer works and their "
        f"browsers are signed out:")
    print(token)
    return 0


def run_deactivate(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.judges import set_active

    store = open_store(args.url)
    released = set_active(store, _judge_id(store, args.name), args.reactivate)
    store.dispose()
    say(f"judge {args.name!r} can sign in again" if args.reactivate else
        f"judge {args.name!r} deactivated: signed out, {len(released)} open claim{'s' * (len(released) != 1)} "
        f"released; their judgments stay")
    return 0


def run_members(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.members import change_members

    store = open_store(args.url)
    name, judges = change_members(store, args.session, args.add, args.remove)
    store.dispose()
    for judge in judges:
        print(judge)
    say(f"session {name!r}: " + (f"{len(judges)} judge{'s' * (len(judges) != 1)} may judge it" if judges else
                                 "names no judge: every active judge may judge it"))
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
        print(f"{row['id']:>4}  {row['name']}  (judges see {row['display_name']!r}; {row['queries']:,} queries, "
              f"{row['complete']:,} with all "
              f"{row['judges_per_query']} judges)  baseline {row['baseline']}  target {row['target']}")
    store.dispose()
    return 0


def app_command(url: str, session: str | None, port: int, address: str,
                claim_timeout: float = 30) -> tuple[list[str], dict]:
    """The ``streamlit run`` command line and environment of the judging app."""
    from qcat.judging.grading.assignment import CLAIM_TIMEOUT_ENV

    env = {**os.environ, URL_ENV: url, CLAIM_TIMEOUT_ENV: str(claim_timeout)}
    if session is not None:
        env["QCAT_JUDGE_SESSION"] = str(session)
    else:
        env.pop("QCAT_JUDGE_SESSION", None)
    command = [sys.executable, "-m", "streamlit", "run", str(Path(__file__).resolve().parent / "pages" / "app.py"),
               "--server.port", str(port), "--server.address", address, "--server.headless", "true",
               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
               "--client.toolbarMode", "viewer"]
    return command, env


def run_app(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.sign_in_limits import PROXY_HEADER_ENV
    from qcat.judging.store.sign_ins import LIFETIME_ENV

    url = resolve_url(args.url)
    store = open_store(url)
    if args.session is not None:
        _existing_session(store, args.session)
    store.dispose()
    command, env = app_command(url, args.session, args.port, args.address, args.claim_timeout)
    env[LIFETIME_ENV] = str(args.sign_in_hours)
    if args.trusted_proxy:
        env[PROXY_HEADER_ENV] = args.trusted_proxy
    else:
        env.pop(PROXY_HEADER_ENV, None)
    say(f"judging app on http://{args.address}:{args.port} ({display_url(url)}; claims released after "
        f"{args.claim_timeout:g} idle minutes); Ctrl-C stops it")
    return run_child(command, env)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_GRACE_SECONDS = 10


# Run before the Streamlit server replaces it (exec): on Linux, SIGKILL it when its parent, `qcat
# judge app`, dies (PR_SET_PDEATHSIG survives the exec), and exit at once if the parent is gone
# already. A launcher rather than Popen's preexec_fn, which is unsafe in a process with threads.
DIE_WITH_PARENT = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0); "
                   "os.getppid() == int(sys.argv[1]) or os._exit(1); os.execv(sys.argv[2], sys.argv[2:])")


def run_child(command: list[str], env: dict) -> int:
    """Run the Streamlit server as a child and stop it with this process: SIGTERM, SIGINT or SIGHUP
    sent to this process alone (not only Ctrl-C to the whole group) is passed on to the child, which
    gets :data:`STOP_GRACE_SECONDS` to exit before it is killed; on Linux the child is also killed
    when this process dies without a word (SIGKILL, a crash), so it never serves on alone. Returns
    the child's exit status (0 when it was stopped by one of those signals)."""
    if sys.platform == "linux":
        command = [sys.executable, "-c", DIE_WITH_PARENT, str(os.getpid()), *command]
    child = subprocess.Popen(command, env=env)
    stopping: list[int] = []

    def stop(signum, frame) -> None:
        stopping.append(signum)
        if child.poll() is None:
            child.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    deadline = None
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopping and deadline is None:
                    deadline = time.monotonic() + STOP_GRACE_SECONDS
                if deadline is not None and time.monotonic() > deadline:
                    child.kill()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:
            child.kill()
            child.wait()
    if stopping:
        say(f"judging app stopped ({signal.Signals(stopping[0]).name})")
        return 0
    return code


def run_release(args: argparse.Namespace) -> int:
    from qcat.judging.grading.assignment import release
    from qcat.judging.grading.sessions import find_query, find_session
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.judges import find_judge

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


def run_backup(args: argparse.Namespace) -> int:
    from qcat.errors import InputError
    from qcat.judging.store.backup import backup_sqlite, pg_dump_command
    from qcat.judging.store.connection import open_store, parse_url

    url = resolve_url(args.url)
    parsed = parse_url(url)
    if parsed.get_backend_name() == "postgresql":
        raise InputError(f"{display_url(url)} is a PostgreSQL store: back it up with "
                         f"`{pg_dump_command(parsed, args.out)}` (restore with pg_restore)")
    store = open_store(url)
    try:
        counts = backup_sqlite(store, args.out, force=args.force)
    finally:
        store.dispose()
    say(f"backed up {display_url(url)} to {args.out}: " + ", ".join(f"{n:,} {table}" for table, n in counts.items())
        + f"; use it with --url {args.out}")
    return 0


def _existing_session(store, key: str) -> None:
    from qcat.judging.grading.sessions import find_session

    with store.sessions() as session:
        find_session(session, key)


def run_report(args: argparse.Namespace) -> int:
    from qcat.judging.store.connection import open_store

    store = open_store(args.url)
    _existing_session(store, args.session)  # before the heavy imports: errors come fast
    from qcat.evaluation.report_files import clean_json, write_report_files
    from qcat.judging.reporting.report import build_report, draw_all, render_html, render_markdown

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
    from qcat.errors import InputError
    from qcat.judging.store.connection import open_store

    if not (args.csv or args.qrels or args.golden):
        raise InputError("say what to write: --csv FILE, --qrels FILE and/or --golden FILE")
    store = open_store(args.url)
    _existing_session(store, args.session)
    from qcat.judging.reporting.export import selected, write_csv, write_golden_csv, write_qrels

    selection = selected(store, args.session, args.min_judges)
    for path, writer in ((args.csv, write_csv), (args.qrels, write_qrels), (args.golden, write_golden_csv)):
        if path is not None:
            rows = writer(store, args.session, path, args.min_judges)
            say(f"wrote {rows:,} rows to {path}")
    store.dispose()
    say(f"{len(selection.results.queries):,} queries graded by at least {selection.needed} judges exported; "
        f"{selection.left_out:,} queries graded by fewer left out" +
        (" (--min-judges 1 exports every judgment)" if selection.left_out else ""))
    return 0


JUDGE_ACTIONS = {"create-session": run_create, "add-judge": run_add_judge, "sessions": run_sessions, "app": run_app,
                 "report": run_report, "export": run_export, "release": run_release,
                 "backup": run_backup, "add-gold": run_add_gold, "add-admin": run_add_admin,
                 "reset-token": run_reset_token, "deactivate": run_deactivate, "members": run_members}
