"""Migration 0021: audit entries gain the key that acted and the values a change
replaced; entries written before keep both empty, and the downgrade drops them
(SQLite + PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text

from campaigns import audit
from storage.engine import make_engine, upgrade
from tests.storage.migration_steps import downgrade

NOW = datetime(2026, 12, 7, 5, 0, tzinfo=UTC)


def test_old_entries_keep_both_empty_and_new_ones_hold_them(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine, "0019")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO audit_log (at, actor, role, action, source, outcome, detail)"
                    " VALUES (:t, 'boss', 'admin', 'PATCH /api/v1/users/{name}', '', 'ok', '{}')"
                ),
                {"t": NOW},
            )
        upgrade(engine)
        audit.record(
            engine,
            at=NOW,
            actor="ana",
            role="admin",
            action="PATCH /api/v1/users/{name}",
            outcome="ok",
            key_id=7,
            changes={"role": ("operator", "viewer"), "password": ("old", "new")},
        )
        old, new = reversed(audit.entries(engine).items)
        assert (old.key_id, old.changes) == (None, None)
        assert new.key_id == 7
        assert new.changes == {"role": ["operator", "viewer"], "password": [None, "changed"]}
        downgrade(engine, "0019")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM audit_log")).scalar_one() == 2
    finally:
        engine.dispose()
