"""deployment settings: the defaults an admin sets on the Settings page

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07 23:05:00

Issue 31. ``settings`` holds one row per setting, its value as JSON: the default phone
region of imports, the default pace and sending window of new campaigns (decision 65).
Nothing is stored until an admin saves the page; until then the built-in defaults apply.
"""

import sqlalchemy as sa
from alembic import op

import storage.types
from storage.types import UTCDateTime

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "settings",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", storage.types.JsonDoc, nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("settings")
