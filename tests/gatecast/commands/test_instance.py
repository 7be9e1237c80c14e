"""``gatecast instance ...`` against the sandbox over real HTTP, recording to a real database."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import zxingcpp
from PIL import Image
from typer.testing import CliRunner

from gatecast.cli import app
from gatecast.commands.instance import qr_text_of
from gatecast.settings import get_settings
from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from gateway.sandbox.qr import qr_content, qr_data_uri
from storage import tables
from storage.engine import make_engine, upgrade
from tests.qr import png_of, read_qr

runner = CliRunner()
_i = tables.instances


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.chdir(tmp_path)  # no stray .env; qr-<id>.png lands here
    for name in ("GATECAST_GATEWAY_URL", "GATECAST_ACCESS_TOKEN", "GATECAST_PUBLIC_URL"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def invoke(*args: str) -> Any:
    get_settings.cache_clear()
    result = runner.invoke(app, ["instance", *args])
    result.flat = " ".join(result.output.split())  # type: ignore[attr-defined]  # rich wraps
    return result


def rows(url: str) -> dict[str, dict[str, Any]]:
    eng = make_engine(url)
    with eng.connect() as conn:
        out = {r["instance_id"]: dict(r) for r in conn.execute(sa.select(_i)).mappings()}
    eng.dispose()
    return out


@pytest.fixture(params=["spec", "reference"])
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with run_sandbox_in_thread(SandboxConfig(dialect=request.param, seed=2)) as sb:
        yield sb


def test_instance_commands_end_to_end(
    env: pytest.MonkeyPatch, sandbox: Sandbox, db_url: str, tmp_path: Path
) -> None:
    eng = make_engine(db_url)
    upgrade(eng)
    eng.dispose()
    env.setenv("GATECAST_DATABASE_URL", db_url)
    env.setenv("GATECAST_GATEWAY_URL", sandbox.url)
    env.setenv("GATECAST_GATEWAY_PREFIX", "messenger_api")
    env.setenv("GATECAST_ACCESS_TOKEN", sandbox.access_token)

    res = invoke("create", "--label", "Shop")
    assert res.exit_code == 0, res.output
    (iid,) = list(sandbox.state.instances)
    assert f"instance {iid} created" in res.flat
    assert rows(db_url)[iid]["label"] == "Shop"
    assert rows(db_url)[iid]["state"] == "created"

    png_path = tmp_path / "login.png"
    shown_before = sandbox.state.current_qr_content(iid)  # codes rotate every 20 s, as phones do
    res = invoke("qr", iid, "--output", str(png_path))
    assert res.exit_code == 0, res.output
    assert read_qr(png_path.read_bytes()) in (shown_before, sandbox.state.current_qr_content(iid))
    assert "█" in res.output or "▀" in res.output  # the terminal rendering
    assert rows(db_url)[iid]["state"] == "unconfirmed"  # its first send confirms the scan
    assert "first send" in res.flat

    sandbox.scan(iid)
    res = invoke("qr", iid)
    assert res.exit_code == 0, res.output
    assert "already linked" in res.flat
    assert rows(db_url)[iid]["state"] == "connected"

    res = invoke("webhook", iid, "--url", "http://127.0.0.1:9/gatecast/webhook?k=1&j=2")
    assert res.exit_code == 0, res.output
    assert sandbox.state.instances[iid].webhook_url == "http://127.0.0.1:9/gatecast/webhook?k=1&j=2"
    assert sandbox.state.instances[iid].webhook_enabled
    assert rows(db_url)[iid]["webhook_url_registered"] is True
    res = invoke("webhook", iid, "--url", "http://127.0.0.1:9/x", "--disable")
    assert res.exit_code == 0, res.output
    assert not sandbox.state.instances[iid].webhook_enabled
    assert rows(db_url)[iid]["webhook_url_registered"] is False

    res = invoke("status")
    assert res.exit_code == 0 and iid in res.output and "Shop" in res.output
    assert "connected" in res.output

    assert invoke("reconnect", iid).exit_code == 0
    assert invoke("reboot", iid).exit_code == 0
    assert rows(db_url)[iid]["state"] == "waiting_scan"
    assert sandbox.state.instances[iid].state == "waiting_scan"
    assert invoke("logout", iid).exit_code == 0
    assert rows(db_url)[iid]["state"] == "logged_out"

    res = invoke("reset", iid)
    assert res.exit_code == 0, res.output
    (new_id,) = list(sandbox.state.instances)
    assert new_id != iid and f"new id is {new_id}" in res.flat
    known = rows(db_url)
    assert iid not in known
    assert (known[new_id]["label"], known[new_id]["state"]) == ("Shop", "created")


def test_errors_name_the_problem_and_hide_the_token(
    env: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    env.setenv("GATECAST_DATABASE_URL", sqlite_url)
    res = invoke("create")
    assert res.exit_code == 2
    assert "GATECAST_GATEWAY_URL is not set" in res.flat

    env.setenv("GATECAST_GATEWAY_URL", "gw.example")
    env.setenv("GATECAST_ACCESS_TOKEN", "s3cret-token")
    res = invoke("create")
    assert res.exit_code == 2 and "GATECAST_GATEWAY_URL" in res.flat

    with run_sandbox_in_thread(SandboxConfig(dialect="reference", seed=1)) as sb:
        env.setenv("GATECAST_GATEWAY_URL", sb.url)
        res = invoke("create")
        assert res.exit_code == 1
        assert "bad_token" in res.flat and "Access token" in res.flat
        assert "s3cret-token" not in res.output

        env.setenv("GATECAST_ACCESS_TOKEN", sb.access_token)
        res = invoke("webhook", "SOMEID")
        assert res.exit_code == 2 and "--url" in res.flat and "GATECAST_PUBLIC_URL" in res.flat
        res = invoke("reboot", "NOSUCHINSTANCE")
        assert res.exit_code == 1 and "invalid_instance" in res.flat
        res = invoke("webhook", "SOMEID", "--url", "not a url")
        assert res.exit_code == 2 and "webhook_url" in res.flat

    res = invoke("status")
    assert res.exit_code == 0 and "no instances yet" in res.flat
    res = invoke("status", "NOPE")
    assert res.exit_code == 1 and "NOPE" in res.flat


def test_qr_that_comes_through_the_webhook(
    env: pytest.MonkeyPatch, sqlite_url: str, tmp_path: Path
) -> None:
    """A gateway that only posts the QR to the webhook: say so, write no file."""
    import httpx

    from gatecast.commands import instance as instance_cmd
    from gateway.client import GatewayClient

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "success", "message": "QR sent to webhook"})

    env.setenv("GATECAST_DATABASE_URL", sqlite_url)
    env.setattr(
        instance_cmd,
        "make_gateway_client",
        lambda settings: GatewayClient(
            "http://gw.test", "t", transport=httpx.MockTransport(handler)
        ),
    )
    res = invoke("qr", "ABC123")
    assert res.exit_code == 0, res.output
    assert "through the webhook" in res.flat
    assert list(tmp_path.glob("*.png")) == []
    assert [r.url.path for r in seen] == ["/api/get_qrcode"]
    assert rows(sqlite_url)["ABC123"]["state"] == "unconfirmed"


def test_webhook_default_address_carries_the_secret_but_never_shows_it(
    env: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    with run_sandbox_in_thread(SandboxConfig(dialect="spec", seed=4)) as sb:
        iid = sb.create_linked_instance()
        env.setenv("GATECAST_DATABASE_URL", sqlite_url)
        env.setenv("GATECAST_GATEWAY_URL", sb.url)
        env.setenv("GATECAST_ACCESS_TOKEN", sb.access_token)
        env.setenv("GATECAST_PUBLIC_URL", "https://me.example/")
        env.setenv("GATECAST_WEBHOOK_SECRET", "hush-[s3cret]")
        res = invoke("webhook", iid)
        assert res.exit_code == 0, res.output
        expected = "https://me.example/webhooks/gateway/hush-%5Bs3cret%5D"
        assert sb.state.instances[iid].webhook_url == expected
        assert "s3cret" not in res.output
        assert "https://me.example/webhooks/gateway/***" in res.flat


def test_resume_status_and_reconnect_of_paused_senders(
    env: pytest.MonkeyPatch, db_url: str
) -> None:
    """Paused senders show in status with their reason; resume and reconnect lift pauses."""
    from storage.queries import instances as iq
    from storage.types import utcnow

    eng = make_engine(db_url)
    upgrade(eng)
    with run_sandbox_in_thread(SandboxConfig(dialect="spec", seed=5)) as sb:
        linked = sb.create_linked_instance()
        env.setenv("GATECAST_DATABASE_URL", db_url)
        env.setenv("GATECAST_GATEWAY_URL", sb.url)
        env.setenv("GATECAST_ACCESS_TOKEN", sb.access_token)
        with eng.begin() as conn:
            iq.mark_state(conn, linked, "connected", now=utcnow())
            iq.ensure(conn, ["QUOTA1"], now=utcnow())
            iq.pause(conn, linked, "relogin_required", now=utcnow())
            iq.pause(conn, "QUOTA1", "quota_exhausted", now=utcnow())

        res = invoke("status")
        assert res.exit_code == 0, res.output
        assert f"{linked}: relogin_required" in res.flat and "QUOTA1: quota_exhausted" in res.flat
        assert "2 paused sender(s)" in res.flat and "gatecast instance resume" in res.flat

        res = invoke("reconnect", linked)
        assert res.exit_code == 0, res.output
        assert "relogin_required" in res.flat and "sends again" in res.flat
        assert rows(db_url)[linked]["paused_reason"] is None

        res = invoke("resume", "QUOTA1")
        assert res.exit_code == 0, res.output
        assert "resumed" in res.flat and "quota_exhausted" in res.flat
        assert rows(db_url)["QUOTA1"]["paused_reason"] is None
        res = invoke("resume", "QUOTA1")
        assert res.exit_code == 0 and "was not paused" in res.flat
        res = invoke("status")
        assert "paused sender" not in res.flat

        res = invoke("resume", "NOPE")
        assert res.exit_code == 1 and "NOPE" in res.flat

        # a person pauses a sender by hand, and only a resume lifts it
        res = invoke("pause", "QUOTA1", "--reason", "checking the account")
        assert res.exit_code == 0 and "paused" in res.flat, res.output
        assert rows(db_url)["QUOTA1"]["paused_reason"] == "paused by a person: checking the account"
        res = invoke("pause", "QUOTA1")
        assert res.exit_code == 0 and "already paused" in res.flat
        res = invoke("pause", "QUOTA1", "--reason", "x" * 401)
        assert res.exit_code == 2 and "--reason" in res.flat
        res = invoke("pause", "NOPE")
        assert res.exit_code == 1 and "NOPE" in res.flat
        res = invoke("resume", "QUOTA1")
        assert res.exit_code == 0 and "paused by a person" in res.flat
    eng.dispose()


def test_reset_moves_queued_deliveries(env: pytest.MonkeyPatch, sqlite_url: str) -> None:
    from storage.types import utcnow

    c, d = tables.campaigns, tables.deliveries
    with run_sandbox_in_thread(SandboxConfig(dialect="spec", seed=6)) as sb:
        old = sb.create_linked_instance()
        env.setenv("GATECAST_DATABASE_URL", sqlite_url)
        env.setenv("GATECAST_GATEWAY_URL", sb.url)
        env.setenv("GATECAST_ACCESS_TOKEN", sb.access_token)
        eng = make_engine(sqlite_url)
        upgrade(eng)
        now = utcnow()
        with eng.begin() as conn:
            cid = conn.execute(
                sa.insert(c)
                .values(
                    name="x",
                    state="running",
                    spec={"instances": [old]},
                    message_type="text",
                    created_at=now,
                    updated_at=now,
                )
                .returning(c.c.id)
            ).scalar_one()
            conn.execute(
                sa.insert(d),
                [
                    {
                        "campaign_id": cid,
                        "target": f"+1415555000{n}",
                        "sender": old,
                        "state": state,
                        "content": {"type": "text", "text": "hi"},
                        "queued_at": now,
                    }
                    for n, state in enumerate(("queued", "sent"))
                ],
            )
        res = invoke("reset", old)
        assert res.exit_code == 0, res.output
        (new,) = list(sb.state.instances)
        assert "1 waiting deliveries and 1 campaign(s) now use" in res.flat
        with eng.connect() as conn:
            senders = [tuple(r) for r in conn.execute(sa.select(d.c.sender, d.c.state))]
            spec = conn.execute(sa.select(c.c.spec)).scalar_one()
        assert sorted(senders) == sorted([(new, "queued"), (old, "sent")])
        assert spec["instances"] == [new]
        eng.dispose()


def test_the_terminal_qr_is_read_from_the_qr_code_only() -> None:
    """One of the sandbox's QR images also reads as a short ITF barcode (one 20-second
    rotation in a few hundred); the terminal rendering takes the QR code's text, never
    the false reading."""
    content = qr_content("122B598615DCB", 89780439, "2")
    png = png_of(qr_data_uri(content))
    with Image.open(io.BytesIO(png)) as image:
        formats = sorted(str(c.format) for c in zxingcpp.read_barcodes(image.convert("L")))
    assert formats == ["ITF", "QR Code"]
    assert qr_text_of(png) == content
