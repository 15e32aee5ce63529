"""The argument parsers of ``qcat db`` and ``qcat judge`` (the CLI reference is generated from them).
The database is ``--url``, else ``$QCAT_DB_URL``, else ``sqlite:///qcat-judging.db``."""

from __future__ import annotations

import argparse
from pathlib import Path

from qcat.cli import ArgumentParser, float_at_least, float_in, int_at_least, positive_float
from qcat.judging.store.connection import URL_ENV

DEFAULT_REPORT = Path("qcat-judging-report")
# The store keeps a session's seed in an INTEGER column: 32 bits in PostgreSQL (SQLite's 64 hold it too).
MAX_SEED = 2**31 - 1
MIN_DRAWS = 40  # a 95% percentile interval needs a draw beyond each 2.5% tail


def seed(text: str) -> int:
    """An argparse ``type`` for ``--seed``: an integer the store can keep, refused at parse time."""
    value = int_at_least(0)(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED:,} (the judging store keeps it as a 32-bit "
                                         f"integer), got {value}")
    return value


def draws(text: str) -> int:
    """An argparse ``type`` for ``--bootstrap``: 0 (no intervals) or enough draws for a 95% interval."""
    value = int_at_least(0)(text)
    if 0 < value < MIN_DRAWS:
        raise argparse.ArgumentTypeError(f"{value} draws cannot give a 95% interval: give at least {MIN_DRAWS} "
                                         "(1000 is the default), or 0 for figures without intervals")
    return value


def session_name(text: str) -> str:
    """An argparse ``type`` for ``create-session --name``: not all digits, which would read as a session id."""
    if text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is all digits, and `qcat judge report {text.strip()}` (app, "
                                         f"export, members) would open session id {text.strip()} instead: give a "
                                         f"name with a letter in it, e.g. 'run {text.strip()}'")
    return text


def _url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None,
                        help=f"database URL or SQLite file (default: ${URL_ENV}, else sqlite:///qcat-judging.db)")


def db_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="qcat db", description="Migrate the judging store (Alembic).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("upgrade", help="create or migrate the judging tables (to the newest revision)")
    _url(up)
    up.add_argument("--revision", default="head", help="target revision (default head)")
    up.add_argument("--allow-other-tables", action="store_true",
                    help="add qcat's tables to a database that already holds other tables but no qcat history "
                         "(refused otherwise, naming them)")
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

    create = actions.add_parser("create-session", help="sample head/torso/tail queries and store both result lists "
                                                       "(--kind categories: the models' top categories)")
    create.add_argument("--kind", choices=("results", "categories"), default="results",
                        help="results (default): judges grade two search result lists side by side; categories: judges "
                             "grade the categories one or two classifiers propose for each query (--model)")
    create.add_argument("--model", type=Path, action="append", default=None, metavar="MODEL",
                        help="--kind categories: a model bundle whose top categories are judged; twice to compare two "
                             "(the first is the baseline)")
    create.add_argument("--traffic", type=Path, default=None, metavar="FILE",
                        help="--kind categories: the queries to judge, a file of sampled traffic (a query per line, a "
                             "repeated line one more impression; or CSV/TSV with a query column and impressions and/or "
                             "segment; no corpus needed: the categories are the first model's taxonomy's); default: "
                             "drawn from the corpus's click log by head/torso/tail impressions")
    create.add_argument("--log", type=Path, default=None, metavar="FILE",
                        help="--kind categories: draw the queries from this click log (CSV, TSV, JSONL, Parquet; "
                             "with --taxonomy) by head/torso/tail impressions instead of the corpus's")
    create.add_argument("--taxonomy", type=Path, default=None, metavar="FILE", help="the taxonomy of --log")
    create.add_argument("--top-k", type=int_at_least(1, 5), default=3, metavar="K",
                        help="--kind categories: each model's top K categories are judged (1-5, default 3)")
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
                        help="with --results: the segment of queries whose rows give neither segment nor impressions; "
                             "with --traffic: the segment of every query when the file names none (default: by "
                             "impressions)")
    create.add_argument("--differing-only", type=int_at_least(1), default=None, metavar="N",
                        help="keep only queries whose top N listings differ between the systems; the others are "
                             "counted as ties in the report, without graders")
    create.add_argument("--guidelines", type=Path, default=None, metavar="FILE.md",
                        help="Markdown guidelines shown to each judge on first sign-in, and one click away after, "
                             "above qcat's own for the session's kind (`qcat judge guidelines --kind KIND` prints them)")
    create.add_argument("--queries", type=int_at_least(1), default=None,
                        help="how many queries, one third per segment (with --select: split evenly over the "
                             "segments the pool holds). Without it: 4500 from a log or corpus, every query of "
                             "--traffic or --results, and --select uncertain or disagree refuse to run (their "
                             "budget has no default)")
    create.add_argument("--name", type=session_name, default=None,
                        help="session name (default: 'BASELINE vs TARGET, time'); not all digits (read as an id)")
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
    create.add_argument("--seed", type=seed, default=0,
                        help=f"seeds the query sample and the left/right placement (0..{MAX_SEED})")
    create.add_argument("--select", choices=("random", "uncertain", "disagree"), default=None,
                        help="--kind categories: how the --queries budget is chosen from the pool (the log's or "
                             "--traffic's queries), split evenly over the segments it holds: random (the sample that "
                             "measures precision; without --select, a third per segment as always), uncertain (the smallest margin between the first model's "
                             "top-1 and top-2 calibrated scores) or disagree (the two models' top-1 categories differ, "
                             "most impressions first). With --select, queries already judged in the store are left "
                             "out. uncertain and disagree pick training data: their precision is not the model's")
    create.add_argument("--precision", type=float_in(0, 1, low_open=True, high_open=True), default=None, metavar="P",
                        help="--kind categories: also show each model's node answer at precision P (0 < P < 1): the "
                             "deepest taxonomy node (department, aisle, ..., leaf) its node calibration says the query "
                             "lies beneath at least P of the time, blind among the categories shown (once where it is "
                             "one of them); the report gives people's acceptable rate of those nodes. Every --model "
                             "needs a node calibration (nodes.json)")
    create.add_argument("--exclude-gold", type=Path, action="append", default=None, metavar="FILE",
                        help="--kind categories: leave out the queries of this graded gold file (`qcat judge export "
                             "--gold`, a test set you keep apart); repeatable")
    create.add_argument("--include-training-queries", action="store_true",
                        help="--kind categories drawn from a click log (--log, --corpus): keep the queries the models "
                             "trained or were tuned on (left out by default, so that the figures are on held-out "
                             "queries)")
    _url(create)

    guidelines = actions.add_parser("guidelines", help="print the guidelines qcat shows judges (Markdown), to start a "
                                                       "team's own --guidelines FILE from")
    guidelines.add_argument("--kind", choices=("results", "categories"), default="results",
                            help="the session kind whose guidelines to print (default results)")

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
    report.add_argument("--bootstrap", type=draws, default=1000,
                        help=f"bootstrap draws for the intervals (default 1000; at least {MIN_DRAWS}, or 0 for none)")
    report.add_argument("--seed", type=seed, default=0, help=f"seeds the bootstrap (0..{MAX_SEED})")
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
    export.add_argument("--gold", type=Path, default=None, metavar="FILE",
                        help="a category session's judged categories as a graded gold file (for qcat evaluate --gold "
                             "and qcat data audit --gold)")
    export.add_argument("--min-judges", type=int_at_least(1), default=None,
                        help="export queries graded by at least this many judges (default: all of the session's, "
                             "the queries the report counts; 1: every judgment)")
    return parser
