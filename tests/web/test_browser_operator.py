"""The operator's screens in a real browser (Debian's Chromium): a test send from the
campaign page followed to read against the sandbox, a reply read in the inbox, the
recipients searched with their replies and plain-language failures, archive and delete;
then every page at a phone's width (390 px, no sideways scroll) and in dark mode, with a
label on every control. Screenshots (desktop, phone, dark) go to test-artifacts/ and, with
GATECAST_UPDATE_SCREENSHOTS=1, to docs/screenshots/.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from campaigns.importer import ImportOptions, import_file
from tests.web.conftest import API_KEY, LiveApp, gateway_factory_for
from tests.web.test_browser import (  # noqa: F401  (the fixtures)
    SIDEWAYS,
    browser_page,
    publish_shots,
    running_service,
    shot,
    sign_in,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
OWN_NUMBER = "+12025550143"  # Olivia Johnson in samples/contacts.csv
NOT_ON_APP = "12125550115"  # Noah Brown

#: a control without a label: no <label> (wrapping or for=), no aria-label(ledby)
UNLABELLED = """() => Array.from(document.querySelectorAll('input, select, textarea'))
  .filter(el => el.type !== 'hidden' && el.type !== 'submit' && el.type !== 'button')
  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                && !el.getAttribute('aria-labelledby'))
  .map(el => el.id || el.name || el.outerHTML.slice(0, 80))"""
BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"
SHOTS = (
    "10-campaign-test-send",
    "11-replies",
    "12-campaign-recipients",
    "13-campaign-phone",
    "14-replies-phone-dark",
    "15-campaign-dark",
    "16-campaigns-phone",
)


@pytest.fixture
def sandbox() -> Iterator[Any]:
    """The sandbox of this module: everyone replies, one number is not on the app."""
    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread

    config = SandboxConfig(
        seed=7,
        status_delays=(0.01, 0.05, 0.1),
        reply_rate=1.0,
        not_on_app=frozenset({NOT_ON_APP}),
        auto_link=True,
    )
    with run_sandbox_in_thread(config) as sb:
        yield sb


def _api(live: LiveApp) -> httpx.Client:
    return httpx.Client(
        base_url=f"{live.url}/api/v1", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30
    )


def _campaign(api: httpx.Client, name: str, **extra: Any) -> int:
    body = {
        "name": name,
        "list": "customers",
        "message": {
            "type": "interactive",
            "title": "Spring in {{ city }}",
            "text": "Hi {{ name }}, the new shop opens on Monday.",
            "footer": "Reply STOP to opt out",
            "buttons": [
                {"kind": "quick_reply", "display_text": "Count me in", "id": "yes"},
                {"kind": "cta_url", "display_text": "Map", "url": "https://example.com/map"},
            ],
        },
        **extra,
    }
    answer = api.post("/campaigns", json=body)
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def test_operator_screens(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    sandbox: Any,
    running_service: None,  # noqa: F811
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    import_file(sqlite_engine, SAMPLES / "contacts.csv", ImportOptions(list_name="customers"))
    live = make_live(
        sqlite_engine,
        gateway_factory=gateway_factory_for(sandbox),
        settings_overrides={"public_url": "self", "webhook_secret": "operator-hook-secret"},
    )
    api = _api(live)
    iid = api.post("/instances", json={"label": "Shop phone"}).json()["instance_id"]
    api.post(f"/instances/{iid}/link")  # the auto-linking sandbox links it now
    assert api.post(f"/instances/{iid}/webhook").status_code == 200
    later = _campaign(
        api,
        "Berlin launch",
        schedule={"start": "2030-04-01T09:00:00", "timezone": "Europe/Berlin"},
    )
    page = browser_page
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, live.url, f"/campaigns/{later}")

    # the message, and times in the campaign's zone, named
    expect(page.locator("#start-time")).to_contain_text("2030-04-01 09:00 Europe/Berlin (CEST)")
    expect(page.locator("#message")).to_contain_text("Spring in {{ city }}")
    expect(page.locator("#message-buttons")).to_contain_text("Count me in")

    # a test send to one's own number: its state moves to read on the page
    page.fill("#test-to", OWN_NUMBER)
    page.select_option("#test-sender", iid)
    page.click("#test-send")
    test = page.locator(".test-send").first
    expect(test).to_have_attribute("data-state", "read", timeout=30_000)
    expect(test.locator("li.done")).to_have_count(3)
    expect(page.locator("#c-total")).to_have_text("0")  # outside the campaign's counts
    shot(page, "10-campaign-test-send")
    # to a number not on the app: failed, said plainly
    page.fill("#test-to", "+1 212 555 0115")
    page.click("#test-send")
    expect(page.locator(".test-send").first).to_have_attribute("data-state", "failed")
    expect(page.locator(".test-send").first).to_contain_text("not on WhatsApp")

    # a campaign sent now: everyone replies; read a reply in the inbox
    now = _campaign(api, "Spring now", pace={"per_minute": 600, "delay_seconds": [0, 0]})
    page.goto(f"{live.url}/campaigns/{now}")
    expect(page.locator("body")).to_have_attribute("data-campaign-done", "yes", timeout=90_000)
    page.click("nav.main >> text=Replies")
    page.select_option("#replies-campaign", str(now))
    page.click("#replies-show")
    expect(page.locator("#replies-table")).to_contain_text("Spring now", timeout=30_000)
    first = page.locator("#replies-table tbody tr").first
    expect(first.locator(".reply-text")).not_to_be_empty()
    shot(page, "11-replies", full_page=False)

    # the campaign's recipients: replied filter, search by name, failures in plain words
    page.goto(f"{live.url}/campaigns/{now}")
    page.select_option("#d-replied", "true")
    expect(page.locator("#deliveries td.reply").first).not_to_be_empty()
    page.select_option("#d-replied", "")
    page.fill("#d-q", "noah")
    page.click("#d-search")
    expect(page.locator("#deliveries tbody tr")).to_have_count(1)
    expect(page.locator("#deliveries tbody")).to_contain_text("Noah Brown")
    expect(page.locator("#deliveries tbody")).to_contain_text("not on WhatsApp")
    page.fill("#d-q", "")
    page.click("#d-search")
    shot(page, "12-campaign-recipients")

    # archive: the list leaves it out, its filter shows it; then delete another
    page.goto(f"{live.url}/campaigns/{later}")
    page.click("#more-actions summary")
    page.click("#act-archive")
    expect(page.locator("#archived-badge")).to_be_visible()
    page.goto(f"{live.url}/campaigns")
    expect(page.locator("#campaigns-table")).not_to_contain_text("Berlin launch")
    page.select_option("#campaign-archived", "only")
    page.click("#campaign-show")
    expect(page.locator("#campaigns-table")).to_contain_text("Berlin launch")
    page.goto(f"{live.url}/campaigns/{now}")
    page.click("#more-actions summary")
    page.click("#act-delete")
    expect(page.locator("#deleted-note")).to_be_visible()
    expect(page.locator("#dl-csv")).to_be_visible()  # its reports stay
    page.goto(f"{live.url}/campaigns?archived=any")
    expect(page.locator("#campaigns-table")).not_to_contain_text("Spring now")

    # every page: a label on each control; at 390 px nothing scrolls sideways; dark mode
    pages = [
        "/campaigns",
        "/campaigns?archived=only",
        f"/campaigns/{later}",
        f"/campaigns/{now}",
        "/campaigns/new",
        "/replies",
        "/contacts",
        "/contacts/1",
        "/segments",
        "/media",
        "/instances",
        "/webhooks",
    ]
    light = page.evaluate(BACKGROUND)
    for path in pages:
        page.goto(f"{live.url}{path}")
        assert page.evaluate(UNLABELLED) == [], path
    page.set_viewport_size({"width": 390, "height": 844})
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for path in pages:
            page.goto(f"{live.url}{path}")
            page.wait_for_load_state("networkidle")
            assert not page.evaluate(SIDEWAYS), f"{path} scrolls sideways at 390 px ({scheme})"
            if scheme == "dark":
                assert page.evaluate(BACKGROUND) != light, path
                slug = re.sub(r"[^a-z0-9]+", "-", path).strip("-")
                shot(page, f"phone-dark-{slug}", full_page=False)  # artifacts only
    page.emulate_media(color_scheme="light")
    page.goto(f"{live.url}/campaigns/{later}")
    page.wait_for_load_state("networkidle")
    shot(page, "13-campaign-phone")
    page.goto(f"{live.url}/campaigns")
    shot(page, "16-campaigns-phone", full_page=False)
    page.emulate_media(color_scheme="dark")
    page.goto(f"{live.url}/replies")
    shot(page, "14-replies-phone-dark", full_page=False)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live.url}/campaigns/{later}")
    page.wait_for_load_state("networkidle")
    shot(page, "15-campaign-dark")

    # keyboard: the skip link is the first stop and leads to the content
    page.goto(f"{live.url}/replies")
    page.keyboard.press("Tab")
    expect(page.locator("a.skip")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#main$"))
    publish_shots(*SHOTS)
