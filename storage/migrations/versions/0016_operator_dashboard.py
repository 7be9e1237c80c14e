"""operator dashboard: test sends, archived and deleted campaigns, replies' deliveries

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25 07:10:00

``test_sends``: one row per test send (a campaign's message sent now to one number or
group), with its own state moved by the gateway's status events; never a delivery row, so
a campaign's counts, reports, daily caps and outbound webhooks never see it.
``campaigns.archived_at`` (hidden from the default list; reversible) and
``campaigns.deleted_at`` (a soft delete: the rows stay, reports still read them).
``inbound_messages.delivery_id``: the delivery the reply window matched an incoming
message to, so the replies inbox filters by campaign (NULL for messages stored before);
``ix_inbound_messages_received`` (received_at, id): the inbox's newest-first pages.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel
import storage.types


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table(
        'test_sends',
        sa.Column('id', _ID, nullable=False),
        sa.Column('campaign_id', _ID, nullable=False),
        sa.Column('target', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('contact_id', _ID, nullable=True),
        sa.Column('sender', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('state', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('message_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column('content', storage.types.JsonDoc, nullable=False),
        sa.Column('error', sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=True),
        sa.Column('error_code', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column('opt_out_overridden', sa.Boolean(), nullable=False),
        sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('sent_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('delivered_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('read_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('failed_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['campaign_id'], ['campaigns.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_test_sends_campaign_id', 'test_sends', ['campaign_id'], unique=False)
    op.create_index('ix_test_sends_message_id', 'test_sends', ['message_id'], unique=False)
    for column in ('archived_at', 'deleted_at'):  # plain ADD COLUMN: triggers stay
        op.add_column(
            'campaigns', sa.Column(column, storage.types.UTCDateTime(timezone=True), nullable=True)
        )
    op.add_column('inbound_messages', sa.Column('delivery_id', _ID, nullable=True))
    op.create_index('ix_inbound_messages_delivery_id', 'inbound_messages', ['delivery_id'],
                    unique=False)
    op.create_index('ix_inbound_messages_received', 'inbound_messages', ['received_at', 'id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_inbound_messages_received', table_name='inbound_messages')
    op.drop_index('ix_inbound_messages_delivery_id', table_name='inbound_messages')
    with op.batch_alter_table('inbound_messages') as batch:
        batch.drop_column('delivery_id')
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('deleted_at')
        batch.drop_column('archived_at')
    op.drop_index('ix_test_sends_message_id', table_name='test_sends')
    op.drop_index('ix_test_sends_campaign_id', table_name='test_sends')
    op.drop_table('test_sends')
