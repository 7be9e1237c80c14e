"""campaigns: the hold last announced by the ``campaign.held`` webhook event

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 09:00:00

Issue 29: a running campaign's hold (``scheduler/holds.py``) is computed when asked; the
dispatcher stores the kind it last announced (``held_kind``, with its words, its end and
when) so that ``campaign.held`` is written once per change of kind (an outbox trigger on
``held_kind``, ``storage/outbox.py``). NULL: nothing held, or never announced.
"""

from alembic import op
import sqlalchemy as sa

from storage.types import UTCDateTime

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("campaigns", sa.Column("held_kind", sa.String(32), nullable=True))
    op.add_column("campaigns", sa.Column("held_words", sa.String(1000), nullable=True))
    op.add_column("campaigns", sa.Column("held_until", UTCDateTime(timezone=True), nullable=True))
    op.add_column("campaigns", sa.Column("held_at", UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("held_at")
        batch.drop_column("held_until")
        batch.drop_column("held_words")
        batch.drop_column("held_kind")
