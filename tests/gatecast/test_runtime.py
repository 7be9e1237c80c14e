"""``gatecast campaign run ID --webhook`` in a subprocess against the sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from sqlalchemy import select

from campaigns.campaign_file import parse_campaign
from campaigns.importer import ImportOptions, import_file
from campaigns.service import create_campaign
from gateway.sandbox import SandboxConfig, run_sandbox_in_thread
from storage import tables
from storage.engine import make_engine, upgrade
from storage.queries import instances as iq
from storage.types import utcnow

ROOT = Path(__file__).resolve().parents[2]


def test_campaign_run_with_webhook_sends_and_learns_statuses(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'run.db'}"
    engine = make_engine(db)
    upgrade(engine)
    import_file(engine, ROOT / "samples" / "contacts.csv", ImportOptions(list_name="customers"))
    cfg = SandboxConfig(auto_link=True, seed=3, status_delays=(0.05, 0.1, 0.2))
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        spec = parse_campaign(
            {
                "name": "run me",
                "list": "customers",
                "instances": [iid],
                "message": {"type": "text", "text": "Hi {{ name }}"},
                "pace": {"per_minute": 6000, "delay_seconds": [0, 0.01], "daily_cap": None},
            },
            "t.toml",
        )
        with engine.begin() as conn:  # what `gatecast instance create` records
            iq.ensure(conn, [iid], now=utcnow())
        cid = create_campaign(engine, spec).id
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
        env |= {
            "GATECAST_DATABASE_URL": db,
            "GATECAST_GATEWAY_URL": sb.url,
            "GATECAST_ACCESS_TOKEN": sb.access_token,
            "GATECAST_API_KEY": "b" * 32,
            "GATECAST_WARMUP_ENABLED": "false",  # a new sender, not a warm-up test
        }
        gatecast = Path(sys.executable).with_name("gatecast")
        done = subprocess.run(
            [str(gatecast), "campaign", "run", str(cid), "--webhook", "--settle", "5"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        messages = sb.messages()
    assert f"campaign {cid} is completed" in done.stderr
    secret = (tmp_path / ".gatecast-webhook-secret").read_text().strip()
    assert secret not in done.stdout + done.stderr
    d = tables.deliveries
    with engine.connect() as conn:
        states = Counter(conn.execute(select(d.c.state).where(d.c.campaign_id == cid)).scalars())
    assert len(messages) == sum(states.values())
    assert states["delivered"] + states["read"] == len(messages), states


def test_the_http_server_runs_on_uvloop_and_httptools() -> None:
    """The server extras the webhook benchmark showed pay (docs/benchmarks.md) are in use."""
    import asyncio

    import httpx
    from fastapi import FastAPI

    from gatecast.runtime.http_server import AsgiServer

    app = FastAPI()

    @app.get("/loop")
    async def loop() -> dict[str, str]:
        return {"loop": type(asyncio.get_running_loop()).__module__}

    with AsgiServer(app) as server:
        assert httpx.get(f"{server.url}/loop").json() == {"loop": "uvloop"}
        protocol = server._server.config.http_protocol_class
        assert protocol.__name__ == "HttpToolsProtocol", protocol
