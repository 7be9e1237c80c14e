"""Migration 0030: outbound messages stored before it keep the webhook-id they were sent
with (``msg_<row id>``); the rotation columns come and go (SQLite + PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text

from storage.engine import current_revision, make_engine, upgrade
from tests.campaigns.campaign_fixtures import NOW
from tests.storage.migration_steps import downgrade


def _columns(engine: Engine, table: str) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}


def test_stored_messages_keep_their_ids(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine, "0028")
        with engine.begin() as conn:
            endpoint = conn.execute(
                text(
                    "INSERT INTO webhook_endpoints (url, secret, events, description, enabled,"
                    " consecutive_failures, created_at) VALUES ('https://x.example/', 'whsec_x',"
                    " '[\"*\"]', '', true, 0, :t) RETURNING id"
                ),
                {"t": NOW},
            ).scalar_one()
            message = conn.execute(
                text(
                    "INSERT INTO webhook_messages (endpoint_id, event, recipient, data,"
                    " occurred_at, state, attempts) VALUES (:e, 'delivery.sent', 'contact:1',"
                    " '{}', :t, 'pending', 1) RETURNING id"
                ),
                {"e": endpoint, "t": NOW},
            ).scalar_one()
        upgrade(engine, "0030")
        assert current_revision(engine) == "0030"
        assert {"previous_secret", "previous_secret_until"} <= _columns(engine, "webhook_endpoints")
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT webhook_id FROM webhook_messages")).scalar()
        assert stored == f"msg_{message}"
        downgrade(engine, "0028")
        assert "webhook_id" not in _columns(engine, "webhook_messages")
        assert "previous_secret" not in _columns(engine, "webhook_endpoints")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM webhook_messages")).scalar() == 1
        upgrade(engine)
    finally:
        engine.dispose()
