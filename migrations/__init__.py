"""Alembic environment and versions of the judging store (see qcat.judging.store.migrate)."""
