"""outbound webhooks: a secret rotated with an overlap, message ids unique across databases

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-07 22:30:00

Issue 34, item 3. ``webhook_endpoints`` keeps the secret it had before its last rotation
and until when it still signs (both signatures are sent meanwhile, as Standard Webhooks
allows). ``webhook_messages.webhook_id`` is the ``webhook-id`` header: a random id given
once (at the first claim, or when a test event is written) and kept on every retry and
replay; ``msg_<row id>`` restarted at ``msg_1`` on a new database, and receivers that
deduplicate by id dropped the new events. Messages already stored keep the id they were
sent with (``msg_<row id>``).
"""

import sqlalchemy as sa
from alembic import op

from storage.types import UTCDateTime

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("webhook_endpoints", sa.Column("previous_secret", sa.String(100), nullable=True))
    op.add_column(
        "webhook_endpoints",
        sa.Column("previous_secret_until", UTCDateTime(timezone=True), nullable=True),
    )
    op.add_column("webhook_messages", sa.Column("webhook_id", sa.String(40), nullable=True))
    op.execute("UPDATE webhook_messages SET webhook_id = 'msg_' || CAST(id AS VARCHAR(20))")
    op.create_index(
        "ix_webhook_messages_webhook_id", "webhook_messages", ["webhook_id"], unique=True
    )


def downgrade() -> None:
    # plain DROP COLUMN (SQLite 3.35+ too): a batch copy of ``webhook_endpoints`` drops
    # the old table, and its ON DELETE CASCADE took every message and attempt with it
    op.drop_index("ix_webhook_messages_webhook_id", table_name="webhook_messages")
    op.drop_column("webhook_messages", "webhook_id")
    op.drop_column("webhook_endpoints", "previous_secret_until")
    op.drop_column("webhook_endpoints", "previous_secret")
