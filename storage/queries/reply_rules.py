"""SQL for the reply rules (``reply_rules``, ``reply_rule_answers``, ``reply_rule_pauses``
and ``inbound_messages.rules_due``); what a rule means is ``campaigns.reply_rules``'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, delete, func, insert, select, text, update

from storage import tables
from storage.dialect import dialect_insert
from storage.predicates import RULES_DUE

_r = tables.reply_rules
_a = tables.reply_rule_answers
_p = tables.reply_rule_pauses
_i = tables.inbound_messages


def list_rules(conn: Connection, *, enabled_only: bool = False) -> Sequence[RowMapping]:
    """Every rule by id (only the enabled ones when asked)."""
    stmt = select(_r).order_by(_r.c.id)
    if enabled_only:
        stmt = stmt.where(_r.c.enabled.is_(True))
    return conn.execute(stmt).mappings().all()


def get_rule(conn: Connection, rule_id: int) -> RowMapping | None:
    """One rule (None: no rule has this id)."""
    return conn.execute(select(_r).where(_r.c.id == rule_id)).mappings().one_or_none()


def insert_rule(conn: Connection, values: Mapping[str, Any]) -> int:
    """Store a new rule; its id."""
    return int(conn.execute(insert(_r).values(**values).returning(_r.c.id)).scalar_one())


def update_rule(conn: Connection, rule_id: int, values: Mapping[str, Any]) -> bool:
    """Replace a rule's fields; False when no rule has this id."""
    return bool(conn.execute(update(_r).where(_r.c.id == rule_id).values(**values)).rowcount)


def delete_rule(conn: Connection, rule_id: int) -> bool:
    """Remove a rule (its answers stay: they are the record); False when none."""
    return bool(conn.execute(delete(_r).where(_r.c.id == rule_id)).rowcount)


def answer_counts(conn: Connection) -> dict[int, int]:
    """How many times each rule answered, by rule id."""
    stmt = select(_a.c.rule_id, func.count()).group_by(_a.c.rule_id)
    return {int(r): int(n) for r, n in conn.execute(stmt).all()}


def due_messages(conn: Connection, limit: int) -> Sequence[RowMapping]:
    """The oldest incoming messages the rules have yet to look at (the partial index)."""
    stmt = (
        select(
            _i.c.id,
            _i.c.instance_id,
            _i.c.sender_phone,
            _i.c.text,
            _i.c.button_id,
            _i.c.row_id,
            _i.c.is_opt_out,
        )
        .where(text(RULES_DUE))
        .order_by(_i.c.id)
        .limit(limit)
    )
    return conn.execute(stmt).mappings().all()


def clear_due(conn: Connection, inbound_ids: Sequence[int]) -> None:
    """The rules looked at these messages."""
    if inbound_ids:
        conn.execute(update(_i).where(_i.c.id.in_(list(inbound_ids))).values(rules_due=False))


def answered_since(conn: Connection, rule_id: int, phone: str, since: datetime) -> bool:
    """Whether ``rule_id`` answered ``phone`` at or after ``since``."""
    stmt = select(_a.c.id).where(
        _a.c.phone == phone, _a.c.rule_id == rule_id, _a.c.answered_at >= since
    )
    return conn.execute(stmt.limit(1)).first() is not None


def record_answer(
    conn: Connection, *, inbound_id: int, rule_id: int, phone: str, message_id: int, now: datetime
) -> None:
    """Note a rule's answer to one incoming message (a second one for the same message
    fails on the unique key: its transaction, and so its message, is rolled back)."""
    conn.execute(
        insert(_a).values(
            inbound_id=inbound_id,
            rule_id=rule_id,
            phone=phone,
            message_id=message_id,
            answered_at=now,
        )
    )


def paused_at(conn: Connection, phone: str) -> datetime | None:
    """When a person last answered ``phone`` from the inbox (None: never)."""
    return conn.execute(select(_p.c.paused_at).where(_p.c.phone == phone)).scalar_one_or_none()


def pause(conn: Connection, phone: str, now: datetime) -> None:
    """A person answered ``phone`` from the inbox at ``now``."""
    stmt = dialect_insert(conn, _p).values(phone=phone, paused_at=now)
    conn.execute(stmt.on_conflict_do_update(index_elements=["phone"], set_={"paused_at": now}))


def answers_to(conn: Connection, phone: str) -> Sequence[RowMapping]:
    """The rules' answers to ``phone``, oldest first."""
    stmt = select(_a).where(_a.c.phone == phone).order_by(_a.c.id)
    return conn.execute(stmt).mappings().all()
