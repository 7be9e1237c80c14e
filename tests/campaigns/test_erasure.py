"""Erasure on real SQLite files and a real PostgreSQL database: every row of one contact
removed or anonymised in one transaction; another contact's rows untouched."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns.erasure import NoSuchContact, digit_forms, erase_contact, holds_number
from campaigns.importer import ImportOptions, import_file
from campaigns.webhook_endpoints import create_endpoint
from storage import tables
from tests.rows import campaign_row

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
GONE = "+447911123456"
KEPT = "+447911123457"


def test_digit_forms_and_usual_formats() -> None:
    forms = digit_forms(GONE)
    assert forms == ("447911123456", "7911123456")
    for text in (
        "07911 123456",
        "+44 (0)7911-123-456",
        "tel 0044 7911 123456",
        {"a": "7911.123.456"},
    ):
        assert holds_number(text, forms), text
    for other in ("07911 123457", "7911", None, "", {"a": "+447911123457"}, "2026-11-25 12:00"):
        assert not holds_number(other, forms), other


def _setup(engine: Engine, tmp_path: Path) -> int:
    people = tmp_path / "people.csv"
    people.write_text(
        f"name,phone,timezone\nZed,{GONE},\nAda,{KEPT},\nZed again,07911 123456,Mars/Base\n",
        encoding="utf-8",
    )
    import_file(engine, people, ImportOptions(list_name="customers", region="GB", tags=("vip",)))
    with engine.begin() as conn:
        ids = dict(conn.execute(sa.select(tables.contacts.c.phone, tables.contacts.c.id)).all())
        list_id = conn.execute(sa.select(tables.lists.c.id)).scalar_one()
        cid = campaign_row(conn, NOW, list_id=list_id)
        conn.execute(
            sa.insert(tables.audience_members),
            [{"campaign_id": cid, "contact_id": i} for i in ids.values()],
        )
        rows: list[dict[str, Any]] = [
            {"target": GONE, "state": "read", "message_id": "m-gone", "reply_text": "hi, Zed"},
            {"target": KEPT, "state": "read", "message_id": "m-kept", "reply_text": "hi, Ada"},
        ]
        for r in rows:
            r.update(
                campaign_id=cid,
                contact_id=ids[r["target"]],
                content={"text": f"Hello {r['target']}"},
                queued_at=NOW,
            )
        conn.execute(sa.insert(tables.deliveries), rows)
        # a second campaign still queued for the erased number
        conn.execute(
            sa.insert(tables.deliveries).values(
                campaign_id=cid,
                target=f"{GONE}x",
                contact_id=ids[GONE],
                state="queued",
                content={"text": "x"},
                queued_at=NOW,
            )
        )
        conn.execute(
            sa.insert(tables.status_events).values(occurred_at=NOW, received_at=NOW),
            [
                {"message_id": "m-gone", "chat": GONE, "status": "read", "applied": True},
                {"message_id": "m-kept", "chat": KEPT, "status": "read", "applied": True},
                {"message_id": "m-other", "chat": GONE, "status": "sent", "applied": False},
            ],
        )
        conn.execute(
            sa.insert(tables.inbound_messages),
            [
                {
                    "message_id": "in-1",
                    "chat": "447911123456@s.whatsapp.net",
                    "sender_phone": GONE,
                    "text": "hi, Zed",
                    "received_at": NOW,
                },
                {
                    "message_id": "in-2",
                    "chat": "447911123457@s.whatsapp.net",
                    "sender_phone": KEPT,
                    "text": "hi, Ada",
                    "received_at": NOW,
                },
            ],
        )
        answers = (("a", '{"raw": {"phone": "07911 123456"}}'), ("b", '{"phone": "07911 123457"}'))
        conn.execute(
            sa.insert(tables.idempotency_keys),
            [
                {"principal": "p", "key": k, "fingerprint": "f", "method": "POST",
                 "path": "/api/v1/imports", "status_code": 202, "response_body": body,
                 "created_at": NOW, "expires_at": NOW}
                for k, body in answers
            ],
        )  # fmt: skip
    return int(ids[GONE])


def test_erase_removes_or_anonymises_every_row_of_one_contact(
    engine: Engine, tmp_path: Path
) -> None:
    gone_id = _setup(engine, tmp_path)
    with engine.connect() as conn:
        counts_before = conn.execute(
            sa.select(tables.deliveries.c.campaign_id, sa.func.count()).group_by(
                tables.deliveries.c.campaign_id
            )
        ).all()
    erased = erase_contact(engine, phone_e164=GONE)
    assert erased.to_dict() == {
        "contact_id": gone_id,
        "deliveries_anonymised": 2,
        "status_events_scrubbed": 2,
        "inbound_messages_scrubbed": 1,
        "memberships_removed": 3,  # list, tag, audience
        "import_rejects_removed": 1,
        "idempotency_records_removed": 1,
        "outbound_messages_removed": 0,
        "audit_entries_scrubbed": 0,
        "test_sends_removed": 0,
        "sender_chats_removed": 0,
    }
    with engine.connect() as conn:
        dump = "\n".join(
            repr(tuple(row))
            for table in tables.contacts.metadata.sorted_tables
            for row in conn.execute(sa.select(table))
        )
        deliveries = {r.message_id: r for r in conn.execute(sa.select(tables.deliveries))}
        counts_after = conn.execute(
            sa.select(tables.deliveries.c.campaign_id, sa.func.count()).group_by(
                tables.deliveries.c.campaign_id
            )
        ).all()
    assert "7911123456" not in dump and "Zed" not in dump, dump
    assert "Ada" in dump and KEPT in dump and "7911123457@s.whatsapp.net" in dump
    assert counts_after == counts_before
    gone = deliveries["m-gone"]
    assert (gone.target, gone.state, gone.content, gone.reply_text, gone.contact_id) == (
        f"erased:{gone.id}", "read", {}, None, None,
    )  # fmt: skip
    stopped = deliveries[None]
    assert (stopped.state, stopped.error) == ("skipped", "erased")
    assert deliveries["m-kept"].reply_text == "hi, Ada"
    with pytest.raises(NoSuchContact):
        erase_contact(engine, phone_e164=GONE)


def test_erase_by_id_and_unknown_ids(engine: Engine, tmp_path: Path) -> None:
    gone_id = _setup(engine, tmp_path)
    with pytest.raises(NoSuchContact):
        erase_contact(engine, contact_id=gone_id + 1000)
    assert erase_contact(engine, contact_id=gone_id).contact_id == gone_id
    with engine.connect() as conn:
        phones = set(conn.execute(sa.select(tables.contacts.c.phone)).scalars())
    assert phones == {KEPT}


def test_erase_removes_the_outbound_webhook_messages_about_the_contact(
    engine: Engine, tmp_path: Path
) -> None:
    """With a subscriber, the rows written above queue messages holding the number (its
    deliveries, its reply); the erase removes them, and the other contact's stay."""
    create_endpoint(engine, "http://127.0.0.1:9/hook", ["*"], now=NOW)
    _setup(engine, tmp_path)
    with engine.connect() as conn:
        before = [r.data for r in conn.execute(sa.select(tables.webhook_messages))]
    assert any("7911123456" in d for d in before) and any("7911123457" in d for d in before)
    erased = erase_contact(engine, phone_e164=GONE)
    assert erased.outbound_messages_removed > 0
    with engine.connect() as conn:
        after = [r.data for r in conn.execute(sa.select(tables.webhook_messages))]
        attempts = conn.execute(sa.select(sa.func.count()).select_from(tables.webhook_attempts))
        assert attempts.scalar_one() == 0
    assert not any("7911123456" in d or "Zed" in d for d in after), after
    assert any("7911123457" in d for d in after)
