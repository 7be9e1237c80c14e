"""dashboard sessions

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 19:10:00.000000

The server-side records of dashboard sign-ins (gatecast.web.sessions): signing out
deletes the record, so a copied cookie is refused afterwards.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel
import storage.types


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('dashboard_sessions',
    sa.Column('id_digest', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('key_digest', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id_digest')
    )
    with op.batch_alter_table('dashboard_sessions', schema=None) as batch_op:
        batch_op.create_index('ix_dashboard_sessions_expires', ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('dashboard_sessions', schema=None) as batch_op:
        batch_op.drop_index('ix_dashboard_sessions_expires')

    op.drop_table('dashboard_sessions')
