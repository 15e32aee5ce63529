"""Migrating the judging store: ``qcat db upgrade|downgrade`` run Alembic on a database.

Alembic's configuration and the migration scripts are found by
:mod:`judging_app.migration_scripts`.
"""

from __future__ import annotations

from alembic import command
from sqlalchemy.exc import DBAPIError

from judging_app.migration_scripts import alembic_config
from judging_app.store import connection_error, current_revision, make_engine


def _run(action, url: str | None, revision: str) -> tuple[str | None, str | None]:
    engine = make_engine(url)
    try:
        before = current_revision(engine)
        config = alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            action(config, revision)
        after = current_revision(engine)
    except DBAPIError as exc:
        raise connection_error(engine, exc) from None
    finally:
        engine.dispose()
    return before, after


def upgrade(url: str | None = None, revision: str = "head") -> tuple[str | None, str | None]:
    """Migrate up to ``revision``; returns the revisions before and after."""
    return _run(command.upgrade, url, revision)


def downgrade(url: str | None = None, revision: str = "-1") -> tuple[str | None, str | None]:
    """Migrate down to ``revision`` (default: one step; ``base`` drops every table)."""
    return _run(command.downgrade, url, revision)

