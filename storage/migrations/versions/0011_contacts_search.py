"""contact search: each contact's name folded, and the search's indexes

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 03:50:00

Issue 19 (contact management): a contact search matches the name with no case and no
accents, so each contact keeps its name folded (``contacts.folded_name``, written by
every write with ``campaigns.segments.fold_value``; existing contacts get theirs here).
On PostgreSQL the name, the phone and the folded attributes get trigram GIN indexes
(``pg_trgm``) when the extension can be created; without it the search scans (same
result, slower). On SQLite an FTS5 table with the trigram tokenizer (``contact_search``:
the folded name, the phone, the folded attribute values joined by U+001F; rowid = the
contact's id) is kept by triggers on ``contacts``, whoever writes (measured:
docs/benchmarks.md, ``bench/contact_search.py``).
"""

import unicodedata
from typing import Any

from alembic import op
import sqlalchemy as sa

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

#: the trigram indexes (PostgreSQL), name -> indexed expression
TRIGRAM_INDEXES = {
    "ix_contacts_folded_name_trgm": "folded_name",
    "ix_contacts_phone_trgm": "phone",
    "ix_contacts_folded_trgm": "(folded::text)",
}


def _fold(value: Any) -> str:
    # the fold of campaigns.segments.fold_value when this revision was written
    text = unicodedata.normalize("NFKD", str(value))
    return "".join(ch for ch in text if not unicodedata.combining(ch)).casefold().strip()


def _backfill() -> None:
    conn = op.get_bind()
    contacts = sa.table(
        "contacts",
        sa.column("id", sa.BigInteger),
        sa.column("name", sa.String),
        sa.column("folded_name", sa.String),
    )
    last = 0
    while True:
        rows = conn.execute(
            sa.select(contacts.c.id, contacts.c.name)
            .where(contacts.c.id > last, contacts.c.name != "")
            .order_by(contacts.c.id)
            .limit(5000)
        ).all()
        if not rows:
            return
        conn.execute(
            contacts.update()
            .where(contacts.c.id == sa.bindparam("cid"))
            .values(folded_name=sa.bindparam("f")),
            [{"cid": r.id, "f": _fold(r.name)} for r in rows],
        )
        last = rows[-1].id


def _trigram_indexes() -> None:
    conn = op.get_bind()
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except sa.exc.DBAPIError:
        return  # no pg_trgm (or no right to create it): the search scans
    for name, expression in TRIGRAM_INDEXES.items():
        conn.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS {name} ON contacts USING gin ({expression} gin_trgm_ops)"
        )


#: SQLite: the search table's row of contact ``{row}`` (``new``, or every ``contacts`` row)
_SQLITE_ROW = (
    "INSERT INTO contact_search (rowid, name, phone, attrs) SELECT {row}.id, {row}.folded_name,"
    " {row}.phone, coalesce((SELECT group_concat(value, char(31)) FROM json_each({row}.folded)), '')"
)
SQLITE_SEARCH = (
    "CREATE VIRTUAL TABLE contact_search USING fts5(name, phone, attrs, tokenize = 'trigram')",
    "CREATE TRIGGER contacts_search_insert AFTER INSERT ON contacts BEGIN "
    + _SQLITE_ROW.format(row="new") + "; END",
    "CREATE TRIGGER contacts_search_update AFTER UPDATE OF folded_name, phone, folded ON contacts "
    "BEGIN DELETE FROM contact_search WHERE rowid = old.id; "
    + _SQLITE_ROW.format(row="new") + "; END",
    "CREATE TRIGGER contacts_search_delete AFTER DELETE ON contacts BEGIN "
    "DELETE FROM contact_search WHERE rowid = old.id; END",
)


def _sqlite_search() -> None:
    conn = op.get_bind()
    for statement in SQLITE_SEARCH:
        conn.exec_driver_sql(statement)
    conn.exec_driver_sql(_SQLITE_ROW.format(row="contacts") + " FROM contacts")


def upgrade() -> None:
    op.add_column(
        "contacts",
        sa.Column("folded_name", sa.String(length=300), nullable=False, server_default=""),
    )
    _backfill()
    if op.get_bind().dialect.name == "postgresql":
        _trigram_indexes()
    else:
        _sqlite_search()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in TRIGRAM_INDEXES:
            op.execute(f"DROP INDEX IF EXISTS {name}")
    else:
        for trigger in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS contacts_search_{trigger}")
        op.execute("DROP TABLE IF EXISTS contact_search")
    with op.batch_alter_table("contacts", schema=None) as batch_op:
        batch_op.drop_column("folded_name")
