"""Alembic, configured in code: ``qcat db upgrade|downgrade`` need no ``alembic.ini``.

The migrations ship as the ``migrations`` package (``migrations/env.py`` and
``migrations/versions/``), so an installed qcat finds them next to its own code.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.exc import DBAPIError

from judging_app.store import connection_error, current_revision, make_engine


def migrations_dir() -> Path:
    import migrations

    return Path(migrations.__file__).resolve().parent


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        # env.py builds its own engine from this URL (with the store's SQLite settings).
        config.attributes["qcat_url"] = url
    return config


def script_directory() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


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

