"""Migration 0018: the chats the deliveries already prove fill ``sender_chats``, and
existing senders start at health low with no warm-up use (SQLite + PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text

from storage.engine import make_engine, upgrade

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_upgrade_fills_sender_chats_from_the_deliveries(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine, "0017")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO instances (instance_id, label, state, webhook_url_registered,"
                    " created_at, updated_at) VALUES ('A', '', 'connected', false, :t, :t)"
                ),
                {"t": NOW},
            )
            cid = conn.execute(
                text(
                    "INSERT INTO campaigns (name, state, spec, message_type, timezone,"
                    " created_at, updated_at) VALUES ('c', 'completed', '{}', 'text', 'UTC',"
                    " :t, :t) RETURNING id"
                ),
                {"t": NOW},
            ).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO deliveries (campaign_id, target, target_kind, sender, state,"
                    " attempts, content, queued_at, sent_at, delivered_at)"
                    " VALUES (:c, :target, 'phone', 'A', :state, 1, '{}', :t, :sent, :deliv)"
                ),
                [
                    {
                        "c": cid,
                        "target": "+1",
                        "state": "delivered",
                        "t": NOW,
                        "sent": NOW,
                        "deliv": NOW,
                    },
                    {
                        "c": cid,
                        "target": "+2",
                        "state": "sent",
                        "t": NOW,
                        "sent": NOW,
                        "deliv": None,
                    },
                    {
                        "c": cid,
                        "target": "+3",
                        "state": "queued",
                        "t": NOW,
                        "sent": None,
                        "deliv": None,
                    },
                ],
            )
        upgrade(engine)
        with engine.connect() as conn:
            chats = conn.execute(
                text(
                    "SELECT target, known_at IS NOT NULL FROM sender_chats"
                    " WHERE instance_id = 'A' ORDER BY target"
                )
            ).all()
            health = conn.execute(
                text("SELECT health_level, health_score, warmup_used, warmup_off FROM instances")
            ).one()
        assert [(t, bool(k)) for t, k in chats] == [("+1", True), ("+2", False)]
        assert (health[0], float(health[1]), float(health[2]), bool(health[3])) == (
            "low",
            0.0,
            0.0,
            False,
        )
    finally:
        engine.dispose()
