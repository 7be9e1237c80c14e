"""``gatecast serve --sandbox`` in-process: a campaign created while it runs is started by
the scheduler job, dispatched, and its statuses arrive through the registered webhook."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pydantic import SecretStr
from sqlalchemy import select

from campaigns.campaign_file import parse_campaign
from campaigns.importer import ImportOptions, import_file
from campaigns.service import create_campaign
from gatecast.commands import serve as serve_cmd
from gatecast.settings import Settings
from storage import tables
from storage.engine import make_engine

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_serve_with_sandbox_runs_a_campaign_to_delivered(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    settings = Settings(database_url=db, api_key=SecretStr("a" * 32))
    stop = threading.Event()
    ready: list[str] = []
    thread = threading.Thread(
        target=serve_cmd.serve,
        kwargs={
            "settings": settings,
            "host": "127.0.0.1",
            "port": 0,
            "sandbox": True,
            "stop": stop,
            "ready": ready.append,
        },
        daemon=True,
    )
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not ready and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready, "serve did not come up"
        engine = make_engine(db)
        import_file(engine, SAMPLES / "contacts.csv", ImportOptions(list_name="customers"))
        spec = parse_campaign(
            {
                "name": "served",
                "list": "customers",
                "message": {"type": "text", "text": "Hi {{ name }}"},
                "pace": {"per_minute": 6000, "delay_seconds": [0, 0.01], "daily_cap": None},
            },
            "t.toml",
        )
        cid = create_campaign(engine, spec).id
        c = tables.campaigns
        d = tables.deliveries
        delivered = 0
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                state = conn.execute(select(c.c.state).where(c.c.id == cid)).scalar()
                delivered = len(
                    conn.execute(
                        select(d.c.id).where(
                            d.c.campaign_id == cid, d.c.state.in_(("delivered", "read"))
                        )
                    ).all()
                )
            if state == "completed" and delivered >= 40:
                break
            time.sleep(0.2)
        assert state == "completed" and delivered >= 40, (state, delivered)
        with engine.connect() as conn:
            holder = conn.execute(select(tables.leases.c.holder)).scalar()
        assert holder  # this process held the scheduler lease
        secret = (tmp_path / ".gatecast-webhook-secret").read_text().strip()
        assert len(secret) >= 24
    finally:
        stop.set()
        thread.join(timeout=30)
    with engine.connect() as conn:
        assert conn.execute(select(tables.leases)).first() is None
