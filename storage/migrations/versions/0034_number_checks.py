"""number checks: whether a phone number is on the app, as the gateway said, and when

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-08 01:20:00

Issue 33 (item 2). A gateway with a number check (Evolution API's
``/chat/whatsappNumbers``) is asked before the first message to a number; the answer is
kept here per number (the target as deliveries store it) and asked again after
``scheduler.number_checks.MAX_AGE`` (decision 68).
"""

import sqlalchemy as sa
from alembic import op

from storage.types import UTCDateTime

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "number_checks",
        sa.Column("number", sa.String(64), nullable=False),
        sa.Column("on_app", sa.Boolean(), nullable=False),
        sa.Column("checked_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("number"),
    )


def downgrade() -> None:
    op.drop_table("number_checks")
