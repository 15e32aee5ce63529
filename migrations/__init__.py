"""Alembic environment and versions of the judging store (see judging_app.migrate)."""
