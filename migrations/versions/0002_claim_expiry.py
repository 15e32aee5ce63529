"""Claims that expire: ``assignments.active_at`` (when the judge last had the query shown or acted
on it) and the ``released`` assignment state (a claim given up by expiry or by
``qcat judge release``: it no longer counts towards the query's judges, and the judge may still
submit grades for it).

Downgrading turns released assignments into skipped ones (neither holds a claim, so the
``claims`` counters stay right; the judge does not get the query again) and drops ``active_at``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 10:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0002'
down_revision: Union[str, Sequence[str], None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

OLD_STATES = "status in ('open', 'done', 'skipped')"
NEW_STATES = "status in ('open', 'done', 'skipped', 'released')"


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('active_at', sa.DateTime(timezone=True), nullable=True))
    op.execute("update assignments set active_at = created_at")
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.alter_column('active_at', existing_type=sa.DateTime(timezone=True), nullable=False)
        batch_op.drop_constraint(op.f('ck_assignments_status'), type_='check')
        batch_op.create_check_constraint(op.f('ck_assignments_status'), NEW_STATES)


def downgrade() -> None:
    """Downgrade schema."""
    op.execute("update assignments set status = 'skipped' where status = 'released'")
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_assignments_status'), type_='check')
        batch_op.create_check_constraint(op.f('ck_assignments_status'), OLD_STATES)
        batch_op.drop_column('active_at')
