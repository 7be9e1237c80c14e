"""The dashboard's Webhooks page in Chromium, on one server and one outbound sender for
the module: add an endpoint (a bad address refused in words, the secret shown once), see
it listed with its messages, remove it; change one (errors under their fields), send a
test event to a small receiver and read its answer, change the secret (asked first, the
new one shown once; an event after it verifies with the new one), read the recent
deliveries in words; a viewer is shown no controls."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from gatecast.settings import Settings
from gatecast.web.app import create_app
from gatecast.web.context import AppContext
from storage.engine import make_engine
from tests.browser import signed_in_page
from tests.conftest import _at_head
from tests.web.conftest import API_KEY, LiveApp, serve
from tests.web.test_browser import browser_page, publish_shots, shot, sign_in  # noqa: F401
from tests.webhook_receiver import Receiver, verify

pytestmark = [pytest.mark.slow, pytest.mark.browser]
SECRET = re.compile(r"^whsec_[A-Za-z0-9+/=]{32}$")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, _sqlite_head: Path) -> Iterator[LiveApp]:
    """The app on a SQLite file for the module, with the outbound sender running beside
    it (as the leader runs it) every 0.2 s."""
    from scheduler.outbound import OutboundPolicy, OutboundSender

    folder = tmp_path_factory.mktemp("webhooks-page")
    engine = make_engine(_at_head(f"sqlite:///{folder / 'gatecast.db'}", _sqlite_head))
    settings = Settings(
        database_url=str(engine.url), reports_dir=str(folder / "reports"), _env_file=None
    )
    ctx = AppContext(settings=settings, engine=engine, api_key=SecretStr(API_KEY))
    app = create_app(ctx)
    url, stop = serve(app)
    sender = OutboundSender(engine, policy=OutboundPolicy(timeout_seconds=5))
    done = threading.Event()

    def send() -> None:
        while not done.wait(0.2):
            sender.run_once()

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    try:
        yield LiveApp(url=url, ctx=ctx, app=app)
    finally:
        done.set()
        thread.join(timeout=10)
        sender.close()
        stop()
        engine.dispose()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """The CRM's receiver: verifies each signature with the secret it was given."""
    found = Receiver()
    yield found
    found.stop()


def test_webhooks_page(live: LiveApp, browser_page: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    page = browser_page
    sign_in(page, live.url, "/webhooks")
    expect(page.locator("#no-endpoints")).to_be_visible()

    page.fill("#wh-url", "ftp://crm.example.com/hooks")
    page.click("#wh-add")
    expect(page.locator("#wh-msg")).to_contain_text("must start with http:// or https://")
    expect(page.locator("#wh-msg")).not_to_contain_text("--")  # no CLI flags on the web

    page.fill("#wh-url", "https://crm.example.com/hooks")
    page.click("#wh-add")
    expect(page.locator("#wh-secret")).to_have_text(SECRET)

    page.reload()
    card = page.locator(".endpoint").first
    expect(card).to_contain_text("https://crm.example.com/hooks")
    expect(card).to_contain_text("enabled")
    expect(card).to_contain_text("0 delivered, 0 waiting, 0 failed")
    expect(page.locator("body")).not_to_contain_text("whsec_")  # shown once only

    page.once("dialog", lambda dialog: dialog.accept())
    card.get_by_role("button", name="Remove").click()
    expect(page.locator(".endpoint")).to_have_count(0)
    page.reload()
    expect(page.locator("#no-endpoints")).to_be_visible()


def _last_test_event(receiver: Receiver) -> tuple[dict[str, str], bytes]:
    with receiver._lock:
        return next(r for r in reversed(receiver.raw) if b'"webhook.test"' in r[1])


def test_manage_an_endpoint(live: LiveApp, receiver: Receiver, browser_page: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    page = browser_page
    sign_in(page, live.url, "/webhooks")
    page.fill("#wh-url", "https://crm.example.com/first")
    page.click("#wh-add")
    expect(page.locator("#wh-secret")).to_have_text(SECRET)
    receiver.secret = page.locator("#wh-secret").inner_text()
    page.reload()
    card = page.locator(".endpoint", has_text="https://crm.example.com/first")

    # change it: errors under their fields, in words; then the receiver's address
    card.get_by_text("Change this endpoint").click()
    form = card.locator("form")
    form.locator("[name=url]").fill("ftp://crm.example.com/hooks")
    form.get_by_role("button", name="Save changes").click()
    expect(form.locator("[data-error=url]")).to_have_text("must start with http:// or https://")
    expect(form.locator("[name=url]")).to_have_attribute("aria-invalid", "true")
    form.get_by_label("every event").uncheck()
    form.get_by_role("button", name="Save changes").click()
    expect(form.locator("[data-error=events]")).to_contain_text("Choose at least one event")
    form.locator("[name=url]").fill(receiver.url)
    form.get_by_label("delivery.sent").check()
    form.get_by_label("reply.received").check()
    form.locator("[name=description]").fill("Our CRM")
    form.get_by_role("button", name="Save changes").click()
    card = page.locator(".endpoint", has_text=receiver.url)
    expect(card.locator("[data-role=description]")).to_have_text("Our CRM")
    expect(card).to_contain_text("Events: delivery.sent, reply.received")
    expect(card.locator("[data-role=state]")).to_have_text("enabled")

    # a test event reaches the receiver, and the page says what it answered
    card.get_by_role("button", name="Send a test event").click()
    expect(card.locator("[data-role=msg]")).to_contain_text(
        "The receiver's answer: accepted", timeout=30_000
    )
    first_body = _last_test_event(receiver)[1]
    expect(card.locator("tbody tr").first).to_contain_text("accepted")

    # change the secret: asked first (the overlap in words), the new one shown once
    old_secret = receiver.secret
    card.get_by_text("Change the secret").first.click()
    card.locator("select[name=overlap]").select_option(label="1 hour")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", answer)
    card.get_by_role("button", name="Change the secret").click()
    shown = card.locator("[data-role=secret-value]")
    expect(shown).to_have_text(SECRET)
    assert "old secret keeps working for 1 hour" in asked[0], asked
    expect(card.locator("[data-role=new-secret]")).to_contain_text("will not be shown again")
    new_secret = shown.inner_text()
    assert new_secret != old_secret
    card.get_by_role("button", name="Copy").click()
    expect(card.get_by_role("button", name=re.compile("Copied|Selected"))).to_be_visible()
    shot(page, "webhooks-secret-changed")

    # the receiver takes the new secret: the next event verifies with it
    receiver.secret = new_secret
    card.get_by_role("button", name="Send a test event").click()
    expect(card.locator("[data-role=msg]")).to_contain_text(
        "The receiver's answer: accepted", timeout=30_000
    )
    headers, body = _last_test_event(receiver)
    assert body != first_body and verify(new_secret, headers, body)
    assert verify(old_secret, headers, body)  # within the overlap: both sign
    page.reload()
    expect(page.locator("body")).not_to_contain_text(new_secret)  # shown once only
    card = page.locator(".endpoint", has_text=receiver.url)
    expect(card.locator("[data-role=overlap]")).to_contain_text("previous secret keeps working")

    # off: no test event; on again
    card.get_by_text("Change this endpoint").click()
    card.locator("form [name=enabled]").uncheck()
    card.get_by_role("button", name="Save changes").click()
    card = page.locator(".endpoint", has_text=receiver.url)
    expect(card.locator("[data-role=state]")).to_have_text(re.compile("^off"))
    card.get_by_role("button", name="Send a test event").click()
    expect(card.locator("[data-role=msg]")).to_contain_text("The test event was not sent")
    expect(card.locator("[data-role=msg]")).to_contain_text("enable it first")
    card.get_by_text("Change this endpoint").click()
    card.locator("form [name=enabled]").check()
    card.get_by_role("button", name="Save changes").click()
    card = page.locator(".endpoint", has_text=receiver.url)
    expect(card.locator("[data-role=state]")).to_have_text("enabled")

    # a receiver that refuses: said as "refused (404)" in the recent deliveries
    receiver.status = 404
    card.get_by_role("button", name="Send a test event").click()
    expect(card.locator("[data-role=msg]")).to_contain_text(
        "The receiver's answer: refused (404), will try again", timeout=30_000
    )
    rows = card.locator("tbody tr")
    expect(rows.first.locator("[data-role=result]")).to_have_text("refused (404), will try again")
    expect(card.locator("tbody")).to_contain_text("accepted")  # the earlier ones
    expect(rows.first).to_contain_text(re.compile(r"\d+ ms|\d+\.\d s"))
    shot(page, "webhooks-deliveries")
    publish_shots("webhooks-secret-changed", "webhooks-deliveries")
    receiver.status = 200


def test_a_viewer_sees_no_controls(live: LiveApp, chromium_browser: Any) -> None:
    from playwright.sync_api import expect

    with live.client() as api:
        user = {"name": "vera", "role": "viewer", "password": "vera password 1"}
        assert api.post("/api/v1/users", json=user).status_code == 201
        answer = api.post("/api/v1/users/vera/keys", json={})
        assert answer.status_code == 201, answer.text
        key = str(answer.json()["key"])
    page = signed_in_page(chromium_browser, live.url, "/webhooks", key)
    try:
        expect(page.locator("body")).to_contain_text("Your role does not allow this")
        expect(page.locator(".endpoint")).to_have_count(0)
        for words in ("Send a test event", "Change the secret", "Save changes", "Add"):
            expect(page.get_by_role("button", name=words)).to_have_count(0)
    finally:
        page.context.close()
