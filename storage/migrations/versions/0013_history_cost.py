"""history cost: unapplied status events by message id (partial)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 04:00:00

Dispatch with 10M events of history (issue 17): after every recorded batch the
dispatcher looks up the unapplied status events of the message ids it just recorded
(events that raced their send). Through ``uq_status_event`` that is one probe per
message id into an index of every event ever stored (10M events: about 500 MB, four times
PostgreSQL's default shared buffers), each on a random leaf page. The partial index
holds only the unapplied events (a few), so the lookup reads a page or two whatever the
history.
"""
from alembic import op
import sqlalchemy as sa


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

_UNAPPLIED = sa.text("applied = false")


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return  # SQLite keeps its lookup through uq_status_event (its planner would pick
        # ix_status_events_applied_received over a partial index here)
    op.create_index(
        'ix_status_events_unapplied',
        'status_events',
        ['message_id'],
        unique=False,
        postgresql_where=_UNAPPLIED,
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.drop_index('ix_status_events_unapplied', table_name='status_events')
