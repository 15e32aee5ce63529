"""Time per judgment as the grading panel measured it:

- ``assignments.active_seconds``: the seconds the judge spent on the query with the panel in
  front of them, each gap of inactivity longer than the panel's idle cap counted as the cap (a
  query left open over a break no longer counts the break). NULL for queries finished before
  this revision, and for skips; the report then falls back on ``finished_at - created_at``.

Downgrading drops the column (the times measured are lost).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 18:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column('assignments', sa.Column('active_seconds', sa.Float(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_column('assignments', 'active_seconds')  # SQLite >= 3.35 drops a column in place
