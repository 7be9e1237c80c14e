"""Test helpers: campaigns and delivery rows written straight into a real database."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, insert, select

from gateway.messages import Message, Text, message_to_dict
from gateway.outcomes import OutcomeKind, SendOutcome
from scheduler.clock import Clock
from scheduler.dispatcher import Dispatcher
from storage import tables

BASE_SPEC: dict[str, Any] = {
    "name": "t",
    "list": "customers",  # a valid stored spec (the list need not exist here)
    "groups": [],
    "instances": [],
    "message": {"type": "text", "text": "hi"},
    "schedule": {
        "start": None,
        "timezone": "UTC",
        "window": None,
        "cron": None,
        "missed_grace_minutes": 60,
    },
    "pace": {"per_minute": 0, "delay_seconds": [0, 0], "daily_cap": None},
    "retry": {"max_attempts": 4, "backoff_seconds": 30},
    "safety": {"max_failure_rate": 0.5, "min_sample": 20},
}


def spec(**sections: dict[str, Any]) -> dict[str, Any]:
    """BASE_SPEC with the given sections updated."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE_SPEC.items()}
    for name, values in sections.items():
        if isinstance(out.get(name), dict):
            out[name].update(values)
        else:
            out[name] = values
    return out


def add_instances(engine: Engine, ids: Sequence[str], now: datetime) -> None:
    """Connected instance rows."""
    t = tables.instances
    with engine.begin() as conn:
        conn.execute(
            insert(t),
            [
                {"instance_id": i, "state": "connected", "created_at": now, "updated_at": now}
                for i in ids
            ],
        )


def add_running_campaign(
    engine: Engine,
    campaign_spec: dict[str, Any],
    *,
    recipients: int,
    senders: Sequence[str],
    now: datetime,
    state: str = "running",
    phone_base: int = 15550000000,
    start_at: datetime | None = None,
) -> int:
    """A campaign in ``state`` with ``recipients`` queued rows spread over ``senders``."""
    c = tables.campaigns
    ct = tables.contacts
    d = tables.deliveries
    with engine.begin() as conn:
        key = conn.execute(
            insert(c).values(
                name=campaign_spec.get("name", "t"),
                state=state,
                spec=campaign_spec,
                message_type="text",
                timezone=campaign_spec["schedule"]["timezone"],
                start_at=start_at,
                created_at=now,
                updated_at=now,
            )
        ).inserted_primary_key
        assert key is not None
        cid = key[0]
        phones = [f"+{phone_base + i}" for i in range(recipients)]
        existing = {
            p: i for p, i in conn.execute(select(ct.c.phone, ct.c.id).where(ct.c.phone.in_(phones)))
        }
        new = [p for p in phones if p not in existing]
        if new:
            conn.execute(
                insert(ct),
                [
                    {
                        "phone": p,
                        "name": f"n{p}",
                        "attributes": {},
                        "created_at": now,
                        "updated_at": now,
                    }
                    for p in new
                ],
            )
        ids: dict[str, int] = dict(
            conn.execute(select(ct.c.phone, ct.c.id).where(ct.c.phone.in_(phones))).all()
        )
        if recipients:
            conn.execute(
                insert(d),
                [
                    {
                        "campaign_id": cid,
                        "target": p,
                        "target_kind": "phone",
                        "contact_id": ids[p],
                        "sender": senders[n % len(senders)],
                        "state": "queued",
                        "due_at": now,
                        "content": message_to_dict(Text(f"hello {p}")),
                        "queued_at": now,
                    }
                    for n, p in enumerate(phones)
                ],
            )
    return int(cid)


@dataclass
class RecordingSender:
    """A gateway double that records (instance, to, time) and answers from a script."""

    clock: Clock
    script: dict[str, list[SendOutcome]] = field(default_factory=dict)
    sent: list[tuple[str, str, datetime]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        with self.lock:
            queue = self.script.get(to)
            if queue:
                outcome = queue.pop(0)
            else:
                self.counter += 1
                outcome = SendOutcome(OutcomeKind.ACCEPTED, message_id=f"M{self.counter:08d}")
            if outcome.kind is OutcomeKind.ACCEPTED:
                self.sent.append((instance_id, to, self.clock.now()))
            return outcome


def states_of(engine: Engine, campaign_id: int) -> dict[str, str]:
    """target -> state for the campaign."""
    d = tables.deliveries
    with engine.connect() as conn:
        rows = conn.execute(
            select(d.c.target, d.c.state).where(d.c.campaign_id == campaign_id)
        ).all()
    return {str(t): str(s) for t, s in rows}


def no_events(conn: object, ids: object, now: object) -> int:
    """An ``apply_pending`` hook that applies nothing (no webhook events in the test)."""
    return 0


def quiet_dispatcher(
    engine: Engine, sender: RecordingSender, clock: Clock, **kw: Any
) -> Dispatcher:
    """A dispatcher sending through ``sender`` on ``clock``, applying no webhook events."""
    return Dispatcher(engine, lambda: sender, clock=clock, apply_pending=no_events, **kw)
