"""users, API keys, the audit log

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25 07:10:00

Named users with a role and an argon2 password hash; API keys per user (only their
SHA-256 stored) with a role and an optional expiry; dashboard sessions say which user
(and which key) opened them, so disabling a user, changing a password or revoking a key
ends them; the audit log of every change and sign-in (gatecast.web.roles,
campaigns/audit.py). Sessions of the owner key keep ``user_id`` NULL.
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel
import storage.types


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('users',
    sa.Column('id', _ID, nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('password_hash', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('password_changed_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name'),
    )
    op.create_table('api_keys',
    sa.Column('id', _ID, nullable=False),
    sa.Column('user_id', _ID, nullable=False),
    sa.Column('digest', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('prefix', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('label', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_used_at', storage.types.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('digest'),
    )
    op.create_index('ix_api_keys_user_id', 'api_keys', ['user_id'], unique=False)
    op.create_table('audit_log',
    sa.Column('id', _ID, nullable=False),
    sa.Column('at', storage.types.UTCDateTime(timezone=True), nullable=False),
    sa.Column('actor', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('action', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('target_type', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    sa.Column('target_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('status', sa.Integer(), nullable=True),
    sa.Column('detail', storage.types.JsonDoc, nullable=False),
    sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_audit_log_at', 'audit_log', ['at'], unique=False)
    op.create_index('ix_audit_log_actor', 'audit_log', ['actor', 'id'], unique=False)
    # sessions from before this revision were the owner key's: user_id stays NULL
    with op.batch_alter_table('dashboard_sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('user_id', _ID, nullable=True))
        batch_op.add_column(sa.Column('api_key_id', _ID, nullable=True))
        batch_op.create_index('ix_dashboard_sessions_user_id', ['user_id'], unique=False)
        batch_op.create_foreign_key(
            'fk_dashboard_sessions_user', 'users', ['user_id'], ['id'], ondelete='CASCADE'
        )
        batch_op.create_foreign_key(
            'fk_dashboard_sessions_api_key', 'api_keys', ['api_key_id'], ['id'],
            ondelete='CASCADE',
        )


def downgrade() -> None:
    with op.batch_alter_table('dashboard_sessions', schema=None) as batch_op:
        batch_op.drop_constraint('fk_dashboard_sessions_api_key', type_='foreignkey')
        batch_op.drop_constraint('fk_dashboard_sessions_user', type_='foreignkey')
        batch_op.drop_index('ix_dashboard_sessions_user_id')
        batch_op.drop_column('api_key_id')
        batch_op.drop_column('user_id')
    op.drop_index('ix_audit_log_actor', table_name='audit_log')
    op.drop_index('ix_audit_log_at', table_name='audit_log')
    op.drop_table('audit_log')
    op.drop_index('ix_api_keys_user_id', table_name='api_keys')
    op.drop_table('api_keys')
    op.drop_table('users')
