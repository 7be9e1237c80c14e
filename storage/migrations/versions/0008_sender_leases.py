"""sender leases: workers share the senders with queued work

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 00:40:00

Workers that add up (issue 17 item 3): each ``gatecast worker`` keeps a heartbeat row in
``dispatch_workers`` (its id, alive until ``expires_at``) and leases a fair share of the
senders with queued work in ``sender_leases`` (one row per leased sender: who holds it,
until when), so a worker polls and claims only its own senders.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel
import storage.types


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'dispatch_workers',
        sa.Column('holder', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('expires_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('holder'),
    )
    op.create_table(
        'sender_leases',
        sa.Column('instance_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('holder', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('expires_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('instance_id'),
    )
    op.create_index('ix_sender_leases_holder', 'sender_leases', ['holder'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_sender_leases_holder', table_name='sender_leases')
    op.drop_table('sender_leases')
    op.drop_table('dispatch_workers')
