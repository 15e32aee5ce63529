"""Migrating the judging store: ``qcat db upgrade|downgrade`` run Alembic on a database.

Alembic's configuration and the migration scripts are found by
:mod:`qcat.judging.store.migration_scripts`.
"""

from __future__ import annotations

from alembic import command
from alembic.script.revision import RevisionError
from alembic.util import CommandError
from sqlalchemy import inspect
from sqlalchemy.exc import DBAPIError

from qcat.errors import InputError
from qcat.judging.store.connection import connection_error, current_revision, make_engine, shown
from qcat.judging.store.migration_scripts import alembic_config, script_directory


class DataLossRefused(InputError):
    """A downgrade would drop tables that hold rows, and dropping them was not confirmed."""


def _run(action, url: str | None, revision: str, drop_data: bool = True,
         other_tables: bool = False) -> tuple[str | None, str | None]:
    """Run ``action`` to ``revision`` in one transaction; roll it back (and raise
    :class:`DataLossRefused`) when it would drop tables holding rows and ``drop_data`` is false.
    A database that holds tables but no qcat migration history (another application's) is refused
    unless ``other_tables``."""
    engine = make_engine(url)
    try:
        before = current_revision(engine)
        if action is command.downgrade and before is None:
            raise InputError(f"{shown(engine.url)} is already at base (no judging tables): nothing to downgrade")
        config = alembic_config()
        with engine.begin() as connection:
            rows = row_counts(connection)
            if before is None and rows and not other_tables:
                raise InputError(foreign_tables_message(engine, rows))
            config.attributes["connection"] = connection
            action(config, revision)
            lost = {table: n for table, n in rows.items() if n and table not in table_names(connection)}
            if lost and not drop_data:
                raise DataLossRefused(data_loss_message(engine, before, revision, lost))  # rolls the transaction back
        after = current_revision(engine)
    except (CommandError, RevisionError) as exc:
        raise InputError(f"cannot migrate {shown(engine.url)} to revision {revision!r}: {_first_line(exc)} "
                         f"(revisions: {', '.join(known_revisions())}, base, head, or a step such as -1)") from None
    except DBAPIError as exc:
        raise connection_error(engine, exc) from None
    finally:
        engine.dispose()
    return before, after


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def known_revisions() -> list[str]:
    return sorted(script.revision for script in script_directory().walk_revisions())


def table_names(connection) -> set[str]:
    return set(inspect(connection).get_table_names()) - {"alembic_version"}


def row_counts(connection) -> dict[str, int]:
    """Rows per table of the store (table names come from the database, never from the user)."""
    preparer = connection.dialect.identifier_preparer
    return {table: connection.exec_driver_sql(f"select count(*) from {preparer.quote(table)}").scalar()
            for table in sorted(table_names(connection))}


def data_loss_message(engine, before: str | None, revision: str, lost: dict[str, int]) -> str:
    tables = ", ".join(f"{table} {n:,}" for table, n in sorted(lost.items(), key=lambda item: -item[1]))
    return (f"downgrading {shown(engine.url)} from {before} to {revision!r} would drop {len(lost)} table{'s' * (len(lost) > 1)} holding "
            f"{sum(lost.values()):,} row{'s' * (sum(lost.values()) > 1)} ({tables}): nothing was changed; back the store up first "
            f"(`qcat judge backup`) and pass --yes to drop them")


def foreign_tables_message(engine, rows: dict[str, int]) -> str:
    names = ", ".join(sorted(rows)[:5]) + (f" and {len(rows) - 5:,} more" if len(rows) > 5 else "")
    return (f"{shown(engine.url)} already holds {len(rows):,} table{'s' * (len(rows) > 1)} ({names}) but no qcat "
            f"migration history: it looks like another application's database. Give the judging store a database "
            f"of its own, or pass --allow-other-tables to add qcat's tables beside them; nothing was changed")


def upgrade(url: str | None = None, revision: str = "head", other_tables: bool = False) -> tuple[str | None, str | None]:
    """Migrate up to ``revision``; returns the revisions before and after. A database holding
    tables but no qcat history is refused unless ``other_tables``."""
    return _run(command.upgrade, url, revision, other_tables=other_tables)


def downgrade(url: str | None = None, revision: str = "-1", drop_data: bool = False) -> tuple[str | None, str | None]:
    """Migrate down to ``revision`` (default: one step; ``base`` drops every table). Refused with
    :class:`DataLossRefused` when tables that would be dropped hold rows, unless ``drop_data``."""
    return _run(command.downgrade, url, revision, drop_data)
