"""contact search queue by range: a PostgreSQL import queues its new contacts as one row

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25 11:30:00

Migration 0014's statement trigger queued every contact an import inserted, a row each
in ``contact_search_pending``: about 1.1 us a row of PostgreSQL server time, a sixth of
what the import's own writes cost. An import that inserts its new contacts with the
per-row triggers off (``storage.queries.contacts``) now queues them as one range,
``contact_search_pending_ranges`` (first id, last id); the catching up unfolds it into the
queue a batch at a time, and a search checks a range's contacts as it does the queue's.
"""

from alembic import op
import sqlalchemy as sa

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "contact_search_pending_ranges",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("first_id", _ID, nullable=False),
        sa.Column("last_id", _ID, nullable=False),
    )


def downgrade() -> None:
    conn = op.get_bind()
    insert = "INSERT OR IGNORE INTO" if conn.dialect.name == "sqlite" else "INSERT INTO"
    conflict = "" if conn.dialect.name == "sqlite" else " ON CONFLICT DO NOTHING"
    conn.exec_driver_sql(  # what the ranges hold goes back to the queue, nothing is lost
        f"{insert} contact_search_pending (contact_id) SELECT c.id FROM contacts c"
        " JOIN contact_search_pending_ranges r ON c.id BETWEEN r.first_id AND r.last_id"
        + conflict
    )
    op.drop_table("contact_search_pending_ranges")
