"""A session's display name: what judges see instead of its name, which may tell them which models
are compared (``judging_sessions.display_name``; NULL shows as "Session ID").

Downgrading drops the column (the display names are lost; the sessions and their names stay).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-09 10:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('judging_sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('display_name', sa.String(length=200), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    # In place (SQLite >= 3.35), not batch mode: a batch copies and drops judging_sessions, and
    # dropping it with foreign keys on would delete every session's queries.
    op.drop_column('judging_sessions', 'display_name')
