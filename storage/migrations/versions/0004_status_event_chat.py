"""status event chat, delivery attempt time

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 19:20:00

Evidence settles ambiguity (issue 13): a status event keeps the chat it was about (the
recipient, as a delivery's target: ``+<digits>`` or a group id), indexed to find the
events of an ``unknown`` delivery's recipient; a delivery keeps when its last attempt
started (``attempted_at``), the start of the window such evidence must fall in.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel
import storage.types


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('status_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('chat', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True))
        batch_op.create_index('ix_status_events_chat', ['chat', 'instance_id'], unique=False)
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attempted_at', storage.types.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.drop_column('attempted_at')
    with op.batch_alter_table('status_events', schema=None) as batch_op:
        batch_op.drop_index('ix_status_events_chat')
        batch_op.drop_column('chat')
