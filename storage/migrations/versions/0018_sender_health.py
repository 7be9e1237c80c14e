"""sender health: warm-up, health score, 463 timelock, known chats

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25 07:00:00

Sender care (issue 16): the warm-up override and today's weighted use, the health score
kept incrementally (score, as of when, level, cool-down end, counters of webhook signals
not yet folded in, how far coded status events were read), and the 463 reach-out
timelock on the ``instances`` row; ``sender_chats`` (primary key sender, target: the
"known chat" test of a claim is one probe) filled from the deliveries sent so far; and
``sender_health_changes``, the log of level changes.
"""
from alembic import op
import sqlalchemy as sa

from storage.types import UTCDateTime


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

_CODED = sa.text('error_code IS NOT NULL')
_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')

_COLUMNS = (
    ('warmup_off', sa.Boolean(), sa.text("'0'") , False),
    ('warmup_start_at', UTCDateTime(timezone=True), None, True),
    ('warmup_ramp', sa.String(length=200), None, True),
    ('warmup_day_key', sa.String(length=10), None, True),
    ('warmup_used', sa.Float(), sa.text("'0'"), False),
    ('health_score', sa.Float(), sa.text("'0'"), False),
    ('health_at', UTCDateTime(timezone=True), None, True),
    ('health_level', sa.String(length=16), sa.text("'low'"), False),
    ('health_resume_at', UTCDateTime(timezone=True), None, True),
    ('signal_disconnects', sa.Integer(), sa.text("'0'"), False),
    ('signal_logouts', sa.Integer(), sa.text("'0'"), False),
    ('signal_replies', sa.Integer(), sa.text("'0'"), False),
    ('signals_seen_at', UTCDateTime(timezone=True), None, True),
    ('lock_until', UTCDateTime(timezone=True), None, True),
    ('lock_parked', sa.Boolean(), sa.text("'0'"), False),
)


def upgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        for name, type_, default, nullable in _COLUMNS:
            batch_op.add_column(
                sa.Column(name, type_, server_default=default, nullable=nullable)
            )
    op.create_table(
        'sender_chats',
        sa.Column('instance_id', sa.String(length=64), nullable=False),
        sa.Column('target', sa.String(length=128), nullable=False),
        sa.Column('first_sent_at', UTCDateTime(timezone=True), nullable=True),
        sa.Column('known_at', UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('instance_id', 'target'),
    )
    op.create_table(
        'sender_health_changes',
        sa.Column('id', _ID, nullable=False),
        sa.Column('instance_id', sa.String(length=64), nullable=False),
        sa.Column('at', UTCDateTime(timezone=True), nullable=False),
        sa.Column('level_from', sa.String(length=16), nullable=False),
        sa.Column('level_to', sa.String(length=16), nullable=False),
        sa.Column('score', sa.Float(), nullable=False),
        sa.Column('reason', sa.String(length=500), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(
        'ix_sender_health_changes_instance_id',
        'sender_health_changes',
        ['instance_id'],
        unique=False,
    )
    op.create_index(
        'ix_status_events_instance_code',
        'status_events',
        ['instance_id', 'received_at'],
        unique=False,
        sqlite_where=_CODED,
        postgresql_where=_CODED,
    )
    # what the deliveries already prove: each (sender, target) messaged, known when a
    # message of that sender was delivered or read there, or answered
    op.execute(
        "INSERT INTO sender_chats (instance_id, target, first_sent_at, known_at) "
        "SELECT sender, target, MIN(sent_at), "
        "MIN(COALESCE(delivered_at, read_at, replied_at)) FROM deliveries "
        "WHERE sender IS NOT NULL AND sent_at IS NOT NULL GROUP BY sender, target"
    )


def downgrade() -> None:
    op.drop_index('ix_status_events_instance_code', table_name='status_events')
    op.drop_index('ix_sender_health_changes_instance_id', table_name='sender_health_changes')
    op.drop_table('sender_health_changes')
    op.drop_table('sender_chats')
    with op.batch_alter_table('instances', schema=None) as batch_op:
        for name, *_ in reversed(_COLUMNS):
            batch_op.drop_column(name)
