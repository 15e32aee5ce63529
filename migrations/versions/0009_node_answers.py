"""Node answers in category sessions (issue 52): ``result_items.answer``, which of its list's
model's answers a category is: ``top`` (one of its top k: every item so far), ``top+node`` (one
of its top k and its node answer at the session's ``create-session --precision``), ``leaf-node``
or ``inner-node`` (its node answer only, a leaf or a department, aisle or other inner node, listed
after its top k). The code checks the value, as for ``judging_sessions.kind``.

Downgrading drops the column: refused while a node answer is stored (the categories shown only
as node answers would then read as top categories, and the report's figures would change).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29 10:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column('result_items', sa.Column('answer', sa.String(length=16), server_default='top', nullable=False))


def downgrade() -> None:
    """Downgrade schema."""
    count = op.get_bind().execute(sa.text("select count(*) from result_items where answer <> 'top'")).scalar()
    if count:
        raise CommandError(f"{count} node answer(s) of category sessions made with --precision are in the store; "
                           "below revision 0009 they would read as top categories: nothing was changed; export those "
                           "sessions (qcat judge export --gold), back the store up (qcat judge backup), delete them, "
                           "then downgrade")
    op.drop_column('result_items', 'answer')  # SQLite >= 3.35 drops a column in place
