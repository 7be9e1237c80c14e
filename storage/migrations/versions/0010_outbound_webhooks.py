"""outbound webhooks: endpoints, subscriptions, an outbox written by triggers

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 03:45:00

Signed webhooks to other systems (Standard Webhooks; decision "outbound webhooks" in
docs/architecture.md). ``webhook_endpoints`` holds each receiver (URL, secret, the events
it asked for, enabled or disabled); ``webhook_subscriptions`` one row per (event, enabled
endpoint). ``webhook_messages`` is the outbox: triggers on ``deliveries``,
``inbound_messages``, ``contacts``, ``campaigns`` and ``instances`` write one row per
subscribed endpoint in the transaction of the change that causes the event. Those
triggers exist only while someone subscribes (``storage.outbox`` creates and drops them
with the subscriptions), so this revision creates none; its downgrade drops any.
``webhook_attempts`` is each endpoint's delivery log.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel
import storage.types


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
_PENDING = "state = 'pending'"
#: the triggers ``storage.outbox`` creates while someone subscribes (and their functions)
_TRIGGERS = [
    ("tr_deliveries_outbox", "deliveries"),
    ("tr_inbound_messages_outbox", "inbound_messages"),
    ("tr_contacts_outbox", "contacts"),
    ("tr_campaigns_outbox", "campaigns"),
    ("tr_instances_outbox", "instances"),
]


def upgrade() -> None:
    op.create_table(
        'webhook_endpoints',
        sa.Column('id', _ID, nullable=False),
        sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
        sa.Column('secret', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column('events', storage.types.JsonDoc, nullable=False),
        sa.Column('description', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
        sa.Column('enabled', sa.Boolean(), nullable=False),
        sa.Column('disabled_reason', sqlmodel.sql.sqltypes.AutoString(length=500),
                  nullable=True),
        sa.Column('failing_since', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('consecutive_failures', sa.Integer(), nullable=False),
        sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_table(
        'webhook_subscriptions',
        sa.Column('event', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column('endpoint_id', _ID, nullable=False),
        sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('event', 'endpoint_id'),
    )
    op.create_table(
        'webhook_messages',
        sa.Column('id', _ID, nullable=False),
        sa.Column('endpoint_id', _ID, nullable=False),
        sa.Column('event', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column('recipient', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('data', sa.Text(), nullable=False),
        sa.Column('occurred_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('state', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('next_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('first_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('finished_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_webhook_messages_endpoint', 'webhook_messages', ['endpoint_id', 'id'])
    op.create_index('ix_webhook_messages_queue', 'webhook_messages', ['id'],
                    sqlite_where=sa.text(_PENDING), postgresql_where=sa.text(_PENDING))
    op.create_index('ix_webhook_messages_pending', 'webhook_messages',
                    ['endpoint_id', 'recipient', 'id'],
                    sqlite_where=sa.text(_PENDING), postgresql_where=sa.text(_PENDING))
    op.create_table(
        'webhook_attempts',
        sa.Column('id', _ID, nullable=False),
        sa.Column('endpoint_id', _ID, nullable=False),
        sa.Column('message_id', _ID, nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('status_code', sa.Integer(), nullable=True),
        sa.Column('error', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('duration_ms', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_webhook_attempts_endpoint', 'webhook_attempts', ['endpoint_id', 'id'])


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == 'postgresql'
    for name, table in _TRIGGERS:
        op.execute(f'DROP TRIGGER IF EXISTS {name} ON {table}' if postgres
                   else f'DROP TRIGGER IF EXISTS {name}')
        if postgres:
            op.execute(f'DROP FUNCTION IF EXISTS gatecast_{name}()')
    op.drop_index('ix_webhook_attempts_endpoint', table_name='webhook_attempts')
    op.drop_table('webhook_attempts')
    op.drop_index('ix_webhook_messages_pending', table_name='webhook_messages')
    op.drop_index('ix_webhook_messages_queue', table_name='webhook_messages')
    op.drop_index('ix_webhook_messages_endpoint', table_name='webhook_messages')
    op.drop_table('webhook_messages')
    op.drop_table('webhook_subscriptions')
    op.drop_table('webhook_endpoints')
