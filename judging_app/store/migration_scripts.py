"""The judging store's migration scripts: where they are, Alembic's configuration and the head.

Alembic is configured in code, so ``qcat db upgrade|downgrade`` need no ``alembic.ini``. The
migrations ship as the ``qcat.migrations`` package (``migrations/env.py`` and
``migrations/versions/`` in the repository), so an installed qcat finds them next to its own code.
"""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory


def migrations_dir() -> Path:
    from qcat import migrations

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

