"""contact search catches up in bulk: writes only queue the contacts they change

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 07:20:00

Migration 0011 kept the search's trigram indexes in the writing transaction: PostgreSQL
maintained three trigram GIN indexes on ``contacts`` for every inserted row, SQLite an FTS5
row per contact from a row trigger. An import of new contacts paid for them row by row:
about 14 us a row of PostgreSQL server time on top of roughly 10 us for the rest of the
import, and twice the time on SQLite (docs/benchmarks.md, "Search that catches up").

Now a write only queues the ids of the contacts it inserted or whose searched text
(``folded_name``, ``phone``, ``folded``) changed, in ``contact_search_pending``; the search
table is filled from the queue in bulk afterwards (``storage.queries.contact_search
.catch_up``), and a search also checks the queued contacts directly, so it never misses
one. Both dialects now have a ``contact_search`` table of the folded name, the phone and
the folded attribute values joined by U+001F: SQLite's FTS5 table (rowid = the contact's
id), PostgreSQL's plain table keyed by ``contact_id`` with a trigram GIN index per column
(when ``pg_trgm`` can be created). A deleted contact leaves both tables in its transaction.
"""

from alembic import op
import sqlalchemy as sa

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: the trigram indexes migration 0011 put on ``contacts`` (PostgreSQL)
OLD_TRIGRAM_INDEXES = (
    "ix_contacts_folded_name_trgm",
    "ix_contacts_phone_trgm",
    "ix_contacts_folded_trgm",
)
#: the search table's trigram indexes (PostgreSQL), name -> column
TRIGRAM_INDEXES = {
    "ix_contact_search_name_trgm": "name",
    "ix_contact_search_phone_trgm": "phone",
    "ix_contact_search_attrs_trgm": "attrs",
}

_PG_FUNCTIONS = [
    """
CREATE FUNCTION gatecast_search_queue_new() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_search_pending (contact_id) SELECT id FROM new_rows;
    RETURN NULL;
END $$""",
    """
CREATE FUNCTION gatecast_search_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_search_pending (contact_id)
    SELECT n.id FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.folded_name IS DISTINCT FROM o.folded_name OR n.phone IS DISTINCT FROM o.phone
       OR n.folded IS DISTINCT FROM o.folded
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$""",
    """
CREATE FUNCTION gatecast_search_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM contact_search WHERE contact_id IN (SELECT id FROM old_rows);
    DELETE FROM contact_search_pending WHERE contact_id IN (SELECT id FROM old_rows);
    RETURN NULL;
END $$""",
]
_PG_TRIGGERS = [
    "CREATE TRIGGER tr_contacts_search_insert AFTER INSERT ON contacts "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_search_queue_new()",
    "CREATE TRIGGER tr_contacts_search_update AFTER UPDATE ON contacts "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_search_queue_changed()",
    "CREATE TRIGGER tr_contacts_search_delete AFTER DELETE ON contacts "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_search_forget()",
]
# a new contact's id is new to the queue too (ids are never reused): a plain insert, a
# third of the cost of one with ON CONFLICT
#: PostgreSQL: the search row of every contact (the migration's one bulk fill)
_PG_FILL = (
    "INSERT INTO contact_search (contact_id, name, phone, attrs) SELECT id, folded_name, phone,"
    " coalesce((SELECT string_agg(value, chr(31)) FROM jsonb_each_text(folded)), '')"
    " FROM contacts"
)

_SQLITE_TRIGGERS = [
    "CREATE TRIGGER contacts_search_insert AFTER INSERT ON contacts BEGIN "
    "INSERT OR IGNORE INTO contact_search_pending (contact_id) VALUES (new.id); END",
    "CREATE TRIGGER contacts_search_update AFTER UPDATE OF folded_name, phone, folded ON contacts "
    "WHEN old.folded_name IS NOT new.folded_name OR old.phone IS NOT new.phone "
    "OR old.folded IS NOT new.folded BEGIN "
    "INSERT OR IGNORE INTO contact_search_pending (contact_id) VALUES (new.id); END",
    "CREATE TRIGGER contacts_search_delete AFTER DELETE ON contacts BEGIN "
    "DELETE FROM contact_search WHERE rowid = old.id; "
    "DELETE FROM contact_search_pending WHERE contact_id = old.id; END",
]
#: SQLite: migration 0011's triggers, restored by the downgrade
_SQLITE_ROW_0011 = (
    "INSERT INTO contact_search (rowid, name, phone, attrs) SELECT {row}.id, {row}.folded_name,"
    " {row}.phone, coalesce((SELECT group_concat(value, char(31)) FROM json_each({row}.folded)), '')"
)
_SQLITE_TRIGGERS_0011 = [
    "CREATE TRIGGER contacts_search_insert AFTER INSERT ON contacts BEGIN "
    + _SQLITE_ROW_0011.format(row="new") + "; END",
    "CREATE TRIGGER contacts_search_update AFTER UPDATE OF folded_name, phone, folded ON contacts "
    "BEGIN DELETE FROM contact_search WHERE rowid = old.id; "
    + _SQLITE_ROW_0011.format(row="new") + "; END",
    "CREATE TRIGGER contacts_search_delete AFTER DELETE ON contacts BEGIN "
    "DELETE FROM contact_search WHERE rowid = old.id; END",
]


def _has_trgm() -> bool:
    conn = op.get_bind()
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except sa.exc.DBAPIError:
        return False  # no pg_trgm (or no right to create it): the search scans
    return True


def upgrade() -> None:
    op.create_table(
        "contact_search_pending",
        sa.Column("contact_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sqlite_with_rowid=False,
    )
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        for name in OLD_TRIGRAM_INDEXES:
            conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
        op.create_table(
            "contact_search",
            sa.Column("contact_id", sa.BigInteger(), primary_key=True, autoincrement=False),
            sa.Column("name", sa.Text(), nullable=False),
            sa.Column("phone", sa.Text(), nullable=False),
            sa.Column("attrs", sa.Text(), nullable=False),
        )
        conn.exec_driver_sql(_PG_FILL)
        if _has_trgm():
            for name, column in TRIGRAM_INDEXES.items():
                conn.exec_driver_sql(
                    f"CREATE INDEX {name} ON contact_search USING gin ({column} gin_trgm_ops)"
                )
        for statement in _PG_FUNCTIONS + _PG_TRIGGERS:
            conn.exec_driver_sql(statement)
    else:
        for trigger in ("insert", "update", "delete"):
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS contacts_search_{trigger}")
        for statement in _SQLITE_TRIGGERS:
            conn.exec_driver_sql(statement)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        for trigger in ("insert", "update", "delete"):
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS tr_contacts_search_{trigger} ON contacts")
        for function in ("queue_new", "queue_changed", "forget"):
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS gatecast_search_{function}()")
        op.drop_table("contact_search")
        if _has_trgm():
            for name, expression in zip(
                OLD_TRIGRAM_INDEXES, ("folded_name", "phone", "(folded::text)"), strict=True
            ):
                conn.exec_driver_sql(
                    f"CREATE INDEX IF NOT EXISTS {name} ON contacts"
                    f" USING gin ({expression} gin_trgm_ops)"
                )
    else:
        for trigger in ("insert", "update", "delete"):
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS contacts_search_{trigger}")
        conn.exec_driver_sql(
            "DELETE FROM contact_search WHERE rowid IN"
            " (SELECT contact_id FROM contact_search_pending)"
        )
        conn.exec_driver_sql(
            _SQLITE_ROW_0011.format(row="contacts")
            + " FROM contacts WHERE id IN (SELECT contact_id FROM contact_search_pending)"
        )
        for statement in _SQLITE_TRIGGERS_0011:
            conn.exec_driver_sql(statement)
    op.drop_table("contact_search_pending")
