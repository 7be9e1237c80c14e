"""flat cost indexes: the queue in claim order, ban signals, event retention

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 21:15:00

Flat cost as campaigns and history grow (issue 17 item 2): the queued rows of a campaign
in claim order (campaign, sender, due_at, id; partial: ``state = 'queued'``), so a claim,
a sender's next due row and the senders with queued rows are index ranges; a sender's
rows in flight (partial: ``state = 'sending'``), which its daily cap counts; status events
with an error code by instance and receipt (partial), so the ban-signal (463) check is one
index probe per sender; applied status events by receipt time (replacing the index on
``applied`` alone), so the inbox finds recent unapplied events and retention the oldest
applied ones without a scan.
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

_QUEUED = sa.text("state = 'queued'")
_SENDING = sa.text("state = 'sending'")
_WITH_CODE = sa.text("error_code IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        'ix_deliveries_queue',
        'deliveries',
        ['campaign_id', 'sender', 'due_at', 'id'],
        unique=False,
        sqlite_where=_QUEUED,
        postgresql_where=_QUEUED,
    )
    op.create_index(
        'ix_deliveries_in_flight',
        'deliveries',
        ['sender', 'sent_at'],
        unique=False,
        sqlite_where=_SENDING,
        postgresql_where=_SENDING,
    )
    op.create_index(
        'ix_status_events_code',
        'status_events',
        ['error_code', 'instance_id', 'received_at'],
        unique=False,
        sqlite_where=_WITH_CODE,
        postgresql_where=_WITH_CODE,
    )
    op.create_index(
        'ix_status_events_applied_received',
        'status_events',
        ['applied', 'received_at'],
        unique=False,
    )
    op.drop_index('ix_status_events_applied', table_name='status_events')


def downgrade() -> None:
    op.create_index('ix_status_events_applied', 'status_events', ['applied'], unique=False)
    op.drop_index('ix_status_events_applied_received', table_name='status_events')
    op.drop_index('ix_status_events_code', table_name='status_events')
    op.drop_index('ix_deliveries_in_flight', table_name='deliveries')
    op.drop_index('ix_deliveries_queue', table_name='deliveries')
