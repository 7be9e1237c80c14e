"""Migration 0007: existing contacts get their folded attributes (SQLite + PostgreSQL)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import text

from campaigns.segments import fold_attributes
from storage.engine import current_revision, make_engine, upgrade
from storage.models import HEAD_REVISION

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_upgrade_folds_existing_attributes(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine, "0006")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO contacts (phone, raw_phone, name, attributes, opted_out,"
                    " created_at, updated_at) VALUES (:p, :p, 'Ana', :a, false, :t, :t)"
                ),
                [
                    {"p": "+14155550001", "a": '{"city": " Zürich ", "plan": "GOLD"}', "t": NOW},
                    {"p": "+14155550002", "a": "{}", "t": NOW},
                ],
            )
        upgrade(engine)
        assert current_revision(engine) == HEAD_REVISION == "0034"
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT attributes, folded FROM contacts ORDER BY id")).all()
        for attributes, folded in rows:
            if isinstance(attributes, str):  # SQLite hands JSON back as text here
                attributes, folded = json.loads(attributes), json.loads(folded)
            assert folded == fold_attributes(attributes)
        assert rows and len(rows) == 2
    finally:
        engine.dispose()
