"""audit log: the key that acted, and the values a change replaced

Revision ID: 0021
Revises: 0019
Create Date: 2026-12-07 05:20:00

Issue 27: an audit entry names the API key that acted (``key_id``: a user's key, or the
key a dashboard session was opened with; NULL for the owner key, a password session or
the command line) and, for a change whose old value matters, the values before and after
(``changes``: ``{"role": ["operator", "viewer"]}``; NULL when not recorded). Entries
written before keep both NULL.

(Written beside 0020 of a parallel branch: re-chain ``down_revision`` after 0020 when
both are merged.)
"""

from alembic import op
import sqlalchemy as sa

from storage.types import JsonDoc

revision = "0021"
down_revision = "0019"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("audit_log", sa.Column("key_id", _ID, nullable=True))
    op.add_column("audit_log", sa.Column("changes", JsonDoc, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("changes")
        batch.drop_column("key_id")
