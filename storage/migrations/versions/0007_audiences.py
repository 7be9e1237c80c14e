"""audiences: tags, folded attributes, saved segments, a campaign's audience

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 00:30:00

Issue 19 (part): contacts carry tags (``tags``, ``contact_tags``); each contact keeps its
attributes folded (no case, no accents) in ``contacts.folded`` for an audience's
``where``; saved segments (``segments``); a campaign's audience in force
(``campaigns.audience``) and its members, evaluated at the start by one INSERT ... SELECT
(``audience_members``). Existing contacts get their folded attributes here.
"""
import json
import unicodedata
from typing import Any

from alembic import op
import sqlalchemy as sa
import sqlmodel
from sqlalchemy.dialects import postgresql
from sqlalchemy import Text

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql')


def _fold(value: Any) -> str:
    # the fold of campaigns.segments.fold_value when this revision was written
    text = unicodedata.normalize('NFKD', str(value))
    return ''.join(ch for ch in text if not unicodedata.combining(ch)).casefold().strip()


def _backfill() -> None:
    conn = op.get_bind()
    contacts = sa.table(
        'contacts', sa.column('id', sa.BigInteger), sa.column('attributes', _JSON),
        sa.column('folded', _JSON),
    )
    last = 0
    while True:
        rows = conn.execute(
            sa.select(contacts.c.id, contacts.c.attributes)
            .where(contacts.c.id > last)
            .order_by(contacts.c.id)
            .limit(5000)
        ).all()
        if not rows:
            return
        conn.execute(
            contacts.update()
            .where(contacts.c.id == sa.bindparam('cid'))
            .values(folded=sa.bindparam('f')),
            [
                {'cid': r.id, 'f': {k: _fold(v) for k, v in (r.attributes or {}).items()}}
                for r in rows
            ],
        )
        last = rows[-1].id


def upgrade() -> None:
    op.create_table('tags',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name'),
    )
    op.create_table('contact_tags',
    sa.Column('tag_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('contact_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.ForeignKeyConstraint(['contact_id'], ['contacts.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tag_id'], ['tags.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tag_id', 'contact_id'),
    )
    op.create_index(op.f('ix_contact_tags_contact_id'), 'contact_tags', ['contact_id'], unique=False)
    op.create_table('segments',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('definition', _JSON, nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name'),
    )
    op.create_table('audience_members',
    sa.Column('campaign_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('contact_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.ForeignKeyConstraint(['campaign_id'], ['campaigns.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('campaign_id', 'contact_id'),
    )
    op.add_column('contacts', sa.Column('folded', _JSON, nullable=False, server_default=sa.text("'{}'")))
    op.add_column('campaigns', sa.Column('audience', _JSON, nullable=True))
    _backfill()


def downgrade() -> None:
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.drop_column('audience')
    with op.batch_alter_table('contacts', schema=None) as batch_op:
        batch_op.drop_column('folded')
    op.drop_table('audience_members')
    op.drop_table('segments')
    op.drop_index(op.f('ix_contact_tags_contact_id'), table_name='contact_tags')
    op.drop_table('contact_tags')
    op.drop_table('tags')
