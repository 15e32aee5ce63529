"""The brand and price of each listing shown (``result_items.brand`` and ``.price``), copied from
the catalog at session creation so that the app shows them on the listing cards. NULL where the
catalog does not know them, and for the listings of sessions created before this migration.

Downgrading drops both columns (the listings and their grades stay).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-09 11:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('result_items', schema=None) as batch_op:
        batch_op.add_column(sa.Column('brand', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('price', sa.Float(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('result_items', schema=None) as batch_op:
        batch_op.drop_column('price')
        batch_op.drop_column('brand')
