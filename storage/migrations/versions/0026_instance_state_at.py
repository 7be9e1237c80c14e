"""instances: when the connection state was last recorded

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07 19:00:00

A send's outcome is recorded after the send: a refusal ("relogin required") or a proof (an
accepted send) of a send that started before the state last changed (a reconnect, a
dropped connection's event) says nothing of the state now and is not applied (decision 48
in docs/architecture.md). ``updated_at`` moves with every pause, health change and
registration, so it cannot tell.
"""

import sqlalchemy as sa
from alembic import op

from storage.types import UTCDateTime

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("state_at", UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("state_at")
