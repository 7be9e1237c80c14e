"""The tables. SQLModel table models; API-facing model families live with their users.

States are plain strings checked by the domain (``campaigns.lifecycle`` for campaigns,
``storage.states`` for deliveries), so migrations never have to alter an enum type.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    Text,
    UniqueConstraint,
    text,
)
from sqlmodel import Field, SQLModel

from storage.predicates import (
    PENDING_MESSAGES,
    QUEUED_ROWS,
    RULES_DUE,
    SENDING_ROWS,
    UNAPPLIED_EVENTS,
    UNASSIGNED_QUEUED_ROWS,
    WITH_ERROR_CODE,
    ZONED_QUEUED_ROWS,
)
from storage.revision import HEAD_REVISION
from storage.types import BigId, JsonDoc, UTCDateTime, utcnow


def _dt() -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))


def _created() -> Any:
    return Field(default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False))


def _json(default: Any) -> Any:
    return Field(default_factory=default, sa_column=Column(JsonDoc, nullable=False))


class Instance(SQLModel, table=True):
    """A gateway instance (one linked messaging-app session) that gatecast sends through."""

    __tablename__ = "instances"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    instance_id: str = Field(unique=True, max_length=64)
    label: str = Field(default="", max_length=200)
    # created | waiting_scan | connected | disconnected | logged_out
    state: str = Field(default="created", max_length=32)
    # when the connection state was last recorded (an event, an operation, a send's proof
    # or refusal): a send that started before it says nothing of the state now (decision 48)
    state_at: datetime | None = _dt()
    # set when gatecast stops sending through it (relogin, quota, 463, error burst)
    paused_reason: str | None = Field(default=None, max_length=500)
    paused_at: datetime | None = _dt()
    webhook_url_registered: bool = False
    # SHA-256 (hex) of the webhook URL gatecast last registered (never the URL: it holds
    # the secret); None when none is registered
    webhook_digest: str | None = Field(default=None, max_length=64)
    phone: str | None = Field(default=None, max_length=32)
    # pacing state that must survive restarts
    next_send_at: datetime | None = _dt()
    # the identical-content guard (``scheduler/content_guard.py``): the digest of the last
    # body claimed for this sender, how many identical ones in a row, and when
    body_digest: str | None = Field(default=None, max_length=32)
    body_run: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    body_at: datetime | None = _dt()
    created_at: datetime = _created()
    updated_at: datetime = _created()
    # sender care (migration 0014, scheduler/warmup.py, scheduler/health.py,
    # scheduler/timelock.py): the warm-up override and today's weighted use
    warmup_off: bool = Field(default=False, sa_column_kwargs={"server_default": "0"})
    warmup_start_at: datetime | None = _dt()  # None: created_at (day 1 = its first day)
    warmup_ramp: str | None = Field(default=None, max_length=200)  # e.g. "15,30,60"
    warmup_day_key: str | None = Field(default=None, max_length=10)  # local day of the use
    warmup_used: float = Field(default=0.0, sa_column_kwargs={"server_default": "0"})
    # the health score as of health_at (it decays from there), its level and cool-down end
    health_score: float = Field(default=0.0, sa_column_kwargs={"server_default": "0"})
    health_at: datetime | None = _dt()
    health_level: str = Field(
        default="low", max_length=16, sa_column_kwargs={"server_default": "low"}
    )
    health_resume_at: datetime | None = _dt()
    # signals the webhook counted, not yet folded into the score by the dispatcher
    signal_disconnects: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    signal_logouts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    signal_replies: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # status events with an error code are read up to here (receipt time)
    signals_seen_at: datetime | None = _dt()
    # a 463 reach-out timelock: cold contacts wait until lock_until; parked once per lock
    lock_until: datetime | None = _dt()
    lock_parked: bool = Field(default=False, sa_column_kwargs={"server_default": "0"})


class SenderChat(SQLModel, table=True):
    """A (sender, target) pair the sender has messaged, and whether it is a known chat:
    the target received a message of this sender (delivered or read) or wrote to it.
    The primary key is the "known chat" test of a claim (one probe, whatever history)."""

    __tablename__ = "sender_chats"

    instance_id: str = Field(primary_key=True, max_length=64)
    target: str = Field(primary_key=True, max_length=128)
    first_sent_at: datetime | None = _dt()
    known_at: datetime | None = _dt()


class SenderHealthChange(SQLModel, table=True):
    """A change of a sender's health level (scheduler/health.py): the log and the metric."""

    __tablename__ = "sender_health_changes"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    instance_id: str = Field(index=True, max_length=64)
    at: datetime = _created()
    level_from: str = Field(max_length=16)
    level_to: str = Field(max_length=16)
    score: float = 0.0
    reason: str = Field(default="", max_length=500)


class Contact(SQLModel, table=True):
    """A person reachable by phone; ``phone`` is E.164 and unique."""

    __tablename__ = "contacts"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    phone: str = Field(unique=True, max_length=20)
    raw_phone: str = Field(default="", max_length=200)
    name: str = Field(default="", max_length=300)
    attributes: dict[str, Any] = _json(dict)
    # the attributes as an audience's ``where`` compares them: each value folded (no case,
    # no accents; ``campaigns.segments.fold_value``), kept beside them by every write
    folded: dict[str, Any] = Field(
        default_factory=dict,
        sa_column=Column(JsonDoc, nullable=False, server_default=text("'{}'")),
    )
    # the name as a search compares it (``campaigns.segments.fold_value``), kept beside it
    # by every write; the contact search's prefix/substring match (migration 0011)
    folded_name: str = Field(default="", max_length=300, sa_column_kwargs={"server_default": ""})
    opted_out: bool = Field(default=False)
    opted_out_at: datetime | None = _dt()
    opt_out_reason: str | None = Field(default=None, max_length=500)
    created_at: datetime = _created()
    updated_at: datetime = _created()


class ContactSearchPending(SQLModel, table=True):
    """A contact whose search row is missing or stale (migration 0014).

    Triggers on ``contacts`` queue the contacts a write inserts or whose searched text
    changes; ``storage.queries.contact_search.catch_up`` fills their search rows in bulk
    and takes them off. A search checks the queued contacts directly.
    """

    __tablename__ = "contact_search_pending"
    __table_args__ = {"sqlite_with_rowid": False}

    contact_id: int = Field(sa_type=BigId, primary_key=True)


class ContactSearchPendingRange(SQLModel, table=True):
    """Contacts ``first_id``..``last_id`` whose search rows are missing (migration 0019).

    A PostgreSQL import that inserts its new contacts with the per-row triggers off
    queues them as one range instead of a row each; the catching up fills a range's
    search rows straight from ``contacts`` a batch at a time, and a search checks the
    contacts of a range directly, as it does the queued ones.
    """

    __tablename__ = "contact_search_pending_ranges"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    first_id: int = Field(sa_type=BigId)
    last_id: int = Field(sa_type=BigId)


class ContactList(SQLModel, table=True):
    """A named audience; a contact can be in many lists."""

    __tablename__ = "lists"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    name: str = Field(unique=True, max_length=200)
    description: str = Field(default="", max_length=1000)
    created_at: datetime = _created()


class ListMember(SQLModel, table=True):
    """Membership of a contact in a list."""

    __tablename__ = "list_members"

    list_id: int = Field(
        sa_type=BigId, foreign_key="lists.id", primary_key=True, ondelete="CASCADE"
    )
    contact_id: int = Field(
        sa_type=BigId, foreign_key="contacts.id", primary_key=True, ondelete="CASCADE", index=True
    )
    added_at: datetime = _created()


class Tag(SQLModel, table=True):
    """A tag contacts can carry (``vip``); names are stored folded (lower case, trimmed)."""

    __tablename__ = "tags"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    name: str = Field(unique=True, max_length=100)
    created_at: datetime = _created()


class ContactTag(SQLModel, table=True):
    """A tag on a contact; the key (tag, contact) is an audience's range of a tag."""

    __tablename__ = "contact_tags"

    tag_id: int = Field(sa_type=BigId, foreign_key="tags.id", primary_key=True, ondelete="CASCADE")
    contact_id: int = Field(
        sa_type=BigId, foreign_key="contacts.id", primary_key=True, ondelete="CASCADE", index=True
    )


class Segment(SQLModel, table=True):
    """A saved audience: its definition (lists, tags, where, exclusions) by name."""

    __tablename__ = "segments"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    name: str = Field(unique=True, max_length=200)
    definition: dict[str, Any] = _json(dict)
    created_at: datetime = _created()


class AudienceMember(SQLModel, table=True):
    """A contact of a campaign's audience, evaluated once at its start (one INSERT ...
    SELECT); materialisation pages through these as it does through a list's members.

    ``contact_id`` has no foreign key: PostgreSQL's check would lock (and so write to)
    every selected contact's row (``FOR KEY SHARE``); materialisation joins ``contacts``,
    so a contact deleted since is simply no recipient."""

    __tablename__ = "audience_members"

    campaign_id: int = Field(
        sa_type=BigId, foreign_key="campaigns.id", primary_key=True, ondelete="CASCADE"
    )
    contact_id: int = Field(sa_type=BigId, primary_key=True)


class ImportJob(SQLModel, table=True):
    """One spreadsheet import: its counts and outcome."""

    __tablename__ = "imports"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    list_id: int | None = Field(default=None, sa_type=BigId, foreign_key="lists.id")
    filename: str = Field(default="", max_length=500)
    # running | completed | failed
    status: str = Field(default="running", max_length=16)
    phone_column: str | None = Field(default=None, max_length=200)
    name_column: str | None = Field(default=None, max_length=200)
    region: str = Field(default="US", max_length=8)
    rows_read: int = 0
    imported: int = 0
    updated: int = 0
    duplicates: int = 0
    invalid: int = 0
    skipped_opted_out: int = 0
    error: str | None = None
    # the process running it ("host:pid:boot:start"); tells a killed import from a live one
    runner: str | None = Field(default=None, max_length=200)
    started_at: datetime = _created()
    finished_at: datetime | None = _dt()


class ImportReject(SQLModel, table=True):
    """A rejected spreadsheet row, kept as it was with its row number and reason."""

    __tablename__ = "import_rejects"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    import_id: int = Field(sa_type=BigId, foreign_key="imports.id", index=True, ondelete="CASCADE")
    row_number: int
    column: str | None = Field(default=None, max_length=200)
    reason: str = Field(max_length=500)
    raw: dict[str, Any] = _json(dict)


class Campaign(SQLModel, table=True):
    """A campaign: the validated campaign file plus its lifecycle state.

    A recurring campaign (``cron`` set) is a template; each occurrence is a campaign row
    of its own with ``parent_id`` and ``occurrence_at`` (unique together), so a double
    fire can never materialise an occurrence twice.
    """

    __tablename__ = "campaigns"
    __table_args__ = (
        UniqueConstraint("parent_id", "occurrence_at", name="uq_campaign_occurrence"),
        Index("uq_campaign_step", "step_of", "step", unique=True),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    name: str = Field(max_length=300)
    # draft | scheduled | running | paused | completed | cancelled | failed
    state: str = Field(default="draft", max_length=16, index=True)
    state_reason: str | None = Field(default=None, max_length=1000)
    spec: dict[str, Any] = _json(dict)  # the validated campaign file, as JSON
    message_type: str = Field(max_length=16)  # text | media | interactive | template | list
    list_id: int | None = Field(default=None, sa_type=BigId, foreign_key="lists.id")
    # the audience in force (``[audience]``, a saved segment expanded at create), by
    # names; None for a campaign to one list (``list_id``) or to groups
    audience: dict[str, Any] | None = Field(default=None, sa_column=Column(JsonDoc, nullable=True))
    timezone: str = Field(default="UTC", max_length=64)
    start_at: datetime | None = _dt()
    cron: str | None = Field(default=None, max_length=120)
    parent_id: int | None = Field(default=None, sa_type=BigId, foreign_key="campaigns.id")
    occurrence_at: datetime | None = _dt()
    created_at: datetime = _created()
    updated_at: datetime = _created()
    started_at: datetime | None = _dt()
    finished_at: datetime | None = _dt()
    # hidden from the default list, shown by its filter; reversible (campaigns.archive)
    archived_at: datetime | None = _dt()
    # deleted: hidden everywhere but its own page and reports, never sent again
    deleted_at: datetime | None = _dt()
    # the A/B test's pick (``campaigns/variants.py``): winner, rate, rates, when; None before
    ab_pick: dict[str, Any] | None = Field(default=None, sa_column=Column(JsonDoc, nullable=True))
    # the hold the ``campaign.held`` webhook event last announced (scheduler/holds.py,
    # migration 0022): its kind, words, end and when; None: nothing held or announced
    held_kind: str | None = Field(default=None, max_length=32)
    held_words: str | None = Field(default=None, max_length=1000)
    held_until: datetime | None = _dt()
    held_at: datetime | None = _dt()
    # a message sent by ``POST /api/v1/messages`` (campaigns/direct_messages.py, migration
    # 0029): a one-recipient campaign left out of the campaign lists and the overview
    direct: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default="0")
    )
    # the integrator's own JSON object of a direct message, echoed in its webhook events
    message_metadata: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JsonDoc, nullable=True)
    )
    # a follow-up step's sends (campaigns/followups.py, migration 0032, decision 70): the
    # campaign it follows and the step's number (from 1); unique together
    step_of: int | None = Field(default=None, sa_type=BigId)
    step: int | None = Field(default=None)


class Delivery(SQLModel, table=True):
    """One recipient of one campaign: exists before anything is sent (DESIGN.md 1)."""

    __tablename__ = "deliveries"
    __table_args__ = (
        UniqueConstraint("campaign_id", "target", name="uq_delivery_target"),
        Index("ix_deliveries_claim", "state", "due_at"),
        # the queue in claim order: a claim, a sender's next due row and the senders with
        # queued rows are index ranges whatever the campaign's size (partial: queued only)
        Index(
            "ix_deliveries_queue",
            "campaign_id",
            "sender",
            "due_at",
            "id",
            sqlite_where=text(QUEUED_ROWS),
            postgresql_where=text(QUEUED_ROWS),
        ),
        # a sender's rows in flight (what its daily cap counts beside the rows sent),
        # without reading its queued rows, which have no ``sent_at`` either (partial)
        Index(
            "ix_deliveries_in_flight",
            "sender",
            "sent_at",
            sqlite_where=text(SENDING_ROWS),
            postgresql_where=text(SENDING_ROWS),
        ),
        Index("ix_deliveries_campaign_state", "campaign_id", "state"),
        # a campaign's rows in id order: the listing's pages from a cursor (migration 0024)
        Index("ix_deliveries_campaign_id", "campaign_id", "id"),
        # a campaign's queued rows without a sender (the hand-over's check on every tick;
        # partial, so it holds only those few; migration 0023). Its columns repeat the
        # predicate's so that the check's three equalities match all of them: SQLite
        # (without statistics) then prefers it to ix_deliveries_campaign_state, on which
        # it read every queued row, and to ix_deliveries_queue (a tie, broken by order)
        Index(
            "ix_deliveries_unassigned",
            "campaign_id",
            "state",
            "sender",
            "id",
            sqlite_where=text(UNASSIGNED_QUEUED_ROWS),
            postgresql_where=text(UNASSIGNED_QUEUED_ROWS),
        ),
        Index("ix_deliveries_sender_sent", "sender", "sent_at"),
        # sticky-sender lookups, and the contact cooldown's last sends per contact
        Index("ix_deliveries_contact_sent", "contact_id", "sent_at"),
        # the queue of a campaign sent in recipient time, zone by zone (a claim reads the
        # zones whose window is open, each a range in claim order; partial)
        Index(
            "ix_deliveries_zone_queue",
            "campaign_id",
            "recipient_tz",
            "sender",
            "due_at",
            "id",
            sqlite_where=text(ZONED_QUEUED_ROWS),
            postgresql_where=text(ZONED_QUEUED_ROWS),
        ),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    campaign_id: int = Field(sa_type=BigId, foreign_key="campaigns.id", ondelete="CASCADE")
    target: str = Field(max_length=64)  # E.164 phone or group id ending in @g.us
    target_kind: str = Field(default="phone", max_length=8)  # phone | group
    contact_id: int | None = Field(default=None, sa_type=BigId, foreign_key="contacts.id")
    sender: str | None = Field(default=None, max_length=64)  # sender instance_id (sticky)
    # queued | sending | sent | delivered | read | failed | unknown | skipped
    state: str = Field(default="queued", max_length=16)
    attempts: int = 0
    due_at: datetime | None = _dt()
    lease_until: datetime | None = _dt()
    message_id: str | None = Field(default=None, max_length=128, index=True)
    content: dict[str, Any] = _json(dict)  # the rendered payload for this recipient
    error: str | None = Field(default=None, max_length=1000)
    error_code: str | None = Field(default=None, max_length=32)
    queued_at: datetime = _created()
    # when the last attempt started (claimed): the start of the window in which a status
    # event for the recipient settles an ``unknown`` row (campaigns.delivery_lifecycle)
    attempted_at: datetime | None = _dt()
    sent_at: datetime | None = _dt()
    delivered_at: datetime | None = _dt()
    read_at: datetime | None = _dt()
    failed_at: datetime | None = _dt()
    replied_at: datetime | None = _dt()
    reply_text: str | None = Field(default=None, max_length=4000)
    # the first button or list row the recipient tapped in answer (its id and title)
    tapped_button_id: str | None = Field(default=None, max_length=256)
    tapped_row_id: str | None = Field(default=None, max_length=256)
    tapped_title: str | None = Field(default=None, max_length=256)
    # the recipient's IANA zone when the campaign sends in recipient time (else None)
    recipient_tz: str | None = Field(default=None, max_length=64)
    # the message variant this recipient got (``[[message.variants]]``), else None
    variant: str | None = Field(default=None, max_length=40)


class StatusEvent(SQLModel, table=True):
    """A message status learnt from the webhook; unique per (message, status) to dedupe.

    Events whose message id is not yet recorded on a delivery stay ``applied = False``
    and are applied when the dispatcher records that id. ``chat`` is the recipient as a
    delivery's target (``+<digits>`` or a group id): evidence that settles an ``unknown``
    delivery.
    """

    __tablename__ = "status_events"
    __table_args__ = (
        UniqueConstraint("message_id", "status", name="uq_status_event"),
        Index("ix_status_events_chat", "chat", "instance_id"),
        # the ban-signal check: an instance's latest event with an error code (partial)
        Index(
            "ix_status_events_code",
            "error_code",
            "instance_id",
            "received_at",
            sqlite_where=text(WITH_ERROR_CODE),
            postgresql_where=text(WITH_ERROR_CODE),
        ),
        # sender health (migration 0014): a sender's new events with an error code
        Index(
            "ix_status_events_instance_code",
            "instance_id",
            "received_at",
            sqlite_where=text(WITH_ERROR_CODE),
            postgresql_where=text(WITH_ERROR_CODE),
        ),
        # the inbox's recent unapplied events, and retention's oldest applied ones
        Index("ix_status_events_applied_received", "applied", "received_at"),
        # PostgreSQL only (migration 0013): the unapplied events of the message ids a
        # dispatch just recorded (partial: the lookup after every recorded batch never
        # reads the applied history)
        Index(
            "ix_status_events_unapplied",
            "message_id",
            postgresql_where=text(UNAPPLIED_EVENTS),
        ).ddl_if(dialect="postgresql"),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    message_id: str = Field(max_length=128)
    instance_id: str | None = Field(default=None, max_length=64)
    chat: str | None = Field(default=None, max_length=128)
    status: str = Field(max_length=16)  # sent | delivered | read | failed
    error_code: str | None = Field(default=None, max_length=32)
    occurred_at: datetime = _created()
    received_at: datetime = _created()
    applied: bool = Field(default=False)


class InboundMessage(SQLModel, table=True):
    """An incoming message (a reply); unique per gateway message id."""

    __tablename__ = "inbound_messages"
    # the replies inbox, newest first (a page reads only its rows)
    __table_args__ = (
        Index("ix_inbound_messages_received", "received_at", "id"),
        # the few messages the reply rules have yet to look at (campaigns/reply_rules.py)
        Index(
            "ix_inbound_messages_rules_due",
            "id",
            sqlite_where=text(RULES_DUE),
            postgresql_where=text(RULES_DUE),
        ),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    message_id: str = Field(unique=True, max_length=128)
    instance_id: str | None = Field(default=None, max_length=64)
    chat: str = Field(max_length=128)
    sender_phone: str | None = Field(default=None, max_length=32, index=True)
    contact_id: int | None = Field(default=None, sa_type=BigId, foreign_key="contacts.id")
    text: str = Field(default="", max_length=4000)
    is_opt_out: bool = False
    received_at: datetime = _created()
    # the delivery it answers: the one whose message it quotes, else the one the reply
    # window matched (None: no campaign's message)
    delivery_id: int | None = Field(default=None, sa_type=BigId, index=True)
    # the id of the button or list row tapped (a choice), and of the message it quotes
    button_id: str | None = Field(default=None, max_length=256)
    row_id: str | None = Field(default=None, max_length=256)
    quoted_id: str | None = Field(default=None, max_length=128)
    # when an operator answered it or marked it handled (None: still to handle; the
    # inbox's ``handled`` filter; campaigns/replies.py, migration 0029)
    handled_at: datetime | None = _dt()
    # the reply rules have yet to look at it (set when stored, cleared in the transaction
    # that answers it or finds no rule to; campaigns/reply_rules.py, migration 0033)
    rules_due: bool = Field(default=False, sa_column_kwargs={"server_default": "0"})


class ReplyRule(SQLModel, table=True):
    """An auto-reply rule (issue 32 item 3; campaigns/reply_rules.py): its trigger (a
    keyword, a button or list-row id, any message outside business hours) and the
    message it answers with, at most once per contact every ``limit_hours``."""

    __tablename__ = "reply_rules"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    name: str = Field(max_length=200)
    # keyword | button | away
    trigger: str = Field(max_length=16)
    # the keyword trigger's words and how they match (exact | word | prefix)
    keywords: Any = _json(list)
    match: str = Field(default="word", max_length=16)
    # the button trigger's button or list-row id
    button_id: str | None = Field(default=None, max_length=256)
    # the away trigger's week: {"timezone": ..., "days": {"mon": ["09:00-18:00"], ...}}
    hours: Any = Field(default=None, sa_column=Column(JsonDoc, nullable=True))
    # the answer: a campaign file's [message]
    message: Any = _json(dict)
    limit_hours: float = 24.0
    pause_hours: float = 24.0
    enabled: bool = True
    created_at: datetime = _created()
    updated_at: datetime = _created()


class ReplyRuleAnswer(SQLModel, table=True):
    """A rule's answer to one incoming message: written in the transaction that stores
    the answer's direct message, unique per incoming message (nothing answered twice)."""

    __tablename__ = "reply_rule_answers"
    __table_args__ = (
        # the per-contact limit: this rule's answers to this number since a time
        Index("ix_reply_rule_answers_phone", "phone", "rule_id", "answered_at"),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    inbound_id: int = Field(sa_type=BigId, unique=True)
    rule_id: int = Field(sa_type=BigId)
    phone: str = Field(max_length=32)
    # the direct message that answers (campaigns.direct_messages)
    message_id: int = Field(sa_type=BigId)
    answered_at: datetime = _created()


class ReplyRulePause(SQLModel, table=True):
    """When a person last answered a contact from the inbox: the rules keep quiet for
    that number for their ``pause_hours`` after it."""

    __tablename__ = "reply_rule_pauses"

    phone: str = Field(primary_key=True, max_length=32)
    paused_at: datetime = _created()


class TestSend(SQLModel, table=True):
    """One test send: a campaign's message sent now to one number or group, outside the
    campaign's rows, counts, reports, caps and outbound webhooks (campaigns.test_sends).

    Its state moves with the gateway's status events for its message id, forward only.
    """

    __tablename__ = "test_sends"
    __test__ = False  # not a pytest class

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    campaign_id: int = Field(sa_type=BigId, foreign_key="campaigns.id", index=True)
    target: str = Field(max_length=64)
    contact_id: int | None = Field(default=None, sa_type=BigId)
    sender: str = Field(max_length=64)
    # sending | sent | delivered | read | failed | unknown
    state: str = Field(default="sending", max_length=16)
    message_id: str | None = Field(default=None, max_length=128, index=True)
    content: dict[str, Any] = _json(dict)
    error: str | None = Field(default=None, max_length=1000)
    error_code: str | None = Field(default=None, max_length=32)
    opt_out_overridden: bool = False
    created_at: datetime = _created()
    sent_at: datetime | None = _dt()
    delivered_at: datetime | None = _dt()
    read_at: datetime | None = _dt()
    failed_at: datetime | None = _dt()


class Lease(SQLModel, table=True):
    """A named, expiring lock (e.g. the one scheduler allowed to fire)."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, max_length=100)
    holder: str = Field(max_length=200)
    expires_at: datetime = _created()


class DispatchWorker(SQLModel, table=True):
    """A live dispatching worker (its heartbeat): the senders are shared out among these."""

    __tablename__ = "dispatch_workers"

    holder: str = Field(primary_key=True, max_length=200)
    expires_at: datetime = _created()


class SenderLease(SQLModel, table=True):
    """A sender leased by one worker until ``expires_at`` (renewed by its heartbeat)."""

    __tablename__ = "sender_leases"

    instance_id: str = Field(primary_key=True, max_length=64)
    holder: str = Field(index=True, max_length=200)
    expires_at: datetime = _created()


class IdempotencyKey(SQLModel, table=True):
    """An ``Idempotency-Key`` a client sent with a creating request, and the answer it got.

    Unique per (principal, key). ``status_code`` is None while the first request is still
    being processed; afterwards ``status_code`` and ``response_body`` replay that answer.
    ``fingerprint`` identifies the request (method, path, body) the key was first used for.
    """

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        UniqueConstraint("principal", "key", name="uq_idempotency_key"),
        Index("ix_idempotency_keys_expires", "expires_at"),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    principal: str = Field(max_length=64)
    key: str = Field(max_length=255)
    fingerprint: str = Field(max_length=64)
    method: str = Field(max_length=8)
    path: str = Field(max_length=500)
    status_code: int | None = Field(default=None)
    response_body: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = _created()
    completed_at: datetime | None = _dt()
    expires_at: datetime = _created()


class DashboardSession(SQLModel, table=True):
    """A dashboard sign-in, until it expires or is signed out.

    The browser's cookie holds a random session id; only its SHA-256 (``id_digest``) is
    stored, so reading the table gives no usable cookie. ``key_digest`` names the API key
    that signed in: a session of a key no longer in force is refused.
    """

    __tablename__ = "dashboard_sessions"
    __table_args__ = (Index("ix_dashboard_sessions_expires", "expires_at"),)

    id_digest: str = Field(primary_key=True, max_length=64)
    key_digest: str = Field(max_length=64)
    created_at: datetime = _created()
    expires_at: datetime = _created()
    # the user signed in (None: the deployment's owner key), and the user's API key when
    # the session was opened with one (revoking the key ends the session)
    user_id: int | None = Field(
        default=None, sa_type=BigId, foreign_key="users.id", ondelete="CASCADE", index=True
    )
    api_key_id: int | None = Field(
        default=None, sa_type=BigId, foreign_key="api_keys.id", ondelete="CASCADE"
    )


class CampaignStateCount(SQLModel, table=True):
    """Part of a campaign's count of deliveries in one state, kept by triggers.

    The triggers of migration 0007 add every change of ``deliveries`` here in the same
    transaction; a campaign's count in a state is the sum over its ``slot`` rows
    (PostgreSQL: one slot per server backend, so concurrent writers never wait on one
    another; SQLite: slot 0). Read through ``storage.queries.tallies``.
    """

    __tablename__ = "campaign_state_counts"
    __table_args__ = {"sqlite_with_rowid": False}

    campaign_id: int = Field(sa_type=BigId, primary_key=True)
    state: str = Field(primary_key=True, max_length=16)
    slot: int = Field(primary_key=True)
    n: int = Field(default=0, sa_type=BigId)


class Setting(SQLModel, table=True):
    """One deployment setting an admin changes on the dashboard's Settings page (issue
    31): its name and its value as JSON. Read and written only through
    ``storage.queries.settings``; what the values mean is ``campaigns.deployment_defaults``."""

    __tablename__ = "settings"

    name: str = Field(primary_key=True, max_length=64)
    value: Any = Field(sa_column=Column(JsonDoc, nullable=False))
    updated_at: datetime = _created()
    updated_by: str | None = Field(default=None, max_length=64)


class NumberCheck(SQLModel, table=True):
    """Whether a phone number is on the app, as a gateway's number check answered, and
    when (issue 33, migration 0034). Written and read only through
    ``storage.queries.number_checks``; what the answers do: ``scheduler.number_checks``."""

    __tablename__ = "number_checks"

    number: str = Field(primary_key=True, max_length=64)
    on_app: bool
    checked_at: datetime = _created()


class Counter(SQLModel, table=True):
    """Part of a monitoring counter that never goes down, kept by triggers (migration
    0007): sends by outcome and webhook events by kind; summed over ``slot`` like
    :class:`CampaignStateCount`. Read through ``storage.queries.tallies``."""

    __tablename__ = "counters"
    __table_args__ = {"sqlite_with_rowid": False}

    name: str = Field(primary_key=True, max_length=64)
    slot: int = Field(primary_key=True)
    n: int = Field(default=0, sa_type=BigId)


class WebhookEndpoint(SQLModel, table=True):
    """A receiver of outbound webhooks: its URL, signing secret (``whsec_...``), the
    events it asked for, and whether it is enabled (disabled after a long failure run)."""

    __tablename__ = "webhook_endpoints"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    url: str = Field(max_length=2000)
    secret: str = Field(max_length=100)
    events: list[str] = _json(list)
    description: str = Field(default="", max_length=500)
    enabled: bool = True
    disabled_reason: str | None = Field(default=None, max_length=500)
    # the first failed attempt since the last success (None while it succeeds)
    failing_since: datetime | None = _dt()
    consecutive_failures: int = 0
    created_at: datetime = _created()
    # the secret before the last rotation, which also signs until ``previous_secret_until``
    previous_secret: str | None = Field(default=None, max_length=100)
    previous_secret_until: datetime | None = _dt()


class WebhookSubscription(SQLModel, table=True):
    """One event an enabled endpoint receives: the small table the outbox triggers probe
    (migration 0010); no row for an event, no outbox row and no cost."""

    __tablename__ = "webhook_subscriptions"

    event: str = Field(primary_key=True, max_length=40)
    endpoint_id: int = Field(
        sa_type=BigId, foreign_key="webhook_endpoints.id", primary_key=True, ondelete="CASCADE"
    )


class WebhookMessage(SQLModel, table=True):
    """One event for one endpoint (the outbox), written by a trigger in the transaction of
    the change; ``pending`` until delivered or given up (``failed``). A recipient's
    messages go out in ``id`` order."""

    __tablename__ = "webhook_messages"
    __table_args__ = (
        Index("ix_webhook_messages_endpoint", "endpoint_id", "id"),
        # the outbox's unsettled messages in order (the sender's scan)
        Index(
            "ix_webhook_messages_queue",
            "id",
            sqlite_where=text(PENDING_MESSAGES),
            postgresql_where=text(PENDING_MESSAGES),
        ),
        Index(
            "ix_webhook_messages_pending",
            "endpoint_id",
            "recipient",
            "id",
            sqlite_where=text(PENDING_MESSAGES),
            postgresql_where=text(PENDING_MESSAGES),
        ),
        Index("ix_webhook_messages_webhook_id", "webhook_id", unique=True),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    endpoint_id: int = Field(sa_type=BigId, foreign_key="webhook_endpoints.id", ondelete="CASCADE")
    event: str = Field(max_length=40)
    recipient: str = Field(max_length=200)  # the order key: contact, campaign, instance
    data: str = Field(sa_column=Column(Text, nullable=False))  # the event's data (JSON)
    occurred_at: datetime = _created()
    state: str = Field(default="pending", max_length=16)  # pending | delivered | failed
    attempts: int = 0
    next_attempt_at: datetime | None = _dt()
    first_attempt_at: datetime | None = _dt()
    finished_at: datetime | None = _dt()
    # the ``webhook-id`` header: random, given at the first claim (or with a test event),
    # kept on every retry and replay (migration 0030)
    webhook_id: str | None = Field(default=None, max_length=40)


class WebhookAttempt(SQLModel, table=True):
    """One attempt to deliver a message: an endpoint's delivery log."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_endpoint", "endpoint_id", "id"),)

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    endpoint_id: int = Field(sa_type=BigId, foreign_key="webhook_endpoints.id", ondelete="CASCADE")
    message_id: int = Field(sa_type=BigId)
    attempt: int
    at: datetime = _created()
    status_code: int | None = None
    error: str | None = Field(default=None, max_length=500)
    outcome: str = Field(max_length=16)  # delivered | retrying | failed
    duration_ms: int = 0


class User(SQLModel, table=True):
    """A named user: a role (``admin``, ``operator``, ``viewer``: ``gatecast.web.roles``)
    and an argon2 password hash; a disabled user can neither sign in nor use a key."""

    __tablename__ = "users"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    name: str = Field(unique=True, max_length=64)
    role: str = Field(max_length=16)
    password_hash: str = Field(max_length=200)
    disabled: bool = False
    created_at: datetime = _created()
    password_changed_at: datetime = _created()


class ApiKeyRecord(SQLModel, table=True):
    """A user's API key: only its SHA-256 is stored (the key is shown once), a role no
    higher than the user's, an optional expiry; a revoked key stays listed."""

    __tablename__ = "api_keys"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    user_id: int = Field(sa_type=BigId, foreign_key="users.id", ondelete="CASCADE", index=True)
    digest: str = Field(unique=True, max_length=64)
    prefix: str = Field(max_length=16)  # the key's first characters, to tell keys apart
    label: str = Field(default="", max_length=200)
    role: str = Field(max_length=16)
    created_at: datetime = _created()
    expires_at: datetime | None = _dt()
    revoked_at: datetime | None = _dt()
    last_used_at: datetime | None = _dt()


class AuditEntry(SQLModel, table=True):
    """One change made through the API, the dashboard or the CLI, or one sign-in: who
    (``actor``, ``role``), when, what (``action``, the target), from where (``source``),
    how it ended (``outcome``, ``status``) and a small JSON detail without secrets."""

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_at", "at"),
        Index("ix_audit_log_actor", "actor", "id"),
    )

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    at: datetime = _created()
    actor: str = Field(max_length=100)
    role: str = Field(default="", max_length=16)
    action: str = Field(max_length=200)
    target_type: str | None = Field(default=None, max_length=40)
    target_id: str | None = Field(default=None, max_length=100)
    source: str = Field(default="", max_length=100)
    outcome: str = Field(max_length=16)  # ok | refused | failed
    status: int | None = None
    detail: dict[str, Any] = _json(dict)
    #: the API key that acted (a user's key, or the one its session was opened with)
    key_id: int | None = Field(default=None, sa_type=BigId)
    #: a change's replaced values: ``{"role": ["operator", "viewer"]}`` (before, after)
    changes: dict[str, Any] | None = Field(default=None, sa_column=Column(JsonDoc, nullable=True))


class MediaFile(SQLModel, table=True):
    """An uploaded media file (image, video, audio or document): its bytes, the type
    found by sniffing them, and the key its signed public URLs are made with
    (``campaigns.media``). The bytes live here so that every process of a deployment
    (several workers, several machines on PostgreSQL) serves them alike."""

    __tablename__ = "media"

    id: int | None = Field(default=None, sa_type=BigId, primary_key=True)
    #: the name the operator's file had (cleaned: no folders), shown and used in URLs
    name: str = Field(max_length=255)
    kind: str = Field(max_length=16)  # image | video | audio | document
    content_type: str = Field(max_length=100)
    size: int = Field(sa_column=Column(BigInteger(), nullable=False))
    sha256: str = Field(max_length=64)
    #: the secret of this file's URL signatures (HMAC-SHA256), random per file
    url_key: str = Field(max_length=64)
    data: bytes = Field(sa_column=Column(LargeBinary(), nullable=False))
    created_by: str = Field(default="", max_length=100)
    created_at: datetime = _created()


__all__ = [
    "HEAD_REVISION",
    "PENDING_MESSAGES",
    "QUEUED_ROWS",
    "SENDING_ROWS",
    "UNASSIGNED_QUEUED_ROWS",
    "WITH_ERROR_CODE",
    "ApiKeyRecord",
    "AudienceMember",
    "AuditEntry",
    "Campaign",
    "CampaignStateCount",
    "Contact",
    "ContactList",
    "ContactSearchPending",
    "ContactSearchPendingRange",
    "ContactTag",
    "Counter",
    "DashboardSession",
    "Delivery",
    "DispatchWorker",
    "IdempotencyKey",
    "ImportJob",
    "ImportReject",
    "InboundMessage",
    "Instance",
    "Lease",
    "ListMember",
    "MediaFile",
    "Segment",
    "SenderChat",
    "SenderHealthChange",
    "SenderLease",
    "Setting",
    "StatusEvent",
    "Tag",
    "User",
    "WebhookAttempt",
    "WebhookEndpoint",
    "WebhookMessage",
    "WebhookSubscription",
]
