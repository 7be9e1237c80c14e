"""reply rules: auto-replies to keywords, button taps and messages outside business hours

Revision ID: 0033
Revises: 0031
Create Date: 2026-12-08 01:20:00

Issue 32, item 3 (``campaigns.reply_rules``). ``reply_rules`` holds the rules;
``reply_rule_answers`` one row per incoming message a rule answered, unique per message
and written in the transaction that stores the answer, so nothing is answered twice;
``reply_rule_pauses`` when a person last answered a number from the inbox.
``inbound_messages.rules_due`` marks the messages the rules have yet to look at (the
messages stored before this revision are not due: no rule answers the past).
"""

import sqlalchemy as sa
from alembic import op

import storage.types
from storage.types import UTCDateTime

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

_DUE = sa.text("rules_due = true")


def upgrade() -> None:
    # a plain ADD COLUMN with a constant default: SQLite alters the table in place
    op.add_column(
        "inbound_messages",
        sa.Column("rules_due", sa.Boolean(), server_default="0", nullable=False),
    )
    op.create_index(
        "ix_inbound_messages_rules_due",
        "inbound_messages",
        ["id"],
        sqlite_where=_DUE,
        postgresql_where=_DUE,
    )
    op.create_table(
        "reply_rules",
        sa.Column("id", storage.types.BigId, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("keywords", storage.types.JsonDoc, nullable=False),
        sa.Column("match", sa.String(16), nullable=False),
        sa.Column("button_id", sa.String(256), nullable=True),
        sa.Column("hours", storage.types.JsonDoc, nullable=True),
        sa.Column("message", storage.types.JsonDoc, nullable=False),
        sa.Column("limit_hours", sa.Float(), nullable=False),
        sa.Column("pause_hours", sa.Float(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "reply_rule_answers",
        sa.Column("id", storage.types.BigId, nullable=False),
        sa.Column("inbound_id", storage.types.BigId, nullable=False),
        sa.Column("rule_id", storage.types.BigId, nullable=False),
        sa.Column("phone", sa.String(32), nullable=False),
        sa.Column("message_id", storage.types.BigId, nullable=False),
        sa.Column("answered_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("inbound_id"),
    )
    op.create_index(
        "ix_reply_rule_answers_phone",
        "reply_rule_answers",
        ["phone", "rule_id", "answered_at"],
    )
    op.create_table(
        "reply_rule_pauses",
        sa.Column("phone", sa.String(32), nullable=False),
        sa.Column("paused_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("phone"),
    )


def downgrade() -> None:
    op.drop_table("reply_rule_pauses")
    op.drop_index("ix_reply_rule_answers_phone", table_name="reply_rule_answers")
    op.drop_table("reply_rule_answers")
    op.drop_table("reply_rules")
    op.drop_index("ix_inbound_messages_rules_due", table_name="inbound_messages")
    with op.batch_alter_table("inbound_messages", schema=None) as batch_op:
        batch_op.drop_column("rules_due")
