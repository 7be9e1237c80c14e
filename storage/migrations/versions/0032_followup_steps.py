"""follow-up steps: a step's sends are a hidden campaign of the campaign they follow

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-08 01:30:00

Issue 32, item 2 (decision 70). ``campaigns.step_of`` and ``campaigns.step``: a follow-up
step's sends live in a hidden campaign of their own (one per campaign and step, the
unique index ``uq_campaign_step``), so ``uq_delivery_target`` (campaign, target) is the
idempotency key of a step's send to a contact: an evaluation interrupted and run again
never makes a second row. Plain ADD COLUMNs: ``deliveries`` is not copied.
"""

import sqlalchemy as sa
from alembic import op

import storage.types

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("campaigns", sa.Column("step_of", storage.types.BigId, nullable=True))
    op.add_column("campaigns", sa.Column("step", sa.Integer(), nullable=True))
    op.create_index("uq_campaign_step", "campaigns", ["step_of", "step"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_campaign_step", table_name="campaigns")
    op.drop_column("campaigns", "step")
    op.drop_column("campaigns", "step_of")
