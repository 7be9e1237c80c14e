"""recipient time: each delivery's recipient zone; last sends per contact

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 04:00:00

``deliveries.recipient_tz``: the IANA zone a row is sent in when its campaign sends in
recipient time (``[schedule] recipient_timezone``), resolved once at materialisation
(NULL otherwise). ``ix_deliveries_zone_queue`` (campaign, recipient_tz, sender, due_at,
id; partial: queued rows with a zone): a claim takes, for each zone whose window is
open, a range of it, and the campaign's zones are read by a loose scan of it.
``ix_deliveries_contact_sent`` (contact_id, sent_at) replaces ``ix_deliveries_contact``:
the contact cooldown's "messaged since" is one range per contact (the sticky-sender
lookups use its prefix as before).
"""
from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

_ZONED_QUEUE = sa.text("state = 'queued' AND recipient_tz IS NOT NULL")


def upgrade() -> None:
    op.add_column('deliveries', sa.Column('recipient_tz', sa.String(length=64), nullable=True))
    op.create_index(
        'ix_deliveries_zone_queue',
        'deliveries',
        ['campaign_id', 'recipient_tz', 'sender', 'due_at', 'id'],
        unique=False,
        sqlite_where=_ZONED_QUEUE,
        postgresql_where=_ZONED_QUEUE,
    )
    op.create_index(
        'ix_deliveries_contact_sent', 'deliveries', ['contact_id', 'sent_at'], unique=False
    )
    op.drop_index('ix_deliveries_contact', table_name='deliveries')


def downgrade() -> None:
    op.create_index('ix_deliveries_contact', 'deliveries', ['contact_id'], unique=False)
    op.drop_index('ix_deliveries_contact_sent', table_name='deliveries')
    op.drop_index('ix_deliveries_zone_queue', table_name='deliveries')
    with op.batch_alter_table('deliveries') as batch:
        batch.drop_column('recipient_tz')
