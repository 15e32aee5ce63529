"""The admin page, editable judgments, sign-ins that survive a reload, and gold questions:

- ``judges.active`` (a deactivated judge cannot sign in or get queries; their judgments stay);
- ``admins`` (organizers' admin tokens, hashed) and ``sign_ins`` (a browser's sign-in key, hashed);
- ``judgment_history``: every grade submitted, with its time; filled from ``judgments`` (one
  version per judgment, at its ``updated_at``);
- ``session_queries.gold`` and ``gold_grades``: queries with known grades.

Downgrading drops all of these: the judgments table keeps each judge's latest grade; gold
questions become ordinary queries of their session (their gold grades are lost).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-16 10:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    # Plain ALTER TABLE, not batch mode: on SQLite a batch copies and drops the table, and dropping
    # a parent table with foreign keys on deletes its children's rows (judgments, assignments).
    op.add_column('judges', sa.Column('active', sa.Boolean(), server_default=sa.true(), nullable=False))
    op.add_column('session_queries', sa.Column('gold', sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table(
        'admins',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('token_id', sa.String(length=32), nullable=False),
        sa.Column('token_salt', sa.String(length=64), nullable=False),
        sa.Column('token_hash', sa.String(length=128), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_admins')),
        sa.UniqueConstraint('name', name=op.f('uq_admins_name')),
        sa.UniqueConstraint('token_id', name=op.f('uq_admins_token_id')),
    )
    op.create_table(
        'sign_ins',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('key_hash', sa.String(length=64), nullable=False),
        sa.Column('judge_id', sa.Integer(), nullable=True),
        sa.Column('admin_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint('(judge_id is null) <> (admin_id is null)', name=op.f('ck_sign_ins_one_owner')),
        sa.ForeignKeyConstraint(['admin_id'], ['admins.id'], name=op.f('fk_sign_ins_admin_id_admins'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['judge_id'], ['judges.id'], name=op.f('fk_sign_ins_judge_id_judges'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_sign_ins')),
        sa.UniqueConstraint('key_hash', name=op.f('uq_sign_ins_key_hash')),
    )
    op.create_index(op.f('ix_sign_ins_admin_id'), 'sign_ins', ['admin_id'], unique=False)
    op.create_index(op.f('ix_sign_ins_judge_id'), 'sign_ins', ['judge_id'], unique=False)
    op.create_table(
        'judgment_history',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('judge_id', sa.Integer(), nullable=False),
        sa.Column('query_id', sa.Integer(), nullable=False),
        sa.Column('listing_id', sa.String(length=200), nullable=False),
        sa.Column('side', sa.String(length=8), nullable=False),
        sa.Column('grade', sa.Integer(), nullable=False),
        sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint('grade >= 0 and grade <= 3', name=op.f('ck_judgment_history_grade_range')),
        sa.CheckConstraint("side in ('left', 'right')", name=op.f('ck_judgment_history_side')),
        sa.ForeignKeyConstraint(['judge_id'], ['judges.id'], name=op.f('fk_judgment_history_judge_id_judges'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['query_id'], ['session_queries.id'], name=op.f('fk_judgment_history_query_id_session_queries'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_judgment_history')),
    )
    op.create_index(op.f('ix_judgment_history_judge_id'), 'judgment_history', ['judge_id'], unique=False)
    op.create_index(op.f('ix_judgment_history_query_id'), 'judgment_history', ['query_id'], unique=False)
    op.execute("insert into judgment_history (judge_id, query_id, listing_id, side, grade, recorded_at) "
               "select judge_id, query_id, listing_id, side, grade, updated_at from judgments order by id")
    op.create_table(
        'gold_grades',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('query_id', sa.Integer(), nullable=False),
        sa.Column('listing_id', sa.String(length=200), nullable=False),
        sa.Column('grade', sa.Integer(), nullable=False),
        sa.CheckConstraint('grade >= 0 and grade <= 3', name=op.f('ck_gold_grades_grade_range')),
        sa.ForeignKeyConstraint(['query_id'], ['session_queries.id'], name=op.f('fk_gold_grades_query_id_session_queries'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_gold_grades')),
        sa.UniqueConstraint('query_id', 'listing_id', name='uq_gold_grades_query_listing'),
    )
    op.create_index(op.f('ix_gold_grades_query_id'), 'gold_grades', ['query_id'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_index(op.f('ix_gold_grades_query_id'), table_name='gold_grades')
    op.drop_table('gold_grades')
    op.drop_index(op.f('ix_judgment_history_query_id'), table_name='judgment_history')
    op.drop_index(op.f('ix_judgment_history_judge_id'), table_name='judgment_history')
    op.drop_table('judgment_history')
    op.drop_index(op.f('ix_sign_ins_judge_id'), table_name='sign_ins')
    op.drop_index(op.f('ix_sign_ins_admin_id'), table_name='sign_ins')
    op.drop_table('sign_ins')
    op.drop_table('admins')
    op.drop_column('session_queries', 'gold')  # SQLite >= 3.35 drops a column in place
    op.drop_column('judges', 'active')
