"""Result lists from any search system, and the admin page's disagreement queue:

- ``result_items.image_url`` and ``.link``: the listing's picture and page, when the imported
  result lists carry them (NULL otherwise, and for the listings of earlier sessions);
- ``session_queries.extra_judges``: judgments asked for beyond the session's judges per query (an
  admin sent a disagreement back for another judgment);
- ``query_reviews``: every action on a disagreement (sent back; settled, with the grade an admin
  gave a listing), kept as history;
- ``session_judges``: a session's judges, when it names them (a session naming none is open to
  every judge, as every session was before).

Downgrading drops all of these (the judgments stay; settled grades and send-backs are lost).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 02:30:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    # Plain ALTER TABLE, not batch mode (see 0005: a batch on SQLite drops and copies the table).
    op.add_column('result_items', sa.Column('image_url', sa.Text(), nullable=True))
    op.add_column('result_items', sa.Column('link', sa.Text(), nullable=True))
    op.add_column('session_queries', sa.Column('extra_judges', sa.Integer(), server_default='0', nullable=False))
    op.create_table(
        'query_reviews',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('query_id', sa.Integer(), nullable=False),
        sa.Column('admin_id', sa.Integer(), nullable=True),
        sa.Column('action', sa.String(length=16), nullable=False),
        sa.Column('listing_id', sa.String(length=200), nullable=True),
        sa.Column('grade', sa.Integer(), nullable=True),
        sa.Column('note', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("action in ('sent_back', 'settled')", name=op.f('ck_query_reviews_action')),
        sa.CheckConstraint('grade is null or (grade >= 0 and grade <= 3)', name=op.f('ck_query_reviews_grade_range')),
        sa.ForeignKeyConstraint(['admin_id'], ['admins.id'], name=op.f('fk_query_reviews_admin_id_admins'),
                                ondelete='SET NULL'),
        sa.ForeignKeyConstraint(['query_id'], ['session_queries.id'], name=op.f('fk_query_reviews_query_id_session_queries'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_query_reviews')),
    )
    op.create_index(op.f('ix_query_reviews_query_id'), 'query_reviews', ['query_id'], unique=False)
    op.create_table(
        'session_judges',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('session_id', sa.Integer(), nullable=False),
        sa.Column('judge_id', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['judge_id'], ['judges.id'], name=op.f('fk_session_judges_judge_id_judges'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['session_id'], ['judging_sessions.id'],
                                name=op.f('fk_session_judges_session_id_judging_sessions'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_session_judges')),
        sa.UniqueConstraint('session_id', 'judge_id', name='uq_session_judges_session_judge'),
    )
    op.create_index(op.f('ix_session_judges_session_id'), 'session_judges', ['session_id'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_index(op.f('ix_session_judges_session_id'), table_name='session_judges')
    op.drop_table('session_judges')
    op.drop_index(op.f('ix_query_reviews_query_id'), table_name='query_reviews')
    op.drop_table('query_reviews')
    op.drop_column('session_queries', 'extra_judges')  # SQLite >= 3.35 drops a column in place
    op.drop_column('result_items', 'link')
    op.drop_column('result_items', 'image_url')
