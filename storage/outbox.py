"""The outbound webhooks' outbox triggers: they exist only while someone subscribes.

A change that causes an event (a delivery's state, a reply, an opt-out, a campaign's or
an instance's state) writes one ``webhook_messages`` row per subscribed endpoint, in the
transaction of the change (nothing lost when it commits, nothing invented when it rolls
back). The trigger of a source is created in the transaction that adds its first
subscription and dropped (PostgreSQL: disabled) in the one that removes its last
(:func:`sync_triggers`), so a deployment without subscriptions runs the statements it
ran before: no trigger fires, nothing is probed (``bench/outbound.py`` measures it, and
the alternative: triggers always in force that find no subscriber).

PostgreSQL: statement-level triggers over transition tables on ``deliveries`` and
``inbound_messages`` (one INSERT per statement, however many rows it changed), row
triggers with a ``WHEN`` on the rare changes (opt-outs, campaign and instance states); a
transaction-scoped advisory lock makes two subscription changes take turns. SQLite: row
triggers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, func, select, text

from storage import tables

#: PostgreSQL: the advisory lock subscription changes take turns on
OUTBOX_LOCK = 7_402_015

_COLUMNS = "endpoint_id, event, recipient, data, occurred_at, state, attempts"


@dataclass(frozen=True)
class Source:
    """One table's changes that make events. SQL fragments name the new row ``n`` and
    the old one ``o``."""

    table: str
    events: tuple[str, ...]
    event: str  # the event's name (SQL)
    recipient: str  # the order key (SQL)
    occurred: str  # when it happened (SQL)
    data: tuple[tuple[str, str], ...]  # the event's data: (key, SQL)
    sqlite_event: str  # AFTER <this> ON table
    when: str  # the change that makes an event (SQL over n and o)
    statement_level: bool  # PostgreSQL: over transition tables
    #: the trigger's name part when a table has more than one source (default: the table)
    name: str = ""

    @property
    def inserts(self) -> bool:
        """Whether new rows make the events (no old row to compare with)."""
        return self.sqlite_event == "INSERT"

    @property
    def trigger(self) -> str:
        """The trigger's name (the pattern :func:`present` looks for)."""
        return f"tr_{self.name or self.table}_outbox"

    @property
    def function(self) -> str:
        return f"gatecast_{self.trigger}"


#: a change of the ``state`` column: the SQLite trigger's event and the condition
_STATE_UPDATE, _STATE_CHANGED = "UPDATE OF state", "o.state IS NOT n.state"


def _state_changed(
    table: str,
    entity: str,
    key: str,
    named: tuple[tuple[str, str], ...],
    more: tuple[tuple[str, str], ...] = (),
) -> Source:
    """A row trigger on ``table``: ``<entity>.state_changed`` when a row's state changes,
    for recipient ``<entity>:<key>``; its data: ``named``, the state it left (``from``)
    and the one it took (``to``), then ``more``."""
    event = f"{entity}.state_changed"
    return Source(
        table=table,
        events=(event,),
        event=f"'{event}'",
        recipient=f"'{entity}:' || n.{key}",
        occurred="n.updated_at",
        data=(*named, ("from", "o.state"), ("to", "n.state"), *more),
        sqlite_event=_STATE_UPDATE,
        when=_STATE_CHANGED,
        statement_level=False,
    )


#: the data of a ``delivery.*`` event and when it happened (a row's own times)
_DELIVERY_DATA = (
    ("delivery_id", "n.id"),
    ("campaign_id", "n.campaign_id"),
    ("contact_id", "n.contact_id"),
    ("to", "n.target"),
    ("sender", "n.sender"),
    ("message_id", "n.message_id"),
    ("state", "n.state"),
    ("error", "n.error"),
    ("error_code", "n.error_code"),
)
_DELIVERY_OCCURRED = (
    "COALESCE(CASE n.state WHEN 'sent' THEN n.sent_at "
    "WHEN 'delivered' THEN n.delivered_at WHEN 'read' THEN n.read_at "
    "ELSE n.failed_at END, n.attempted_at, n.queued_at)"
)
_DELIVERY_RECIPIENT = "COALESCE('contact:' || n.contact_id, 'to:' || n.target)"
#: an instance's events share one order key: its connection and its pauses in order
_INSTANCE_RECIPIENT = "'instance:' || n.instance_id"
_SENDER = (("instance_id", "n.instance_id"), ("label", "n.label"))
#: the instance states a sender sends from (``storage.queries.instances.LINKED_STATES``)
_LINKED = "('connected', 'unconfirmed')"


def _instance_source(
    name: str, event: str, column: str, when: str, data: tuple[tuple[str, str], ...], at: str
) -> Source:
    """A row trigger on ``instances`` for a rare change of ``column`` (decision 67)."""
    return Source(
        table="instances",
        name=name,
        events=(event,),
        event=f"'{event}'",
        recipient=_INSTANCE_RECIPIENT,
        occurred=at,
        data=(*_SENDER, *data),
        sqlite_event=f"UPDATE OF {column}",
        when=when,
        statement_level=False,
    )


SOURCES = (
    Source(
        table="deliveries",
        events=(
            "delivery.sent",
            "delivery.delivered",
            "delivery.read",
            "delivery.failed",
            "delivery.skipped",
            "delivery.unknown",
        ),
        event="'delivery.' || n.state",
        recipient=_DELIVERY_RECIPIENT,
        occurred=_DELIVERY_OCCURRED,
        data=_DELIVERY_DATA,
        sqlite_event=_STATE_UPDATE,
        when=_STATE_CHANGED,
        statement_level=True,
    ),
    Source(  # rows made skipped at the start (opted out, unrenderable): an INSERT
        table="deliveries",
        name="deliveries_skipped",
        events=("delivery.skipped",),
        event="'delivery.skipped'",
        recipient=_DELIVERY_RECIPIENT,
        occurred=_DELIVERY_OCCURRED,
        data=_DELIVERY_DATA,
        sqlite_event="INSERT",
        when="n.state = 'skipped'",
        statement_level=True,
    ),
    Source(
        table="inbound_messages",
        events=("reply.received",),
        event="'reply.received'",
        recipient="COALESCE('contact:' || n.contact_id, 'chat:' || n.chat)",
        occurred="n.received_at",
        data=(
            ("reply_id", "n.id"),
            ("message_id", "n.message_id"),
            ("instance_id", "n.instance_id"),
            ("from", "n.sender_phone"),
            ("chat", "n.chat"),
            ("contact_id", "n.contact_id"),
            ("text", "n.text"),
        ),
        sqlite_event="INSERT",
        when="",
        statement_level=True,
    ),
    Source(
        table="contacts",
        events=("contact.opted_out",),
        event="'contact.opted_out'",
        recipient="'contact:' || n.id",
        occurred="COALESCE(n.opted_out_at, n.updated_at)",
        data=(("contact_id", "n.id"), ("phone", "n.phone"), ("reason", "n.opt_out_reason")),
        sqlite_event="UPDATE OF opted_out",
        when="n.opted_out AND NOT o.opted_out",
        statement_level=False,
    ),
    Source(
        table="contacts",
        name="contacts_opted_in",
        events=("contact.opted_in",),
        event="'contact.opted_in'",
        recipient="'contact:' || n.id",
        occurred="n.updated_at",
        data=(("contact_id", "n.id"), ("phone", "n.phone"), ("reason", "o.opt_out_reason")),
        sqlite_event="UPDATE OF opted_out",
        when="o.opted_out AND NOT n.opted_out",
        statement_level=False,
    ),
    _state_changed(
        "campaigns",
        "campaign",
        "id",
        (("campaign_id", "n.id"), ("name", "n.name")),
        (("reason", "n.state_reason"),),
    ),
    Source(  # the hold the dispatcher announces (scheduler/holds.py), once per kind
        table="campaigns",
        name="campaigns_held",
        events=("campaign.held",),
        event="'campaign.held'",
        recipient="'campaign:' || n.id",
        occurred="n.held_at",
        data=(
            ("campaign_id", "n.id"),
            ("name", "n.name"),
            ("kind", "n.held_kind"),
            ("words", "n.held_words"),
            ("until", "n.held_until"),
        ),
        sqlite_event="UPDATE OF held_kind",
        when="o.held_kind IS NOT n.held_kind AND n.held_kind IS NOT NULL",
        statement_level=False,
    ),
    _state_changed(
        "instances",
        "instance",
        "instance_id",
        (("instance_id", "n.instance_id"), ("label", "n.label")),
    ),
    _instance_source(
        "instances_connected",
        "instance.connected",
        "state",
        "n.state = 'connected' AND o.state IS NOT n.state",
        (("from", "o.state"), ("to", "n.state"), ("phone", "n.phone")),
        "COALESCE(n.state_at, n.updated_at)",
    ),
    _instance_source(
        "instances_disconnected",
        "instance.disconnected",
        "state",
        f"o.state IN {_LINKED} AND n.state NOT IN {_LINKED}",
        (("from", "o.state"), ("to", "n.state")),
        "COALESCE(n.state_at, n.updated_at)",
    ),
    _instance_source(
        "instances_paused",
        "sender.paused",
        "paused_reason",
        "o.paused_reason IS NULL AND n.paused_reason IS NOT NULL",
        (("reason", "n.paused_reason"), ("health_level", "n.health_level")),
        "COALESCE(n.paused_at, n.updated_at)",
    ),
    _instance_source(
        "instances_resumed",
        "sender.resumed",
        "paused_reason",
        "o.paused_reason IS NOT NULL AND n.paused_reason IS NULL",
        (("reason", "o.paused_reason"),),
        "n.updated_at",
    ),
    Source(  # every level change is one row of this log (scheduler/health.py)
        table="sender_health_changes",
        events=("sender.health_changed",),
        event="'sender.health_changed'",
        recipient=_INSTANCE_RECIPIENT,
        occurred="n.at",
        data=(
            ("instance_id", "n.instance_id"),
            (
                "label",
                "(SELECT i.label FROM instances i WHERE i.instance_id = n.instance_id)",
            ),
            ("from", "n.level_from"),
            ("to", "n.level_to"),
            ("score", "n.score"),
            ("reason", "n.reason"),
        ),
        sqlite_event="INSERT",
        when="",
        statement_level=False,
    ),
    Source(  # an import run that stopped running: completed, or failed
        table="imports",
        events=("import.finished",),
        event="'import.finished'",
        recipient="'import:' || n.id",
        occurred="COALESCE(n.finished_at, n.started_at)",
        data=(
            ("import_id", "n.id"),
            ("status", "n.status"),
            ("filename", "n.filename"),
            ("list_id", "n.list_id"),
            ("rows_read", "n.rows_read"),
            ("imported", "n.imported"),
            ("updated", "n.updated"),
            ("duplicates", "n.duplicates"),
            ("invalid", "n.invalid"),
            ("skipped_opted_out", "n.skipped_opted_out"),
            ("error", "n.error"),
        ),
        sqlite_event="UPDATE OF status",
        when="o.status = 'running' AND n.status <> 'running'",
        statement_level=False,
    ),
)


def _rows(sql: str, new: str, old: str) -> str:
    """``n.`` and ``o.`` as the trigger names the new and old row."""
    return re.sub(r"\bo\.", old + ".", re.sub(r"\bn\.", new + ".", sql))


def _select(source: Source, json_fn: str, cast: str) -> str:
    """The outbox rows of a change: one per endpoint subscribed to its event."""
    pairs = ", ".join(f"'{key}', {value}" for key, value in source.data)
    return (
        f"SELECT s.endpoint_id, {source.event}, {source.recipient}, {json_fn}({pairs}){cast}, "
        f"{source.occurred}, 'pending', 0 FROM webhook_subscriptions s"
    )


def pg_ddl(source: Source) -> list[str]:
    """PostgreSQL: the function and the trigger of a source."""
    if source.statement_level:
        joins = "JOIN new_rows n ON s.event = " + source.event
        if source.when and source.inserts:
            joins += f" WHERE {source.when}"
        elif source.when:
            joins += f" JOIN old_rows o ON o.id = n.id WHERE {source.when}"
        body = (
            f"INSERT INTO webhook_messages ({_COLUMNS}) "
            f"{_select(source, 'json_build_object', '::text')} {joins} "
            "ORDER BY n.id, s.endpoint_id;"
        ).replace(" IS NOT ", " IS DISTINCT FROM ")
        tables_ = (
            "OLD TABLE AS old_rows NEW TABLE AS new_rows"
            if source.when and not source.inserts
            else "NEW TABLE AS new_rows"
        )
        trigger = (
            f"CREATE TRIGGER {source.trigger} AFTER {source.sqlite_event.split()[0]} "
            f"ON {source.table} REFERENCING {tables_} FOR EACH STATEMENT "
            f"EXECUTE FUNCTION {source.function}()"
        )
    else:
        body = _rows(
            f"INSERT INTO webhook_messages ({_COLUMNS}) "
            f"{_select(source, 'json_build_object', '::text')} WHERE s.event = {source.event} "
            "ORDER BY s.endpoint_id;",
            "NEW",
            "OLD",
        )
        when = _rows(source.when, "NEW", "OLD").replace(" IS NOT ", " IS DISTINCT FROM ")
        trigger = (
            f"CREATE TRIGGER {source.trigger} AFTER {source.sqlite_event} ON {source.table} "
            f"FOR EACH ROW {f'WHEN ({when}) ' if when else ''}"
            f"EXECUTE FUNCTION {source.function}()"
        )
    function = (
        f"CREATE OR REPLACE FUNCTION {source.function}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$\nBEGIN\n{body}\nRETURN NULL;\nEND $$"
    )
    return [function, trigger]


def sqlite_ddl(source: Source) -> list[str]:
    """SQLite: the row trigger of a source."""
    when = _rows(source.when, "new", "old") or "1"
    select_ = _rows(_select(source, "json_object", ""), "new", "old")
    return [
        f"CREATE TRIGGER {source.trigger} AFTER {source.sqlite_event} ON {source.table} "
        f"WHEN {when} BEGIN INSERT INTO webhook_messages ({_COLUMNS}) {select_} "
        f"WHERE s.event = {_rows(source.event, 'new', 'old')} ORDER BY s.endpoint_id; END"
    ]


def _catalogue(conn: Connection) -> dict[str, bool]:
    """The outbox triggers that exist, by name: enabled or not."""
    if conn.dialect.name == "postgresql":
        rows = conn.execute(
            text(
                "SELECT tgname, tgenabled <> 'D' FROM pg_trigger "
                "WHERE tgname LIKE 'tr\\_%\\_outbox' AND NOT tgisinternal"
            )
        )
    else:
        rows = conn.execute(
            text(
                "SELECT name, 1 FROM sqlite_master "
                "WHERE type = 'trigger' AND name LIKE 'tr_%_outbox'"
            )
        )
    return {str(name): bool(enabled) for name, enabled in rows}


def present(conn: Connection) -> set[str]:
    """The outbox triggers in force now (created and enabled), by name."""
    return {name for name, enabled in _catalogue(conn).items() if enabled}


def install(conn: Connection, sources: Iterable[Source]) -> None:
    """Put the triggers of ``sources`` in force: created, or enabled again (PostgreSQL)."""
    postgres = conn.dialect.name == "postgresql"
    existing = _catalogue(conn)
    for source in sources:
        if source.trigger not in existing:
            for ddl in pg_ddl(source) if postgres else sqlite_ddl(source):
                conn.execute(text(ddl))
        elif not existing[source.trigger]:
            conn.execute(text(f"ALTER TABLE {source.table} ENABLE TRIGGER {source.trigger}"))


def drop(conn: Connection, sources: Iterable[Source]) -> None:
    """Take the triggers of ``sources`` out of force: dropped on SQLite; disabled on
    PostgreSQL, where ``DROP TRIGGER`` would wait for (and block) every reader of the
    table, ``DISABLE`` only its writers, briefly."""
    postgres = conn.dialect.name == "postgresql"
    existing = _catalogue(conn)
    for source in sources:
        if existing.get(source.trigger):
            if postgres:
                conn.execute(text(f"ALTER TABLE {source.table} DISABLE TRIGGER {source.trigger}"))
            else:
                conn.execute(text(f"DROP TRIGGER {source.trigger}"))


def sync_triggers(conn: Connection) -> None:
    """In the transaction that changed the subscriptions: each source's trigger exists
    exactly when one of its events has a subscription."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(OUTBOX_LOCK)))
    s = tables.webhook_subscriptions
    wanted = set(conn.execute(select(s.c.event).distinct()).scalars())
    install(conn, [src for src in SOURCES if wanted.intersection(src.events)])
    drop(conn, [src for src in SOURCES if not wanted.intersection(src.events)])


__all__ = [
    "OUTBOX_LOCK",
    "SOURCES",
    "Source",
    "drop",
    "install",
    "pg_ddl",
    "present",
    "sqlite_ddl",
    "sync_triggers",
]
