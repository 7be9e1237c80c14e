"""deliveries: a trigram index on ``target``, so a target search reads its matches only

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 15:50:00

Issue 30: a deliveries listing searched by a substring of the target (``target=`` of the
API, the dashboard's search) read every row of the campaign: at 1M rows one match cost
75x (SQLite) and 26x (PostgreSQL) its cost at 10k. Now:

- PostgreSQL: a trigram GIN index on ``deliveries.target`` (when ``pg_trgm`` can be
  created; without it the search reads the campaign's rows as before). GIN's pending
  list (``fastupdate``, the default) keeps materialisation's bulk inserts cheap.
- SQLite: ``deliveries_target``, an FTS5 trigram table over ``deliveries.target``
  (external content: no copy of the text; positions kept: with rowids only, a number
  of common trigrams such as ``000`` matched thousands of rows to recheck, 31 against
  3 ms at 200k rows, for 1 us a row more to fill). A per-row insert trigger into FTS5 costs about 30 us
  a row (measured), so the rows are indexed in bulk by the statements that insert them
  (``storage.queries.delivery_search.index_new``), up to the id kept in
  ``deliveries_target_mark``; a search uses the table only while every row is indexed
  (the mark is the highest id), else it reads the campaign's rows as before. Triggers
  keep it right for the rare rewrites: an erased target (``UPDATE OF target``) leaves
  the index in its transaction, and so does a deleted row (lowering the mark when the
  highest id goes, so a reused id is indexed again).
"""

from alembic import op
import sqlalchemy as sa

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

PG_INDEX = "ix_deliveries_target_trgm"

_SQLITE_UP = [
    "CREATE VIRTUAL TABLE deliveries_target USING fts5(target, content='deliveries',"
    " content_rowid='id', tokenize='trigram')",
    "INSERT INTO deliveries_target (deliveries_target) VALUES ('rebuild')",
    "CREATE TABLE deliveries_target_mark (one INTEGER PRIMARY KEY CHECK (one = 1),"
    " last_id INTEGER NOT NULL)",
    "INSERT INTO deliveries_target_mark (one, last_id)"
    " SELECT 1, coalesce(max(id), 0) FROM deliveries",
    "CREATE TRIGGER deliveries_target_update AFTER UPDATE OF target ON deliveries"
    " WHEN old.target IS NOT new.target"
    " AND old.id <= (SELECT last_id FROM deliveries_target_mark) BEGIN"
    " INSERT INTO deliveries_target (deliveries_target, rowid, target)"
    " VALUES ('delete', old.id, old.target);"
    " INSERT INTO deliveries_target (rowid, target) VALUES (new.id, new.target); END",
    "CREATE TRIGGER deliveries_target_delete AFTER DELETE ON deliveries"
    " WHEN old.id <= (SELECT last_id FROM deliveries_target_mark) BEGIN"
    " INSERT INTO deliveries_target (deliveries_target, rowid, target)"
    " VALUES ('delete', old.id, old.target);"
    " UPDATE deliveries_target_mark SET last_id = (SELECT coalesce(max(id), 0) FROM deliveries)"
    " WHERE last_id > (SELECT coalesce(max(id), 0) FROM deliveries); END",
]
_SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS deliveries_target_delete",
    "DROP TRIGGER IF EXISTS deliveries_target_update",
    "DROP TABLE IF EXISTS deliveries_target_mark",
    "DROP TABLE IF EXISTS deliveries_target",
]


def _has_trgm() -> bool:
    conn = op.get_bind()
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except sa.exc.DBAPIError:
        return False  # no pg_trgm (or no right to create it): the search reads the rows
    return True


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        if _has_trgm():
            conn.exec_driver_sql(
                f"CREATE INDEX {PG_INDEX} ON deliveries USING gin (target gin_trgm_ops)"
            )
        return
    for statement in _SQLITE_UP:
        conn.exec_driver_sql(statement)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {PG_INDEX}")
        return
    for statement in _SQLITE_DOWN:
        conn.exec_driver_sql(statement)
