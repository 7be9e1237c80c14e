"""Migration 0019: the search queue's ranges; its downgrade gives what they hold back to
the queue, so no contact loses its way into the search (SQLite + PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import text

from storage.engine import current_revision, make_engine, upgrade
from tests.campaigns.campaign_fixtures import NOW
from tests.storage.migration_steps import downgrade


def test_downgrade_puts_the_ranges_back_in_the_queue(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO contacts (phone, raw_phone, name, attributes, opted_out,"
                    " created_at, updated_at) VALUES (:p, :p, '', '{}', false, :t, :t)"
                ),
                [{"p": f"+1415555000{i}", "t": NOW} for i in range(1, 6)],
            )
            ids = conn.execute(text("SELECT id FROM contacts ORDER BY id")).scalars().all()
            conn.execute(text("DELETE FROM contact_search_pending"))  # as if caught up
            conn.execute(
                text(
                    "INSERT INTO contact_search_pending_ranges (first_id, last_id) VALUES (:a, :b)"
                ),
                {"a": ids[1], "b": ids[3]},
            )
            conn.execute(
                text("INSERT INTO contact_search_pending (contact_id) VALUES (:a)"), {"a": ids[2]}
            )
        downgrade(engine, "0018")
        assert current_revision(engine) == "0018"
        with engine.connect() as conn:
            queued = (
                conn.execute(
                    text("SELECT contact_id FROM contact_search_pending ORDER BY contact_id")
                )
                .scalars()
                .all()
            )
        assert queued == ids[1:4]
        upgrade(engine, "0019")
        assert current_revision(engine) == "0019"
    finally:
        engine.dispose()
