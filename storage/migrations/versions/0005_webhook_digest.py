"""instance webhook digest

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 20:10:00

One webhook address for every process (issue 13): an instance keeps a digest (SHA-256,
hex) of the webhook URL gatecast last registered for it, so the leader can tell when
that is not the deployment's URL without storing the URL (it holds the secret).
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.add_column(sa.Column('webhook_digest', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.drop_column('webhook_digest')
