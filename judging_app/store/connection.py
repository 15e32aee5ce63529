"""Connecting to the judging store: the database URL, the engine and transactions.

SQLite is the embedded default (``sqlite:///qcat-judging.db``): every connection turns on
WAL, foreign keys and a busy timeout, and every transaction starts with ``BEGIN IMMEDIATE``,
so concurrent writers queue on the database lock instead of failing when a reader upgrades
to a writer. PostgreSQL is used by URL (``postgresql://user:pw@host/db``, driven by psycopg 3).

:func:`open_store` also checks that the schema is at the migrations' head and otherwise tells
the user to run ``qcat db upgrade``.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.orm import Session, sessionmaker

from qcat.errors import InputError

DEFAULT_URL = "sqlite:///qcat-judging.db"
URL_ENV = "QCAT_DB_URL"
BUSY_TIMEOUT_MS = 30_000


def resolve_url(url: str | None = None) -> str:
    """``url``, else ``$QCAT_DB_URL``, else the default; a bare file path means SQLite."""
    url = url or os.environ.get(URL_ENV) or DEFAULT_URL
    if "://" not in url:  # a plain file name
        url = f"sqlite:///{Path(url).expanduser()}"
    return url


def parse_url(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InputError(f"cannot parse database URL {url!r}: expected e.g. sqlite:///judging.db or "
                         "postgresql://user:password@host/dbname") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise InputError(f"unsupported database {parsed.get_backend_name()!r} in {shown(parsed)}: "
                         "use sqlite:///FILE or postgresql://...")
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("", "psycopg2"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def shown(url: URL | str) -> str:
    """The URL as printed to users: without the password."""
    return (make_url(url) if isinstance(url, str) else url).render_as_string(hide_password=True)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str | None = None, pool_size: int = 10) -> Engine:
    """An engine for ``url`` (resolved with :func:`resolve_url`); nothing is connected yet."""
    parsed = parse_url(resolve_url(url))
    try:
        if parsed.get_backend_name() == "sqlite":
            engine = create_engine(parsed, connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000})
            _configure_sqlite(engine)
        else:
            engine = create_engine(parsed, pool_size=pool_size, max_overflow=10, pool_pre_ping=True)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise InputError(f"cannot use database URL {shown(parsed)}: {exc}") from None
    return engine


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (below)
        cursor = dbapi_connection.cursor()
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def sqlite_file(engine: Engine) -> Path | None:
    """The SQLite database file (also of a ``sqlite:///file:PATH?mode=ro&uri=true`` URL), or None."""
    database = engine.url.database
    if not is_sqlite(engine) or database in (None, "", ":memory:"):
        return None
    if engine.url.query.get("uri") == "true" and database.startswith("file:"):
        return Path(unquote(database.removeprefix("file:").split("?", 1)[0]))
    return Path(database)


def error_detail(exc: Exception) -> str:
    """The first line of a database error's driver message: never the SQL or its parameters."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first.split(" [SQL:", 1)[0].split(" (Background on this error", 1)[0].strip() or type(exc).__name__


def connection_error(engine: Engine, exc: Exception) -> InputError:
    return InputError(f"cannot connect to the judging database {shown(engine.url)}: {error_detail(exc)}")


def database_error(url: str | None, exc: Exception) -> InputError:
    """A database error as a one-line user error naming the store (used by every ``qcat db|judge`` command)."""
    try:
        store = shown(parse_url(resolve_url(url)))
    except InputError:
        store = "the judging database"
    return InputError(f"{store}: {error_detail(exc)}")


def current_revision(engine: Engine) -> str | None:
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return None
            return connection.exec_driver_sql("select version_num from alembic_version").scalar()
    except DBAPIError as exc:
        raise connection_error(engine, exc) from None


# The newest migration's revision (migrations/versions/), which the code needs. Written here rather
# than asked of Alembic, whose import and script parsing cost every judging command and app
# start half a CPU-second; tests/test_judging_store.py checks it against Alembic's head.
SCHEMA_HEAD = "0009"


def check_schema(engine: Engine) -> None:
    """Raise :class:`InputError` unless the database exists and is migrated to the head."""
    upgrade = f"run `qcat db upgrade --url {shown(engine.url)}` first"
    path = sqlite_file(engine)
    if path is not None and not path.exists():
        raise InputError(f"no judging database at {path}: {upgrade}")
    revision, head = current_revision(engine), SCHEMA_HEAD
    if revision is None:
        raise InputError(f"the judging database {shown(engine.url)} has no judging tables yet: {upgrade}")
    if revision != head:
        raise InputError(f"the judging database {shown(engine.url)} is at revision {revision}, the code needs {head}: {upgrade}")


@dataclass
class Store:
    """An engine and its session factory, schema checked."""

    engine: Engine
    sessions: sessionmaker

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self.sessions() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()


def open_store(url: str | None = None, check: bool = True) -> Store:
    engine = make_engine(url)
    if check:
        try:
            check_schema(engine)
        except Exception:
            engine.dispose()
            raise
    return Store(engine, sessionmaker(engine, expire_on_commit=False))
