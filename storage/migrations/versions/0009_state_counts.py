"""state counts and counters kept by triggers

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 00:40:00

A campaign's delivery state counts (``campaign_state_counts``) and the monitoring
counters (``counters``: sends by outcome, webhook events by kind) are kept exact by
triggers on ``deliveries``, ``status_events`` and ``inbound_messages``, in the same
transaction as every change, whatever statement makes it (decision 15 in
docs/architecture.md). Reading a campaign's counts is a sum over a few rows instead of a
count of its deliveries; a counter never goes down when history is pruned.

PostgreSQL: statement-level triggers over transition tables (one grouped upsert per
statement, however many rows it changed); each backend adds into its own ``slot``
(``pg_backend_pid()``), so concurrent transactions never wait on one another's count
rows (and never deadlock on them); ``storage.queries.tallies.fold`` folds the slots into
slot 0. SQLite (one writer at a time): row triggers into slot 0.

The existing rows are counted here (backfill) after the triggers exist, in the same
transaction.
"""
from alembic import op
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

#: counter names: ``sends_accepted`` (a message id came back: ``sent_at`` set),
#: ``sends_ambiguous`` (a row became, or was written, ``unknown``), ``sends_failed`` (a
#: row became, or was written, ``failed``), ``webhook_status_<status>`` (a status event stored), ``webhook_message``
#: (an incoming message stored)

_PG_FUNCTIONS = [
    """
CREATE FUNCTION gatecast_count_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        WITH counted AS (
            INSERT INTO campaign_state_counts AS t (campaign_id, state, slot, n)
            SELECT campaign_id, state, pg_backend_pid(), count(*) FROM new_rows
            GROUP BY campaign_id, state ORDER BY campaign_id, state
            ON CONFLICT (campaign_id, state, slot) DO UPDATE SET n = t.n + excluded.n
            RETURNING 1
        )
        INSERT INTO counters AS t (name, slot, n)
        SELECT name, pg_backend_pid(), count(*) FROM (
            SELECT 'sends_accepted' AS name FROM new_rows WHERE sent_at IS NOT NULL
            UNION ALL
            SELECT 'sends_ambiguous' FROM new_rows WHERE state = 'unknown'
            UNION ALL
            SELECT 'sends_failed' FROM new_rows WHERE state = 'failed'
        ) x GROUP BY name ORDER BY name
        ON CONFLICT (name, slot) DO UPDATE SET n = t.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO campaign_state_counts AS t (campaign_id, state, slot, n)
        SELECT campaign_id, state, pg_backend_pid(), -count(*) FROM old_rows
        GROUP BY campaign_id, state ORDER BY campaign_id, state
        ON CONFLICT (campaign_id, state, slot) DO UPDATE SET n = t.n + excluded.n;
    ELSE
        WITH moved AS MATERIALIZED (
            SELECT o.campaign_id AS oc, o.state AS os, n.campaign_id AS nc, n.state AS ns,
                   o.sent_at IS NULL AND n.sent_at IS NOT NULL AS accepted,
                   o.state IS DISTINCT FROM n.state OR o.campaign_id <> n.campaign_id AS moves
            FROM old_rows o JOIN new_rows n ON n.id = o.id
            WHERE o.state IS DISTINCT FROM n.state OR o.campaign_id <> n.campaign_id
               OR (o.sent_at IS NULL AND n.sent_at IS NOT NULL)
        ), counted AS (
            INSERT INTO campaign_state_counts AS t (campaign_id, state, slot, n)
            SELECT c, s, pg_backend_pid(), sum(d) FROM (
                SELECT nc AS c, ns AS s, 1 AS d FROM moved WHERE moves
                UNION ALL
                SELECT oc, os, -1 FROM moved WHERE moves
            ) x GROUP BY c, s HAVING sum(d) <> 0 ORDER BY c, s
            ON CONFLICT (campaign_id, state, slot) DO UPDATE SET n = t.n + excluded.n
            RETURNING 1
        )
        INSERT INTO counters AS t (name, slot, n)
        SELECT name, pg_backend_pid(), count(*) FROM (
            SELECT 'sends_accepted' AS name FROM moved WHERE accepted
            UNION ALL
            SELECT 'sends_ambiguous' FROM moved WHERE moves AND ns = 'unknown'
            UNION ALL
            SELECT 'sends_failed' FROM moved WHERE moves AND ns = 'failed'
        ) x GROUP BY name ORDER BY name
        ON CONFLICT (name, slot) DO UPDATE SET n = t.n + excluded.n;
    END IF;
    RETURN NULL;
END $$""",
    """
CREATE FUNCTION gatecast_count_status_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters AS t (name, slot, n)
    SELECT 'webhook_status_' || status, pg_backend_pid(), count(*) FROM new_rows
    GROUP BY status ORDER BY 1
    ON CONFLICT (name, slot) DO UPDATE SET n = t.n + excluded.n;
    RETURN NULL;
END $$""",
    """
CREATE FUNCTION gatecast_count_inbound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters AS t (name, slot, n)
    SELECT 'webhook_message', pg_backend_pid(), count(*) FROM new_rows HAVING count(*) > 0
    ON CONFLICT (name, slot) DO UPDATE SET n = t.n + excluded.n;
    RETURN NULL;
END $$""",
]

_PG_TRIGGERS = [
    "CREATE TRIGGER tr_deliveries_count_insert AFTER INSERT ON deliveries "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_count_deliveries()",
    "CREATE TRIGGER tr_deliveries_count_update AFTER UPDATE ON deliveries "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_count_deliveries()",
    "CREATE TRIGGER tr_deliveries_count_delete AFTER DELETE ON deliveries "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_count_deliveries()",
    "CREATE TRIGGER tr_status_events_count AFTER INSERT ON status_events "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_count_status_events()",
    "CREATE TRIGGER tr_inbound_messages_count AFTER INSERT ON inbound_messages "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_count_inbound()",
]


def _sqlite_add(table: str, key: str, amount: str, where: str = "") -> str:
    """One SQLite upsert adding ``amount`` to slot 0 of ``key`` (SQL expressions)."""
    cols = "campaign_id, state" if table == "campaign_state_counts" else "name"
    return (
        f"INSERT INTO {table} ({cols}, slot, n) SELECT {key}, 0, {amount} "
        f"WHERE {where or 'true'} "
        f"ON CONFLICT ({cols}, slot) DO UPDATE SET n = n + excluded.n;"
    )


_COUNTS = "campaign_state_counts"


def _sqlite_counter(name: str, event: str, when: str, counter: str) -> str:
    """A row trigger adding 1 to ``counter`` when ``when`` holds (checked before the
    body runs: a row that does not qualify costs no statement)."""
    return (
        f"CREATE TRIGGER {name} AFTER {event} ON deliveries WHEN {when} BEGIN "
        + _sqlite_add("counters", f"'{counter}'", "1")
        + " END"
    )


_SQLITE_TRIGGERS = [
    "CREATE TRIGGER tr_deliveries_count_insert AFTER INSERT ON deliveries BEGIN "
    + _sqlite_add(_COUNTS, "new.campaign_id, new.state", "1")
    + " END",
    "CREATE TRIGGER tr_deliveries_count_update AFTER UPDATE OF state, campaign_id ON deliveries "
    "WHEN old.state IS NOT new.state OR old.campaign_id <> new.campaign_id BEGIN "
    + _sqlite_add(_COUNTS, "old.campaign_id, old.state", "-1")
    + _sqlite_add(_COUNTS, "new.campaign_id, new.state", "1")
    + " END",
    "CREATE TRIGGER tr_deliveries_count_delete AFTER DELETE ON deliveries BEGIN "
    + _sqlite_add(_COUNTS, "old.campaign_id, old.state", "-1")
    + " END",
    _sqlite_counter(
        "tr_deliveries_count_accepted_new", "INSERT", "new.sent_at IS NOT NULL", "sends_accepted"
    ),
    _sqlite_counter(
        "tr_deliveries_count_unknown_new", "INSERT", "new.state = 'unknown'", "sends_ambiguous"
    ),
    _sqlite_counter(
        "tr_deliveries_count_failed_new", "INSERT", "new.state = 'failed'", "sends_failed"
    ),
    _sqlite_counter(
        "tr_deliveries_count_accepted",
        "UPDATE OF sent_at",
        "old.sent_at IS NULL AND new.sent_at IS NOT NULL",
        "sends_accepted",
    ),
    _sqlite_counter(
        "tr_deliveries_count_unknown",
        "UPDATE OF state",
        "new.state = 'unknown' AND old.state IS NOT 'unknown'",
        "sends_ambiguous",
    ),
    _sqlite_counter(
        "tr_deliveries_count_failed",
        "UPDATE OF state",
        "new.state = 'failed' AND old.state IS NOT 'failed'",
        "sends_failed",
    ),
    "CREATE TRIGGER tr_status_events_count AFTER INSERT ON status_events BEGIN "
    + _sqlite_add("counters", "'webhook_status_' || new.status", "1")
    + " END",
    "CREATE TRIGGER tr_inbound_messages_count AFTER INSERT ON inbound_messages BEGIN "
    + _sqlite_add("counters", "'webhook_message'", "1")
    + " END",
]

_BACKFILL = [
    "INSERT INTO campaign_state_counts (campaign_id, state, slot, n) "
    "SELECT campaign_id, state, 0, count(*) FROM deliveries GROUP BY campaign_id, state",
    "INSERT INTO counters (name, slot, n) "
    "SELECT 'sends_accepted', 0, count(*) FROM deliveries WHERE sent_at IS NOT NULL "
    "UNION ALL SELECT 'sends_ambiguous', 0, count(*) FROM deliveries WHERE state = 'unknown' "
    "UNION ALL SELECT 'sends_failed', 0, count(*) FROM deliveries WHERE state = 'failed' "
    "UNION ALL SELECT 'webhook_message', 0, count(*) FROM inbound_messages "
    "UNION ALL SELECT 'webhook_status_' || status, 0, count(*) FROM status_events "
    "GROUP BY status",
]


def upgrade() -> None:
    op.create_table(
        'campaign_state_counts',
        sa.Column('campaign_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
                  nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('slot', sa.Integer(), nullable=False),
        sa.Column('n', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('campaign_id', 'state', 'slot'),
        sqlite_with_rowid=False,  # one b-tree: the triggers' upserts touch one
    )
    op.create_table(
        'counters',
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('slot', sa.Integer(), nullable=False),
        sa.Column('n', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('name', 'slot'),
        sqlite_with_rowid=False,
    )
    bind = op.get_bind()
    if bind.dialect.name == 'postgresql':
        # no writer may slip between the triggers' creation and the backfill
        op.execute('LOCK TABLE deliveries, status_events, inbound_messages IN EXCLUSIVE MODE')
        for ddl in _PG_FUNCTIONS + _PG_TRIGGERS:
            op.execute(ddl)
    else:
        for ddl in _SQLITE_TRIGGERS:
            op.execute(ddl)
    for sql in _BACKFILL:
        op.execute(sql)


def downgrade() -> None:
    bind = op.get_bind()
    for name, table in [
        ('tr_inbound_messages_count', 'inbound_messages'),
        ('tr_status_events_count', 'status_events'),
        *((f'tr_deliveries_count_{what}', 'deliveries') for what in (
            'delete', 'update', 'insert', 'accepted', 'unknown', 'failed',
            'accepted_new', 'unknown_new', 'failed_new')),
    ]:
        if bind.dialect.name == 'postgresql':
            op.execute(f'DROP TRIGGER IF EXISTS {name} ON {table}')
        else:
            op.execute(f'DROP TRIGGER IF EXISTS {name}')
    if bind.dialect.name == 'postgresql':
        for fn in ('gatecast_count_inbound', 'gatecast_count_status_events',
                   'gatecast_count_deliveries'):
            op.execute(f'DROP FUNCTION IF EXISTS {fn}()')
    op.drop_table('counters')
    op.drop_table('campaign_state_counts')
