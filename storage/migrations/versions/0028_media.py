"""media: uploaded image, video, audio and document files, served at signed URLs

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07 19:00:00

Issue 31, item 1: an operator uploads a file instead of typing a URL. Its bytes are kept
here (every process of a deployment serves them alike), with the type found by sniffing
them, and a random key per file that its signed public URLs (HMAC-SHA256 with an expiry,
``campaigns.media``) are made with. On PostgreSQL the bytes are stored uncompressed
(``STORAGE EXTERNAL``), so that serving reads a file a part at a time at the part's cost.
"""

from alembic import op
import sqlalchemy as sa

from storage.types import UTCDateTime

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "media",
        sa.Column("id", _ID, nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("content_type", sa.String(100), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("url_key", sa.String(64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_by", sa.String(100), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    if op.get_bind().dialect.name == "postgresql":
        # kept uncompressed (media files are compressed already): a part of the value is
        # then read from its own TOAST chunks, not by decompressing the whole file
        op.execute("ALTER TABLE media ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("media")
