"""The outbound event types (decision 67): every type the triggers write is declared
with its schema, documented, and each arises in the transaction of its change (both
dialects), its payload valid against the declared schema."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, update

from campaigns import audiences
from campaigns import instances as domain
from campaigns import webhook_endpoints as we
from campaigns import webhook_events as events
from campaigns.importer import ImportOptions, import_file
from gatecast.web.api.webhook_events_doc import add_webhooks, event_types
from storage import outbox, tables
from storage.queries import instances as iq
from storage.queries import sender_care
from tests.scheduler.helpers import BASE_SPEC, add_instances, add_running_campaign

ROOT = Path(__file__).resolve().parents[2]
_d = tables.deliveries


def test_every_event_written_is_declared_documented_and_in_the_openapi_document() -> None:
    written = {e for source in outbox.SOURCES for e in source.events}
    assert written == set(events.EVENT_DATA), "a trigger's event without a schema, or unused"
    assert tuple(events.EVENT_DATA) == we.EVENTS
    assert set(event_types()) == written | {events.TEST_EVENT}
    doc = add_webhooks({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}})
    assert list(doc["webhooks"]) == event_types()
    for event, item in doc["webhooks"].items():
        ref = item["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.rsplit("/", 1)[-1] in doc["components"]["schemas"], event
    text = (ROOT / "docs" / "webhooks.md").read_text()
    examples: dict[str, list[dict[str, object]]] = {}
    for kind, block in re.findall(r"```(jsonl?)\n(.*?)```", text, re.S):
        for body in [block] if kind == "json" else block.splitlines():
            if body.strip():
                example = json.loads(body)
                if isinstance(example, dict) and "type" in example:
                    examples.setdefault(str(example["type"]), []).append(example)
    for event in event_types():  # a row in the table and an example body, valid
        assert f"| `{event}` |" in text, event
        assert examples.get(event), f"docs/webhooks.md has no example of {event}"
        for example in examples[event]:
            events.validate(example)


def _bodies(engine: Engine) -> list[dict[str, Any]]:
    """Every message written, as the sender would post it (the claim adds only a reply's
    delivery and a direct message's metadata), each checked against its schema."""
    m = tables.webhook_messages
    with engine.connect() as conn:
        rows = conn.execute(select(m.c.event, m.c.data, m.c.occurred_at).order_by(m.c.id)).all()
    bodies = []
    for event, data, at in rows:
        body = {
            "type": event,
            "timestamp": at.isoformat().replace("+00:00", "Z"),
            "data": json.loads(data),
        }
        events.validate(body)  # the declared schema takes the real payload
        bodies.append(body)
    return bodies


def test_each_new_event_arises_in_the_transaction_of_its_change(
    engine: Engine, tmp_path: Path
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    add_instances(engine, ["s1"], now)
    cid = add_running_campaign(engine, BASE_SPEC, recipients=3, senders=["s1"], now=now)
    created = we.create_endpoint(engine, "https://a.example/hooks", ["*"])
    endpoint = created.endpoint.id

    with pytest.raises(RuntimeError), engine.begin() as conn:  # rolled back: no event
        iq.pause(conn, "s1", "never", now=now)
        raise RuntimeError
    assert domain.pause(engine, "s1", "checking the account", now=now)
    assert not domain.pause(engine, "s1", "again", now=now)  # already paused: no event
    with engine.begin() as conn:
        sender_care.log_change(
            conn, "s1", at=now, level_from="low", level_to="high", score=61.0, reason="463s"
        )
        sender_care.set_health(conn, "s1", score=61.0, at=now, level="high", resume_at=None)
    domain.resume(engine, "s1", now=now)  # a person: resumed, and health back to low
    with engine.begin() as conn:
        iq.mark_state(conn, "s1", "logged_out", now=now)
        iq.mark_state(conn, "s1", "disconnected", now=now)  # not linked before: no event
        iq.mark_state(conn, "s1", "connected", now=now, phone="+15550009999")
    with engine.connect() as conn:
        contact_id, queued_id = conn.execute(
            select(_d.c.contact_id, _d.c.id).where(_d.c.campaign_id == cid).order_by(_d.c.id)
        ).first() or (None, None)
    assert contact_id is not None
    audiences.set_contact_opt_out(engine, contact_id, True, "STOP", now=now)
    audiences.set_contact_opt_out(engine, contact_id, False, "", now=now)
    with engine.begin() as conn:  # an ambiguous send, and a row made skipped at a start
        conn.execute(update(_d).where(_d.c.id == queued_id).values(state="unknown"))
        conn.execute(
            insert(_d).values(
                campaign_id=cid,
                target="+15550001234",
                state="skipped",
                content={},
                error="opted out",
                queued_at=now,
            )
        )
    csv = tmp_path / "people.csv"
    csv.write_text("phone,name\n+31612345678,Ann\n+31612345679,Bo\nnot a phone,Cy\n")
    import_file(engine, csv, ImportOptions(list_name="people"), now=now)

    got = [(b["type"], b["data"]) for b in _bodies(engine)]
    kinds = [t for t, _ in got]
    for expected in (
        "sender.paused",
        "sender.health_changed",
        "sender.resumed",
        "instance.disconnected",
        "instance.connected",
        "contact.opted_out",
        "contact.opted_in",
        "delivery.unknown",
        "delivery.skipped",
        "import.finished",
    ):
        assert kinds.count(expected) == (2 if expected == "sender.health_changed" else 1), (
            expected,
            kinds,
        )
    data = {t: d for t, d in got}
    assert data["sender.paused"]["reason"] == "paused by a person: checking the account"
    assert data["sender.resumed"]["reason"] == "paused by a person: checking the account"
    health = [d for t, d in got if t == "sender.health_changed"]
    assert [(h["from"], h["to"]) for h in health] == [("low", "high"), ("high", "low")]
    assert data["instance.disconnected"]["to"] == "logged_out"
    assert data["instance.connected"]["phone"] == "+15550009999"
    assert data["contact.opted_in"]["reason"] == "STOP"
    assert data["delivery.skipped"]["to"] == "+15550001234"
    finished = data["import.finished"]
    assert finished["status"] == "completed"
    assert (finished["rows_read"], finished["imported"], finished["invalid"]) == (3, 2, 1)
    # an instance's events in the order they happened (one order key)
    order = [t for t in kinds if t.startswith(("sender.", "instance.connected", "instance.dis"))]
    assert order.index("sender.paused") < order.index("sender.resumed")
    assert order.index("instance.disconnected") < order.index("instance.connected")
    assert endpoint
