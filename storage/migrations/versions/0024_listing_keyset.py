"""deliveries: the campaign's rows in id order, for the listings' cursors

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 12:00:00

Issue 30: the deliveries listing walks a campaign's rows by id from a cursor (decision 39
in docs/architecture.md). ``ix_deliveries_campaign_state`` orders a campaign's rows by
state first, so a page read every row of the campaign and sorted them (SQLite: a temp
b-tree of the whole campaign for the last page); ``ix_deliveries_campaign_id``
(campaign_id, id) makes any page one index range.
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_deliveries_campaign_id", "deliveries", ["campaign_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_campaign_id", table_name="deliveries")
