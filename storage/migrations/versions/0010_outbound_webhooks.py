"""outbound webhooks: endpoints, subscriptions, an outbox written by triggers

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 03:45:00

Signed webhooks to other systems (Standard Webhooks; decision "outbound webhooks" in
docs/architecture.md). ``webhook_endpoints`` holds each receiver (URL, secret, the events
it asked for, enabled or disabled); ``webhook_subscriptions`` one row per (event, enabled
endpoint): the small table the triggers look at. Triggers on ``deliveries``,
``inbound_messages``, ``contacts``, ``campaigns`` and ``instances`` write one
``webhook_messages`` row per subscribed endpoint in the transaction of the change that
causes the event (nothing lost when it commits, nothing invented when it rolls back);
with no subscription for an event a trigger costs one probe of that small table (a
row trigger's ``WHEN`` on the rare changes, a statement-level check on the hot ones).
``webhook_attempts`` is each endpoint's delivery log.

PostgreSQL: statement-level triggers over transition tables on ``deliveries`` and
``inbound_messages`` (the counting triggers of 0009 already capture them), row triggers
with a ``WHEN`` on the rest. SQLite: row triggers whose ``WHEN`` probes the subscriptions.
"""
import re

from alembic import op
import sqlalchemy as sa
import sqlmodel
import storage.types


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
_PENDING = "state = 'pending'"

# (event (SQL), recipient key (SQL), when it happened (SQL), data: [(key, SQL)]) per
# source; ``n`` is the new row, ``o`` the old one
_DELIVERY = (
    "'delivery.' || n.state",
    "COALESCE('contact:' || n.contact_id, 'to:' || n.target)",
    "COALESCE(CASE n.state WHEN 'sent' THEN n.sent_at WHEN 'delivered' THEN n.delivered_at "
    "WHEN 'read' THEN n.read_at ELSE n.failed_at END, n.attempted_at, n.queued_at)",
    [("delivery_id", "n.id"), ("campaign_id", "n.campaign_id"), ("contact_id", "n.contact_id"),
     ("to", "n.target"), ("sender", "n.sender"), ("message_id", "n.message_id"),
     ("state", "n.state"), ("error", "n.error"), ("error_code", "n.error_code")],
)
_REPLY = (
    "'reply.received'",
    "COALESCE('contact:' || n.contact_id, 'chat:' || n.chat)",
    "n.received_at",
    [("reply_id", "n.id"), ("message_id", "n.message_id"), ("instance_id", "n.instance_id"),
     ("from", "n.sender_phone"), ("chat", "n.chat"), ("contact_id", "n.contact_id"),
     ("text", "n.text")],
)
_OPT_OUT = (
    "'contact.opted_out'",
    "'contact:' || n.id",
    "COALESCE(n.opted_out_at, n.updated_at)",
    [("contact_id", "n.id"), ("phone", "n.phone"), ("reason", "n.opt_out_reason")],
)
_CAMPAIGN = (
    "'campaign.state_changed'",
    "'campaign:' || n.id",
    "n.updated_at",
    [("campaign_id", "n.id"), ("name", "n.name"), ("from", "o.state"), ("to", "n.state"),
     ("reason", "n.state_reason")],
)
_INSTANCE = (
    "'instance.state_changed'",
    "'instance:' || n.instance_id",
    "n.updated_at",
    [("instance_id", "n.instance_id"), ("label", "n.label"), ("from", "o.state"),
     ("to", "n.state")],
)

_COLUMNS = "endpoint_id, event, recipient, data, occurred_at, state, attempts"


def _rows(sql: str, new: str, old: str) -> str:
    """``n.`` and ``o.`` as a trigger names the new and old row."""
    return re.sub(r"\bo\.", old + ".", re.sub(r"\bn\.", new + ".", sql))


def _select(source: tuple, json_fn: str, cast: str) -> str:
    """The outbox rows of one source: one per subscribed endpoint of the row's event."""
    event, recipient, occurred, data = source
    pairs = ", ".join(f"'{k}', {v}" for k, v in data)
    return (
        f"SELECT s.endpoint_id, {event}, {recipient}, {json_fn}({pairs}){cast}, {occurred}, "
        f"'pending', 0 FROM webhook_subscriptions s"
    )


# ---- PostgreSQL -------------------------------------------------------------------------

def _pg_function(name: str, body: str) -> str:
    return (f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"BEGIN\n{body}\nRETURN NULL;\nEND $$")


def _pg_row(source: tuple) -> str:
    sel = _rows(_select(source, "json_build_object", "::text"), "NEW", "OLD")
    return (f"INSERT INTO webhook_messages ({_COLUMNS}) {sel} "
            f"WHERE s.event = {_rows(source[0], 'NEW', 'OLD')} ORDER BY s.endpoint_id;")


_PG_FUNCTIONS = [
    _pg_function("gatecast_outbox_deliveries", f"""
IF NOT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE event LIKE 'delivery.%') THEN
    RETURN NULL;
END IF;
INSERT INTO webhook_messages ({_COLUMNS})
{_select(_DELIVERY, 'json_build_object', '::text')}
JOIN new_rows n ON s.event = 'delivery.' || n.state
JOIN old_rows o ON o.id = n.id
WHERE o.state IS DISTINCT FROM n.state
ORDER BY n.id, s.endpoint_id;"""),
    _pg_function("gatecast_outbox_replies", f"""
IF NOT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE event = 'reply.received') THEN
    RETURN NULL;
END IF;
INSERT INTO webhook_messages ({_COLUMNS})
{_select(_REPLY, 'json_build_object', '::text')}
JOIN new_rows n ON s.event = 'reply.received'
ORDER BY n.id, s.endpoint_id;"""),
    _pg_function("gatecast_outbox_opt_outs", _pg_row(_OPT_OUT)),
    _pg_function("gatecast_outbox_campaigns", _pg_row(_CAMPAIGN)),
    _pg_function("gatecast_outbox_instances", _pg_row(_INSTANCE)),
]

_PG_TRIGGERS = [
    "CREATE TRIGGER tr_deliveries_outbox AFTER UPDATE ON deliveries "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_outbox_deliveries()",
    "CREATE TRIGGER tr_inbound_messages_outbox AFTER INSERT ON inbound_messages "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION gatecast_outbox_replies()",
    "CREATE TRIGGER tr_contacts_outbox AFTER UPDATE OF opted_out ON contacts FOR EACH ROW "
    "WHEN (NEW.opted_out AND NOT OLD.opted_out) EXECUTE FUNCTION gatecast_outbox_opt_outs()",
    "CREATE TRIGGER tr_campaigns_outbox AFTER UPDATE OF state ON campaigns FOR EACH ROW "
    "WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION gatecast_outbox_campaigns()",
    "CREATE TRIGGER tr_instances_outbox AFTER UPDATE OF state ON instances FOR EACH ROW "
    "WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION gatecast_outbox_instances()",
]

# ---- SQLite -----------------------------------------------------------------------------


def _sqlite(name: str, event: str, table: str, when: str, source: tuple, guard: str) -> str:
    sel = _rows(_select(source, "json_object", ""), "new", "old")
    ev = _rows(source[0], "new", "old")
    return (
        f"CREATE TRIGGER {name} AFTER {event} ON {table} "
        f"WHEN {when} AND EXISTS (SELECT 1 FROM webhook_subscriptions WHERE {guard}) BEGIN "
        f"INSERT INTO webhook_messages ({_COLUMNS}) {sel} WHERE s.event = {ev} "
        "ORDER BY s.endpoint_id; END"
    )


_SQLITE_TRIGGERS = [
    _sqlite("tr_deliveries_outbox", "UPDATE OF state", "deliveries",
            "old.state IS NOT new.state", _DELIVERY, "event = 'delivery.' || new.state"),
    _sqlite("tr_inbound_messages_outbox", "INSERT", "inbound_messages", "1", _REPLY,
            "event = 'reply.received'"),
    _sqlite("tr_contacts_outbox", "UPDATE OF opted_out", "contacts",
            "new.opted_out AND NOT old.opted_out", _OPT_OUT, "event = 'contact.opted_out'"),
    _sqlite("tr_campaigns_outbox", "UPDATE OF state", "campaigns",
            "old.state IS NOT new.state", _CAMPAIGN, "event = 'campaign.state_changed'"),
    _sqlite("tr_instances_outbox", "UPDATE OF state", "instances",
            "old.state IS NOT new.state", _INSTANCE, "event = 'instance.state_changed'"),
]

_TRIGGERS = [
    ("tr_deliveries_outbox", "deliveries", "gatecast_outbox_deliveries"),
    ("tr_inbound_messages_outbox", "inbound_messages", "gatecast_outbox_replies"),
    ("tr_contacts_outbox", "contacts", "gatecast_outbox_opt_outs"),
    ("tr_campaigns_outbox", "campaigns", "gatecast_outbox_campaigns"),
    ("tr_instances_outbox", "instances", "gatecast_outbox_instances"),
]


def upgrade() -> None:
    op.create_table(
        'webhook_endpoints',
        sa.Column('id', _ID, nullable=False),
        sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
        sa.Column('secret', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column('events', storage.types.JsonDoc, nullable=False),
        sa.Column('description', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
        sa.Column('enabled', sa.Boolean(), nullable=False),
        sa.Column('disabled_reason', sqlmodel.sql.sqltypes.AutoString(length=500),
                  nullable=True),
        sa.Column('failing_since', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('consecutive_failures', sa.Integer(), nullable=False),
        sa.Column('created_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_table(
        'webhook_subscriptions',
        sa.Column('event', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column('endpoint_id', _ID, nullable=False),
        sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('event', 'endpoint_id'),
    )
    op.create_table(
        'webhook_messages',
        sa.Column('id', _ID, nullable=False),
        sa.Column('endpoint_id', _ID, nullable=False),
        sa.Column('event', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column('recipient', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('data', sa.Text(), nullable=False),
        sa.Column('occurred_at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('state', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('next_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('first_attempt_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column('finished_at', storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_webhook_messages_endpoint', 'webhook_messages', ['endpoint_id', 'id'])
    op.create_index('ix_webhook_messages_queue', 'webhook_messages', ['id'],
                    sqlite_where=sa.text(_PENDING), postgresql_where=sa.text(_PENDING))
    op.create_index('ix_webhook_messages_pending', 'webhook_messages',
                    ['endpoint_id', 'recipient', 'id'],
                    sqlite_where=sa.text(_PENDING), postgresql_where=sa.text(_PENDING))
    op.create_table(
        'webhook_attempts',
        sa.Column('id', _ID, nullable=False),
        sa.Column('endpoint_id', _ID, nullable=False),
        sa.Column('message_id', _ID, nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('at', storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('status_code', sa.Integer(), nullable=True),
        sa.Column('error', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('duration_ms', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_webhook_attempts_endpoint', 'webhook_attempts', ['endpoint_id', 'id'])
    if op.get_bind().dialect.name == 'postgresql':
        for ddl in _PG_FUNCTIONS + _PG_TRIGGERS:
            op.execute(ddl)
    else:
        for ddl in _SQLITE_TRIGGERS:
            op.execute(ddl)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == 'postgresql'
    for name, table, fn in _TRIGGERS:
        op.execute(f'DROP TRIGGER IF EXISTS {name} ON {table}' if postgres
                   else f'DROP TRIGGER IF EXISTS {name}')
        if postgres:
            op.execute(f'DROP FUNCTION IF EXISTS {fn}()')
    op.drop_index('ix_webhook_attempts_endpoint', table_name='webhook_attempts')
    op.drop_table('webhook_attempts')
    op.drop_index('ix_webhook_messages_pending', table_name='webhook_messages')
    op.drop_index('ix_webhook_messages_queue', table_name='webhook_messages')
    op.drop_index('ix_webhook_messages_endpoint', table_name='webhook_messages')
    op.drop_table('webhook_messages')
    op.drop_table('webhook_subscriptions')
    op.drop_table('webhook_endpoints')
