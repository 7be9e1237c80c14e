"""direct messages: a campaign of one message sent by POST /api/v1/messages

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07 20:05:00

Issue 32, item 5: a message to one recipient is a one-recipient campaign that the
dispatcher claims and paces like every other (``campaigns.direct_messages``).
``campaigns.direct`` leaves it out of the campaign lists and the overview;
``campaigns.message_metadata`` keeps the integrator's own JSON object, echoed in the
outbound webhook events about it. Issue 32, item 4: ``inbound_messages.handled_at``,
when an operator answered a reply or marked it handled (the inbox's ``handled`` filter).
"""

from alembic import op
import sqlalchemy as sa

import storage.types

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ADD COLUMNs (a constant default): SQLite alters the table in place instead of
    # copying it, and rows written by older code need not name ``direct``
    op.add_column(
        "campaigns", sa.Column("direct", sa.Boolean(), server_default="0", nullable=False)
    )
    op.add_column("campaigns", sa.Column("message_metadata", storage.types.JsonDoc, nullable=True))
    op.add_column(
        "inbound_messages",
        sa.Column("handled_at", storage.types.UTCDateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    with op.batch_alter_table("inbound_messages", schema=None) as batch_op:
        batch_op.drop_column("handled_at")
    with op.batch_alter_table("campaigns", schema=None) as batch_op:
        batch_op.drop_column("message_metadata")
        batch_op.drop_column("direct")
