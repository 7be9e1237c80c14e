"""replies know what they answer: button, row and quoted message ids

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 19:00:00

Issue 32 (item 1). ``inbound_messages.button_id``, ``row_id``, ``quoted_id``: the id of
the button or list row a person tapped and the id of the message their reply quotes
(``contextInfo.stanzaId``), which the event parser used to drop. ``deliveries``
``tapped_button_id``, ``tapped_row_id``, ``tapped_title``: the first button or row the
recipient tapped in answer to that delivery, for the report's columns and the tap rates
per button. All nullable: rows written before stay as they were (no tap known).
"""

from alembic import op
import sqlalchemy as sa

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

_INBOUND = (("button_id", 256), ("row_id", 256), ("quoted_id", 128))
_DELIVERIES = (("tapped_button_id", 256), ("tapped_row_id", 256), ("tapped_title", 256))


def upgrade() -> None:
    for name, length in _INBOUND:
        op.add_column("inbound_messages", sa.Column(name, sa.String(length=length), nullable=True))
    for name, length in _DELIVERIES:
        op.add_column("deliveries", sa.Column(name, sa.String(length=length), nullable=True))


def downgrade() -> None:
    # plain DROP COLUMN (SQLite 3.35+ too): a batch copy of ``deliveries`` would drop the
    # target search's triggers (0025)
    for name, _length in reversed(_DELIVERIES):
        op.drop_column("deliveries", name)
    for name, _length in reversed(_INBOUND):
        op.drop_column("inbound_messages", name)
