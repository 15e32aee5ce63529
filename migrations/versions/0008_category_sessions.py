"""Category sessions (issue 39): ``judging_sessions.kind``, ``results`` for every session so far
(judges grade two search result lists) or ``categories`` (judges grade the categories one or two
classifiers propose for a query). The code checks the value (a CHECK constraint cannot be added to
an existing SQLite table in place).

Downgrading drops the column: refused while a category session exists (it would turn into a
result session that no longer means what it says).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 09:30:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op
from alembic.util import CommandError

# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.add_column('judging_sessions', sa.Column('kind', sa.String(length=16), server_default='results', nullable=False))


def downgrade() -> None:
    """Downgrade schema."""
    count = op.get_bind().execute(sa.text("select count(*) from judging_sessions where kind = 'categories'")).scalar()
    if count:
        raise CommandError(f"{count} category session(s) in the store would read as result sessions below revision "
                           "0008: nothing was changed; export them (qcat judge export --gold), back the store up (qcat "
                           "judge backup), delete them (delete from judging_sessions where kind = 'categories'), then "
                           "downgrade")
    op.drop_column('judging_sessions', 'kind')  # SQLite >= 3.35 drops a column in place
