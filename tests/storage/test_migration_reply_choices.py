"""Migration 0027: the choice and quote columns come and go, rows kept, and the target
search's triggers (0025) survive the downgrade (SQLite + PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text

from storage.engine import current_revision, make_engine, upgrade
from tests.campaigns.campaign_fixtures import NOW
from tests.storage.migration_steps import downgrade

_NEW = {
    "inbound_messages": {"button_id", "row_id", "quoted_id"},
    "deliveries": {"tapped_button_id", "tapped_row_id", "tapped_title"},
}


def _columns(engine: Engine, table: str) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}


def test_upgrade_and_downgrade_keep_the_rows(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine, "0025")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO inbound_messages (message_id, chat, text, is_opt_out,"
                    " received_at) VALUES ('in1', '1@s.whatsapp.net', 'Yes', false, :t)"
                ),
                {"t": NOW},
            )
        upgrade(engine, "0027")
        assert current_revision(engine) == "0027"
        for table, names in _NEW.items():
            assert names <= _columns(engine, table)
        with engine.connect() as conn:
            row = conn.execute(text("SELECT text, button_id, quoted_id FROM inbound_messages"))
            assert row.one() == ("Yes", None, None)
        downgrade(engine, "0026")  # 0027 alone
        for table, names in _NEW.items():
            assert not names & _columns(engine, table)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT text FROM inbound_messages")).scalar() == "Yes"
            if engine.dialect.name == "sqlite":  # the target search's triggers are still there
                triggers = conn.execute(
                    text(
                        "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"
                        " AND tbl_name = 'deliveries'"
                    )
                ).scalar()
                assert triggers
        upgrade(engine, "0027")
        assert current_revision(engine) == "0027"
    finally:
        engine.dispose()
