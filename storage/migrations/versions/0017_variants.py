"""variants: A/B variants per delivery, the A/B pick, the identical-content guard

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25 07:00:00

Issue 16 (items 4 and 6). ``deliveries.variant``: the name of the message variant a
recipient got (``[[message.variants]]``; NULL without variants, or while an A/B test's
rest waits for its winner). ``campaigns.ab_pick``: the winner an A/B test picked, when,
by which rate and the rates it saw (NULL until then). ``instances.body_digest``,
``body_run``, ``body_at``: the identical-content guard's state per sender (the digest of
the last body claimed, how many identical ones in a row, when the last was claimed), so
the guard reads one row per sender and never the history.
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

import storage.types


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql')


def upgrade() -> None:
    op.add_column('deliveries', sa.Column('variant', sa.String(length=40), nullable=True))
    op.add_column('campaigns', sa.Column('ab_pick', _JSON, nullable=True))
    op.add_column('instances', sa.Column('body_digest', sa.String(length=32), nullable=True))
    op.add_column(
        'instances', sa.Column('body_run', sa.Integer(), nullable=False, server_default='0')
    )
    op.add_column(
        'instances', sa.Column('body_at', storage.types.UTCDateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('body_at')
        batch.drop_column('body_run')
        batch.drop_column('body_digest')
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('ab_pick')
    with op.batch_alter_table('deliveries') as batch:
        batch.drop_column('variant')
