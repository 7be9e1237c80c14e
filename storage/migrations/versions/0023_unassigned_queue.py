"""deliveries: a partial index over the queued rows without a sender

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 12:00:00

Issue 30: the dispatcher's hand-over asks on every tick whether a running campaign has
queued rows without a sender (``storage.queries.instances.has_unassigned``). SQLite
planned it on ``ix_deliveries_campaign_state`` and read every queued row (10 ms at 10k
queued, over 1 s at 1M; without statistics, its choice among that index and
``ix_deliveries_queue`` is a tie that the order of the indexes breaks).
``ix_deliveries_unassigned`` (campaign_id, state, sender, id; partial: ``state = 'queued'
AND sender IS NULL``) holds only those rows (none, most of the time); its columns repeat
the predicate's, so the check's three equalities match all of them and SQLite prefers it
(a covering probe); on PostgreSQL too, and the hand-over's read of those rows in id
order is a range of it.
"""

from alembic import op
import sqlalchemy as sa

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_UNASSIGNED = sa.text("state = 'queued' AND sender IS NULL")


def upgrade() -> None:
    op.create_index(
        "ix_deliveries_unassigned",
        "deliveries",
        ["campaign_id", "state", "sender", "id"],
        unique=False,
        sqlite_where=_UNASSIGNED,
        postgresql_where=_UNASSIGNED,
    )


def downgrade() -> None:
    op.drop_index("ix_deliveries_unassigned", table_name="deliveries")
