"""Follow-up steps: the messages a campaign sends after its first one, to each contact
for whom a step's condition holds (issue 32, item 2; docs/architecture.md, decision 70).

A step's sends are a hidden campaign of their own (``campaigns.step_of``, ``step``):
its rows are ordinary delivery rows, claimed by the dispatcher with the pace, caps,
window and sender of every send (each row keeps the sender of the contact's first
message). :func:`evaluate` (the leader, every few seconds) finds, in one statement per
step, whom a step is due for and inserts their rows in one transaction; the row's key
(step campaign, target) makes an evaluation interrupted and run again harmless: no
second row, and whoever was not reached is found again. :func:`recheck` runs the same
condition in the claim's transaction: a contact who answered or opted out since the
row was made is skipped, never sent to.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping

from campaigns import lifecycle
from campaigns.campaign_file import (
    MAX_RETRY_HORIZON,
    CampaignFileError,
    CampaignSpec,
    StepSpec,
    stored_spec,
)
from campaigns.delivery_lifecycle import OPEN, SEND_SKIPPED, SKIP_QUEUED
from campaigns.gateway_events import fold_keyword
from campaigns.render import ContactData, RenderError, recipient_rng, render_message
from campaigns.service import insert_draft
from gateway.messages import message_to_dict
from storage import states
from storage.queries import campaigns as cq
from storage.queries import deliveries as dq
from storage.queries import followups as fq
from storage.queries import tallies
from storage.queries.followups import Condition

log = logging.getLogger("gatecast.followups")

#: why a claimed step row was not sent
ANSWERED = "answered or opted out before this step was sent"
#: why a step's waiting rows were skipped: its campaign was cancelled, failed or deleted
STOPPED = "campaign cancelled"
#: why a step campaign is paused
PAUSED = "its campaign is paused"
#: the most contacts one step takes in one transaction (the rest at the next pass)
BATCH = 2000


@dataclass(frozen=True)
class StepRule:
    """Step ``step`` (from 1) of campaign ``campaign_id``."""

    campaign_id: int
    step: int
    spec: StepSpec

    def condition(self, now: datetime) -> Condition:
        """The step's condition for the SQL, its waiting measured back from ``now``."""
        wait = self.spec.wait
        return Condition(
            when=self.spec.when,
            before=None if wait is None else now - wait,
            button=self.spec.button,
            row=self.spec.row,
            stop_on_reply=self.spec.stop_on_reply,
        )


def _words(text: str) -> str:
    return " " + " ".join(re.sub(r"[^\w]+", " ", fold_keyword(text)).split()) + " "


def keyword_matches(keyword: str, text: str) -> bool:
    """True when ``text`` holds ``keyword`` as whole words, case and accents aside."""
    key = _words(keyword)
    return key.strip() != "" and key in _words(text)


def _holding(conn: Connection, rule: StepRule, rows: list[RowMapping]) -> list[RowMapping]:
    """``rows`` (due by SQL) whose contact's replies hold the step's keyword, when the
    step is a ``replied`` one; all of them otherwise."""
    if rule.spec.when != "replied" or not rows:
        return rows
    keyword = rule.spec.keyword or ""
    texts = fq.texts_since(conn, rows)
    return [
        r
        for r in rows
        if any(keyword_matches(keyword, t) for t in texts.get(int(r["contact_id"]), []))
    ]


def due(
    conn: Connection,
    rule: StepRule,
    now: datetime,
    *,
    child_id: int | None = None,
    fresh: bool = True,
    targets: Sequence[str] | None = None,
) -> list[RowMapping]:
    """The first-message rows for whom ``rule`` holds at ``now`` (see
    :func:`storage.queries.followups.due_rows`)."""
    rows = fq.due_rows(
        conn,
        rule.campaign_id,
        rule.condition(now),
        child_id=child_id,
        fresh=fresh,
        targets=targets,
    )
    return _holding(conn, rule, rows)


def steps_of(raw_spec: Any, campaign_id: int) -> list[StepSpec]:
    """A stored spec's steps ([] without any, or unreadable)."""
    if not isinstance(raw_spec, dict) or not raw_spec.get("steps"):
        return []
    try:
        return list(stored_spec(raw_spec, campaign_id).steps)
    except CampaignFileError as exc:
        log.error("campaign %s has an unreadable spec: %s", campaign_id, exc)
        return []


def _child_spec(spec: CampaignSpec, step: int) -> CampaignSpec:
    name = f"{spec.name} - step {step}"
    if len(name) > 300:
        name = name[-300:]
    # the same conversation: the contact cooldown (against any campaign's message) would
    # skip every step sent within it of the first message
    safety = spec.safety.model_copy(update={"contact_cooldown_hours": 0.0})
    return spec.model_copy(
        update={
            "name": name,
            "message": spec.steps[step - 1].message,
            "steps": [],
            "ab": None,
            "safety": safety,
        }
    )


def _make_child(
    conn: Connection, campaign_id: int, raw: RowMapping, step: int, now: datetime
) -> int:
    spec = stored_spec(raw["spec"], campaign_id)
    child = _child_spec(spec, step)
    return insert_draft(
        conn,
        child,
        now=now,
        start_at=now,
        list_id=raw["list_id"],
        direct=True,
        step_of=campaign_id,
        step=step,
    )


def _rows(
    conn: Connection, child_id: int, message: Any, due_rows: list[RowMapping], now: datetime
) -> list[tuple[Any, ...]]:
    content = dq.bind_processor(conn, "content")
    at = dq.bind_processor(conn, "due_at")(now)
    out: list[tuple[Any, ...]] = []
    for r in due_rows:
        target = str(r["target"])
        data = ContactData(phone=target, name=r["name"] or "", attributes=r["attributes"] or {})
        error: str | None = None
        try:
            rendered = render_message(message, data, recipient_rng(child_id, target))
        except RenderError as exc:
            error = f"the step's message cannot be rendered: {exc}"[:1000]
            state, due_at, body = states.SKIPPED, None, content({})
        else:
            state, due_at, body = states.QUEUED, at, content(message_to_dict(rendered))
        out.append(
            (
                child_id,
                target,
                "phone",
                r["contact_id"],
                r["sender"],
                state,
                0,
                due_at,
                body,
                error,
                at,
                r["recipient_tz"],
            )
        )
    return out


def evaluate_step(engine: Engine, raw: RowMapping, rule: StepRule, now: datetime) -> int:
    """One step of one campaign: the rows of those it is due for, in one transaction;
    how many were made. Its step campaign runs while it has rows to send."""
    with engine.begin() as conn:
        children = fq.step_campaigns(conn, rule.campaign_id)
        child_id, child_state = children.get(rule.step, (None, None))
        rows = due(conn, rule, now, child_id=child_id)[:BATCH]
        if rows and child_id is None:
            child_id = _make_child(conn, rule.campaign_id, raw, rule.step, now)
            child_state = lifecycle.DRAFT
        if child_id is None:
            return 0
        dq.insert_new_deliveries(conn, _rows(conn, child_id, rule.spec.message, rows, now))
        if child_state != lifecycle.RUNNING and tallies.has_pending(
            conn, child_id, open_states=OPEN
        ):
            lifecycle.transition(conn, child_id, lifecycle.RUNNING, now=now)
    if rows:
        log.info("campaign %s step %s: %s due", rule.campaign_id, rule.step, len(rows))
    return len(rows)


def follow_campaigns(engine: Engine, now: datetime) -> None:
    """Step campaigns follow their campaign: paused while it is paused (resumed by
    :func:`evaluate_step` once it runs again), cancelled with their waiting rows skipped
    when it is cancelled, failed or deleted."""
    with engine.connect() as conn:
        found = fq.step_campaign_states(conn)
    for child, state, parent_state, deleted in found:
        ended = deleted or parent_state in (lifecycle.CANCELLED, lifecycle.FAILED)
        with engine.begin() as conn:
            try:
                if ended:
                    lifecycle.transition(conn, child, lifecycle.CANCELLED, reason=STOPPED, now=now)
                    cq.skip_queued(conn, child, STOPPED, move=SKIP_QUEUED, now=now)
                elif parent_state == lifecycle.PAUSED and state == lifecycle.RUNNING:
                    lifecycle.transition(conn, child, lifecycle.PAUSED, reason=PAUSED, now=now)
            except lifecycle.InvalidTransition:
                continue  # moved meanwhile: the next pass looks again


def evaluate(engine: Engine, now: datetime) -> int:
    """Every step of every running campaign (and of those finished in the last
    ``MAX_RETRY_HORIZON``, the longest wait a step may have): the rows of those it is
    due for; how many rows were made. Step campaigns follow their campaign's pause and
    cancellation first (:func:`follow_campaigns`)."""
    follow_campaigns(engine, now)
    with engine.connect() as conn:
        campaigns = fq.campaigns_with_steps(conn, now - MAX_RETRY_HORIZON)
    made = 0
    for raw in campaigns:
        cid = int(raw["id"])
        for i, step in enumerate(steps_of(raw["spec"], cid), start=1):
            made += evaluate_step(engine, raw, StepRule(cid, i, step), now)
    return made


def rule_of(conn: Connection, campaign_id: int, step: int) -> StepRule | None:
    """The rule of step ``step`` of ``campaign_id`` (None: no such step any more)."""
    raw = fq.campaign_spec(conn, campaign_id)
    steps = steps_of(raw, campaign_id)
    if not 1 <= step <= len(steps):
        return None
    return StepRule(campaign_id, step, steps[step - 1])


def recheck(
    conn: Connection, rule: StepRule, rows: list[dq.ClaimedRow], now: datetime
) -> list[dq.ClaimedRow]:
    """In the claim's transaction: the claimed step rows whose condition still holds;
    the others are skipped (:data:`ANSWERED`), never sent."""
    if not rows:
        return rows
    ok = {
        str(r["target"])
        for r in due(conn, rule, now, fresh=False, targets=[r.target for r in rows])
    }
    dropped = [(r.id, ANSWERED, None) for r in rows if r.target not in ok]
    if dropped:
        dq.record_terminal(conn, dropped, move=SEND_SKIPPED, now=now)
    return [r for r in rows if r.target in ok]


@dataclass(frozen=True)
class StepCounts:
    """A step of a campaign as its faces show it: condition and delivery states."""

    step: int
    when: str
    condition: str
    message_type: str
    campaign_id: int | None
    counts: dict[str, int]


def step_counts(conn: Connection, campaign_id: int, spec: CampaignSpec) -> list[StepCounts]:
    """Each step of ``campaign_id`` with its rows' counts per state (none made yet: empty)."""
    children = fq.step_campaigns(conn, campaign_id)
    out = []
    for i, step in enumerate(spec.steps, start=1):
        child = children.get(i)
        counts = tallies.delivery_counts(conn, child[0]) if child else {}
        out.append(
            StepCounts(
                step=i,
                when=step.when,
                condition=step.label(),
                message_type=step.message.type,
                campaign_id=None if child is None else child[0],
                counts={k: v for k, v in counts.items() if v},
            )
        )
    return out


__all__ = [
    "ANSWERED",
    "StepCounts",
    "StepRule",
    "due",
    "evaluate",
    "evaluate_step",
    "follow_campaigns",
    "keyword_matches",
    "recheck",
    "rule_of",
    "step_counts",
    "steps_of",
]
