"""Backing up the judging store.

A SQLite store runs in WAL mode: committed transactions sit in ``FILE-wal`` until a checkpoint,
so copying ``FILE`` alone while the app runs loses them. :func:`backup_sqlite` uses SQLite's
online backup API (``sqlite3.Connection.backup``, in one step: a consistent snapshot of every
committed transaction, taken while other connections keep reading and writing) into a
standalone file (rollback journal, no ``-wal``) that ``--url`` can point at directly.
A PostgreSQL store is backed up with ``pg_dump`` (:func:`pg_dump_command`).
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path

from sqlalchemy.engine import URL

from qcat.errors import InputError
from qcat.judging.store.connection import Store, shown, sqlite_file

COUNTED = ("judgments", "assignments", "judges", "judging_sessions")


def pg_dump_command(url: URL, out: Path) -> str:
    """The ``pg_dump`` command line that backs up the PostgreSQL store at ``url`` (no password:
    pg_dump asks for it, or reads ``PGPASSWORD`` / ``~/.pgpass``)."""
    options = [f"--{name}={value}" for name, value in (("host", url.host), ("port", url.port),
                                                       ("username", url.username)) if value]
    return shlex.join(["pg_dump", *options, "--format=custom", f"--file={out}", url.database or ""])


def check_out(out: Path, source: Path, force: bool) -> None:
    if out.exists() and out.resolve() == source.resolve():
        raise InputError(f"--out {out} is the store itself: back up to another file")
    if out.exists() and not force:
        raise InputError(f"{out} already exists: choose another --out, or pass --force to overwrite it")
    if out.exists() and not out.is_file():
        raise InputError(f"--out {out} is not a file")


def backup_sqlite(store: Store, out: Path, force: bool = False) -> dict[str, int]:
    """Copy the SQLite store to ``out`` (refused if it exists, unless ``force``); returns the row
    counts of the copy, which is checked with ``PRAGMA quick_check``."""
    source = sqlite_file(store.engine)
    if source is None:
        raise InputError(f"{shown(store.engine.url)} is not a SQLite file: nothing to back up")
    out = Path(out)
    check_out(out, source, force)
    partial = out.with_name(f".{out.name}.partial")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial.unlink(missing_ok=True)
        counts = _copy(store, partial)
        for leftover in (Path(f"{out}-wal"), Path(f"{out}-shm")):  # an old copy's WAL must not meet the new file
            leftover.unlink(missing_ok=True)
        os.replace(partial, out)
    except (OSError, sqlite3.Error) as exc:
        partial.unlink(missing_ok=True)
        raise InputError(f"cannot back up {shown(store.engine.url)} to {out}: {exc}") from None
    return counts


def _copy(store: Store, target_path: Path) -> dict[str, int]:
    raw = store.engine.raw_connection()
    try:
        target = sqlite3.connect(target_path)
        try:
            raw.driver_connection.backup(target)  # pages=-1: one step, one consistent snapshot
            target.execute("pragma journal_mode=delete")  # standalone: a single file, no -wal beside it
            check = target.execute("pragma quick_check").fetchone()[0]
            if check != "ok":
                raise InputError(f"the backup in {target_path} fails SQLite's quick_check: {check}")
            return {table: target.execute(f"select count(*) from {table}").fetchone()[0] for table in COUNTED}
        finally:
            target.close()
    finally:
        raw.close()
