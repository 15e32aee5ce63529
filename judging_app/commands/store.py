"""``qcat db upgrade|downgrade|current`` (the store's migrations) and ``qcat judge backup``."""

from __future__ import annotations

import argparse

from qcat.judging.commands.common import display_url, say
from qcat.judging.store.connection import resolve_url


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
        before, after = migrate.upgrade(url, args.revision, other_tables=args.allow_other_tables)
    else:
        before, after = migrate.downgrade(url, args.revision, drop_data=args.yes)
    say(f"{display_url(url)}: revision {before or 'empty'} -> {after or 'empty'}")
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
