"""SQL of follow-up steps (docs/architecture.md, decision 70): who a step is due for,
in bulk, and the step campaigns of a campaign.

A step is evaluated against the rows of its campaign's first message (``d``): the
contact's, sent, the contact not opted out, and the step's own condition. The same
statement answers both questions: who gets a new step row (``fresh``: no row of this step
yet, none of the campaign's steps pending for the contact) and, in the claim's
transaction, whether a claimed step row still may go (``targets``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, and_, exists, select

from storage import states, tables

_d = tables.deliveries
_c = tables.contacts
_im = tables.inbound_messages
_camp = tables.campaigns


@dataclass(frozen=True)
class Condition:
    """A step's condition as the SQL needs it (``campaigns.campaign_file.StepSpec``)."""

    when: str
    #: no_reply: sent before this moment; read_no_reply: read before it
    before: datetime | None = None
    button: str | None = None
    row: str | None = None
    stop_on_reply: bool = True


def _reply_since(first: Any) -> Any:
    """A message of the contact received since the first message's row was made (not
    since its send: a reply's time is the gateway's, often in whole seconds, so one
    within the second of the send would compare as before it; earlier is the safe side:
    a no-reply step stops)."""
    return exists().where(
        _im.c.contact_id == first.c.contact_id,
        _im.c.received_at >= first.c.queued_at,
    )


def due_rows(
    conn: Connection,
    campaign_id: int,
    cond: Condition,
    *,
    child_id: int | None = None,
    fresh: bool = True,
    targets: Sequence[str] | None = None,
) -> list[RowMapping]:
    """The first-message rows of ``campaign_id`` for whom ``cond`` holds now (with the
    contact's phone, name and attributes): with ``fresh``, only those with no row in the
    step campaign ``child_id`` and no step of this campaign pending; ``targets`` limits
    them to these targets."""
    d = _d.alias("d")
    conds: list[Any] = [
        d.c.campaign_id == campaign_id,
        d.c.target_kind == "phone",
        d.c.contact_id.is_not(None),
        d.c.sent_at.is_not(None),
        _c.c.opted_out.is_(False),
    ]
    if targets is not None:
        conds.append(d.c.target.in_(list(targets)))
    if cond.when in ("no_reply", "read_no_reply"):
        if cond.when == "no_reply":
            conds.append(d.c.sent_at <= cond.before)
        else:
            conds += [d.c.read_at.is_not(None), d.c.read_at <= cond.before]
        if cond.stop_on_reply:
            conds += [d.c.replied_at.is_(None), ~_reply_since(d)]
    elif cond.when == "tapped":
        if cond.button is not None:
            conds.append(d.c.tapped_button_id == cond.button)
        else:
            conds.append(d.c.tapped_row_id == cond.row)
    else:  # replied: the keyword is matched on the texts (campaigns.followups)
        conds.append(_reply_since(d))
    if fresh:
        if child_id is not None:
            s = _d.alias("s")
            conds.append(~exists().where(s.c.campaign_id == child_id, s.c.target == d.c.target))
        p = _d.alias("p")
        conds.append(
            ~exists()
            .select_from(p.join(_camp, _camp.c.id == p.c.campaign_id))
            .where(
                _camp.c.step_of == campaign_id,
                p.c.contact_id == d.c.contact_id,
                p.c.state.in_([states.QUEUED, states.SENDING]),
            )
        )
    stmt = (
        select(
            d.c.target,
            d.c.contact_id,
            d.c.sender,
            d.c.recipient_tz,
            d.c.queued_at,
            _c.c.name,
            _c.c.attributes,
        )
        .select_from(d.join(_c, _c.c.id == d.c.contact_id))
        .where(and_(*conds))
        .order_by(d.c.id)
    )
    return list(conn.execute(stmt).mappings())


def texts_since(conn: Connection, rows: Sequence[RowMapping]) -> dict[int, list[str]]:
    """Each contact's messages received since its first message's row was made."""
    out: dict[int, list[str]] = {}
    for chunk_start in range(0, len(rows), 500):
        chunk = rows[chunk_start : chunk_start + 500]
        since = {int(r["contact_id"]): r["queued_at"] for r in chunk}
        found = conn.execute(
            select(_im.c.contact_id, _im.c.text, _im.c.received_at).where(
                _im.c.contact_id.in_(list(since))
            )
        )
        for contact_id, text, at in found:
            start = since[int(contact_id)]
            if start is None or at >= start:
                out.setdefault(int(contact_id), []).append(str(text or ""))
    return out


def step_campaigns(conn: Connection, campaign_id: int) -> dict[int, tuple[int, str]]:
    """The step campaigns of ``campaign_id``: step number -> (id, state)."""
    found = conn.execute(
        select(_camp.c.step, _camp.c.id, _camp.c.state).where(_camp.c.step_of == campaign_id)
    )
    return {int(step): (int(cid), str(state)) for step, cid, state in found}


def campaigns_with_steps(conn: Connection, finished_since: datetime) -> list[RowMapping]:
    """Running campaigns and those finished since ``finished_since`` that may have
    steps (not themselves a step; their spec is read by the caller)."""
    stmt = select(_camp.c.id, _camp.c.spec, _camp.c.state, _camp.c.list_id).where(
        _camp.c.step_of.is_(None),
        _camp.c.deleted_at.is_(None),
        _camp.c.state.in_(["running", "completed"]),
        (_camp.c.finished_at.is_(None)) | (_camp.c.finished_at >= finished_since),
    )
    return list(conn.execute(stmt).mappings())


def step_campaign_states(conn: Connection) -> list[tuple[int, str, str, bool]]:
    """Every step campaign not ended: (id, its state, its campaign's state, whether its
    campaign is deleted)."""
    parent = _camp.alias("parent")
    found = conn.execute(
        select(_camp.c.id, _camp.c.state, parent.c.state, parent.c.deleted_at.is_not(None))
        .select_from(_camp.join(parent, parent.c.id == _camp.c.step_of))
        .where(_camp.c.step_of.is_not(None), _camp.c.state.in_(["running", "paused", "draft"]))
    )
    return [(int(i), str(s), str(ps), bool(gone)) for i, s, ps, gone in found]


def campaign_spec(conn: Connection, campaign_id: int) -> Any:
    """The stored spec of ``campaign_id`` (None: no such campaign)."""
    return conn.execute(select(_camp.c.spec).where(_camp.c.id == campaign_id)).scalar_one_or_none()


__all__ = [
    "Condition",
    "campaign_spec",
    "campaigns_with_steps",
    "due_rows",
    "step_campaign_states",
    "step_campaigns",
    "texts_since",
]
