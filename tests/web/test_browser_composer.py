"""The composer in a real browser (Debian's Chromium): one campaign of every message kind
composed from the form alone and sent to the sandbox (what it received checked); the TOML
tab both ways; the phone preview of a contact with a missing variable; the final check;
clone and edit of a scheduled campaign from its page; a test send to one's own number
before anything is created, and a create that would send nothing refused in words (one
that starts at once is confirmed first); and at a phone's width (390 px) nothing scrolls
sideways. Screenshots of the composer and the preview go to
test-artifacts/screenshots/ (and docs/screenshots/ with GATECAST_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from tests.journeys.harness import wait_for
from tests.web.conftest import API_KEY, LiveApp, gateway_factory_for
from tests.web.test_browser import ARTIFACTS, DOCS_SHOTS, browser_page  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.browser]
FITS = "() => document.scrollingElement.scrollWidth <= window.innerWidth"
GROUP = "120363041234567890@g.us"
SHOTS = (
    "composer-desktop",
    "composer-preview",
    "composer-preview-phone",
    "composer-list-preview",
    "composer-test-send",
)
OWN = "+12025550199"  # the operator's own phone: not a contact


@pytest.fixture
def service(sqlite_engine: Engine, linked_sandbox: Any) -> Iterator[None]:
    """Scheduler and dispatcher, as ``gatecast serve`` runs them."""
    from scheduler.service import Service, ServiceOptions

    options = ServiceOptions(poll_seconds=0.1, sync_seconds=0.3, leader_ttl_seconds=5)
    with Service(sqlite_engine, gateway_factory_for(linked_sandbox), options=options):
        yield


@pytest.fixture
def app(people_app: LiveApp) -> LiveApp:
    """The app with the people list (tests.web.conftest.PEOPLE) and a linked sender."""
    return people_app


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _sign_in(page: Any, live: LiveApp, path: str) -> None:
    page.goto(f"{live.url}{path}")
    page.fill("#api_key", API_KEY)
    page.click("#sign-in")
    page.wait_for_url(re.compile(re.escape(path.split("?")[0]) + r"(\?.*)?$"))


UNLABELLED = """() => Array.from(document.querySelectorAll(
    'main input:not([type=hidden]), main select, main textarea'))
  .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
  .map(e => e.id || e.name)"""
REFRESHED = "() => Number(document.body.dataset.composerRefreshed || 0)"


def _settled(page: Any, action: Callable[[], Any] | None = None) -> None:
    """Wait for the composer's live refresh after the last change (``action``: the change,
    made here after the count is read; else a change just made, refreshed after a pause)."""
    before = page.evaluate(REFRESHED)
    if action is not None:
        action()
    page.wait_for_function(f"() => ({REFRESHED})() > {before}", timeout=15_000)


def _fast(page: Any) -> None:
    page.fill("#f-rate", "600")
    page.fill("#f-dmin", "0")
    page.fill("#f-dmax", "0")


def _received(sandbox: Any, to: str) -> list[str]:
    got = httpx.get(f"{sandbox.url}/sandbox/messages", params={"to": to.lstrip("+")}, timeout=10)
    return [str(m["payload"]) for m in got.json()]


def _all_received(sandbox: Any) -> list[dict[str, Any]]:
    got = httpx.get(f"{sandbox.url}/sandbox/messages", timeout=10).json()
    return list(got["items"] if isinstance(got, dict) else got)


def create_now(page: Any) -> None:
    """Create a campaign without a start: the page says it sends at once, confirmed."""
    from playwright.sync_api import expect

    expect(page.locator("#form-create")).to_have_text("Create and send now")
    page.click("#form-create")
    expect(page.locator("#create-confirm")).to_contain_text("Sending starts now")
    page.click("#form-confirm")


def _fill_kind(page: Any, kind: str) -> None:
    """The message of one kind, from the form's fields alone."""
    page.select_option("#f-type", kind)
    if kind == "text":
        page.fill("#f-text", "{Hi|Hello} {{ name }}, your text.")
    elif kind == "media":
        page.fill("#f-media", "https://example.com/menu.pdf")
        page.fill("#f-filename", "menu.pdf")
        page.fill("#f-text", "The menu for {{ name }}")
    elif kind == "interactive":
        page.fill("#f-title", "Black Friday")
        page.fill("#f-subtitle", "Online shop")
        page.fill("#f-text", "30% off, {{ name }}.")
        page.fill("#f-footer", "Reply STOP to opt out")
        page.click("#add-button")  # a kind change adds no empty button
        rows = page.locator("#buttons .button-row")
        rows.nth(0).locator(".b-text").fill("Tell me more")
        rows.nth(0).locator(".b-value").fill("more")
        for i, (kind_name, text, value) in enumerate(
            (
                ("cta_url", "Open the shop", "https://shop.example.com"),
                ("cta_call", "Call us", "+14155550100"),
                ("cta_copy", "Copy the code", "BF30"),
            ),
            start=1,
        ):
            page.click("#add-button")
            row = rows.nth(i)
            row.locator(".b-kind").select_option(kind_name)
            row.locator(".b-text").fill(text)
            row.locator(".b-value").fill(value)
    elif kind == "template":
        page.fill("#f-text", "Deliver tomorrow, {{ name }}?")
        page.fill("#f-footer", "Acme deliveries")
        page.click("#add-button")
        rows = page.locator("#buttons .button-row")
        rows.nth(0).locator(".b-text").fill("Yes")
        rows.nth(0).locator(".b-value").fill("yes")
        page.click("#add-button")
        rows.nth(1).locator(".b-text").fill("No")
        rows.nth(1).locator(".b-value").fill("no")
    elif kind == "list":
        page.fill("#f-title", "This week's menu")
        page.fill("#f-text", "What would you like, {{ name }}?")
        page.fill("#f-footer", "Orders close Friday")
        page.fill("#f-button-text", "See the menu")
        page.click("#add-section")  # a kind change adds no empty section
        section = page.locator("#sections .section-row").first
        section.locator(".s-title").fill("Mains")
        section.locator(".list-row .r-title").fill("Lasagne")
        section.locator(".list-row .r-id").fill("main-lasagne")
        section.locator(".list-row .r-desc").fill("With a green salad")
        section.locator(".s-add").click()
        section.locator(".list-row").nth(1).locator(".r-title").fill("Curry")
        section.locator(".list-row").nth(1).locator(".r-id").fill("main-curry")


#: what the phone preview shows of each kind, and what the gateway must receive
EXPECTED: dict[str, tuple[str, str, str]] = {
    # kind: (a selector in the phone, text in it, text in the payload sent)
    "text": (".pv-text", "Ada Lovelace, your text.", "your text."),
    "media": (".pv-file-name", "menu.pdf", "menu.pdf"),
    "interactive": (".pv-button[data-kind=cta_copy]", "Copy the code", "BF30"),
    "template": (".pv-button", "Yes", "Deliver tomorrow, Ada Lovelace?"),
    "list": (".pv-sheet .pv-row", "Lasagne", "main-lasagne"),
}


def test_compose_and_send_every_message_kind(
    app: LiveApp,
    service: None,
    linked_sandbox: Any,
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    _sign_in(page, app, "/campaigns/new")
    # the timezone picker starts on the browser's zone
    browser_zone = page.evaluate("() => Intl.DateTimeFormat().resolvedOptions().timeZone")
    expect(page.locator("#f-tz")).to_have_value(browser_zone)
    for kind, (selector, shown, sent) in EXPECTED.items():
        page.goto(f"{app.url}/campaigns/new")
        page.fill("#f-name", f"Every kind: {kind}")
        page.select_option("#f-list", "people")
        _fill_kind(page, kind)
        _fast(page)
        page.select_option("#f-tz", "Europe/Berlin")
        _settled(page)
        phone = page.locator("#pv-chat")
        expect(phone.locator(selector).first).to_contain_text(shown)
        expect(page.locator("#pv-to")).to_contain_text("Ada Lovelace")
        expect(page.locator("#final-check")).to_contain_text("3 message(s) to list people through")
        if kind == "interactive":
            expect(phone.locator(".pv-title")).to_have_text("Black Friday")
            expect(phone.locator(".pv-footer")).to_have_text("Reply STOP to opt out")
            expect(phone.locator(".pv-button")).to_have_count(4)
            page.evaluate("window.scrollTo(0, 0)")
            _shot(page, "composer-desktop")
        if kind == "list":
            page.set_viewport_size({"width": 390, "height": 844})
            assert page.evaluate(FITS), "the composer scrolls sideways at 390 px"
            page.locator("#phone").scroll_into_view_if_needed()
            _shot(page, "composer-list-preview")
            page.set_viewport_size({"width": 1280, "height": 900})
        create_now(page)
        page.wait_for_url(re.compile(r"/campaigns/\d+$"))
        expect(page.locator("body")).to_have_attribute("data-campaign-done", "yes", timeout=60_000)
        for name, number in (("Ada Lovelace", "+12025550101"), ("Alan Turing", "+12025550102")):
            wanted = sent.replace("Ada Lovelace", name)
            wait_for(
                lambda n=number, w=wanted: [x for x in _received(linked_sandbox, n) if w in x],
                timeout=30,
                what=f"the {kind} message to {name}",
            )

    # groups: a media message to a group id, from the form
    page.goto(f"{app.url}/campaigns/new")
    page.fill("#f-name", "To a group")
    page.check("#f-to-groups")
    page.fill("#f-groups", GROUP)
    page.select_option("#f-type", "media")
    page.fill("#f-media", "https://example.com/week.jpg")
    page.fill("#f-text", "{This week's|The new} menu")
    _fast(page)
    _settled(page)
    expect(page.locator("#pv-chat .pv-image img")).to_have_attribute(
        "src", "https://example.com/week.jpg"
    )
    expect(page.locator("#final-check")).to_contain_text("1 message(s) to 1 group(s)")
    create_now(page)
    page.wait_for_url(re.compile(r"/campaigns/\d+$"))
    expect(page.locator("body")).to_have_attribute("data-campaign-done", "yes", timeout=60_000)
    mine = wait_for(
        lambda: [
            m
            for m in _all_received(linked_sandbox)
            if GROUP in (m.get("chat") or m.get("to") or "")
        ],
        timeout=30,
        what="the group's message",
    )
    assert "week.jpg" in str(mine[-1]["payload"])


def test_toml_tab_preview_of_a_missing_variable_and_phone_width(
    app: LiveApp,
    browser_page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    _sign_in(page, app, "/campaigns/new")
    page.fill("#f-name", "Round trip")
    page.select_option("#f-list", "people")
    _fill_kind(page, "interactive")
    page.fill("#f-text", "{Hi|Hello} {{ name }}, 30% off in {{ city }}.")
    page.check("#f-rep-advanced")
    page.fill("#f-cron", "0 9 * * MON")
    page.select_option("#f-tz", "Europe/Berlin")
    page.fill("#f-win-from", "09:00")
    page.fill("#f-win-to", "18:00")
    _settled(page)
    # the next five starts of the recurrence, from the server
    expect(page.locator("#cron-list li")).to_have_count(5)
    expect(page.locator("#cron-list li").first).to_contain_text("Mon")
    expect(page.locator("#pv-variants-box")).to_be_visible()
    expect(page.locator("#pv-variant-count")).to_have_text("2")

    # a contact without the variable, found by name: said before anything is sent
    page.fill("#pv-search", "grace")
    _settled(page, lambda: page.click("#pv-found .pv-pick"))
    expect(page.locator("#pv-to")).to_contain_text("Grace Hopper")
    expect(page.locator("#pv-missing")).to_have_text(
        "Would not render for Grace Hopper: no value for city."
    )
    expect(page.locator("#pv-chat .pv-unrendered")).to_contain_text("missing variable")
    expect(page.locator("#final-check")).to_contain_text("1 cannot be rendered")

    # the TOML tab shows the same campaign, and edits there come back to the form
    page.click("#tab-toml")
    toml = page.locator("#toml-text")
    expect(toml).to_have_value(re.compile(r'\[\[message\.buttons\]\]\nkind = "cta_url"'))
    text = toml.input_value()
    assert 'cron = "0 9 * * MON"' in text and 'window = ["09:00", "18:00"]' in text
    toml.fill(text.replace('title = "Black Friday"', 'title = "Cyber Monday"'))
    page.click("#tab-form")
    expect(page.locator("#campaign-form")).to_be_visible()
    expect(page.locator("#f-title")).to_have_value("Cyber Monday")
    expect(page.locator("#buttons .button-row")).to_have_count(4)
    expect(page.locator("#f-cron")).to_have_value("0 9 * * MON")
    # a mistake in the TOML: named by its field, and the form is not touched
    page.click("#tab-toml")
    toml.fill(toml.input_value().replace('url = "https://shop.example.com"', 'url = "shop"'))
    page.click("#tab-form")
    expect(page.locator("#toml-msg")).to_contain_text("message.buttons[1].url: not a URL")
    expect(page.locator("#toml-pane")).to_be_visible()
    page.click("#toml-apply")
    expect(page.locator("#toml-msg")).to_contain_text("message.buttons[1].url")
    toml.fill(toml.input_value().replace('url = "shop"', 'url = "https://shop.example.com"'))
    page.click("#tab-form")
    expect(page.locator("#campaign-form")).to_be_visible()

    # an audience of tags and values, written on the TOML tab, is kept by the form
    page.click("#tab-toml")
    text = (
        toml.input_value()
        .replace('list = "people"\n', "")
        .replace(
            "\n[message]",
            '\n[audience]\nlists = ["people"]\nwhere = { city = "Berlin" }\n\n[message]',
            1,
        )
    )
    toml.fill(text)
    page.click("#tab-form")
    expect(page.locator("#f-to-audience")).to_be_checked()
    expect(page.locator("#final-check")).to_contain_text("1 message(s) to lists = people; where")
    page.click("#tab-toml")
    expect(toml).to_have_value(re.compile(r'\[audience\]\nlists = \["people"\]'))
    page.click("#tab-form")
    page.check("#f-to-list")

    # a TOML file chosen for upload gets its final check before it is created
    upload = tmp_path / "later.toml"
    upload.write_text(
        'name = "Later"\nlist = "people"\n[message]\ntype = "text"\ntext = "Hi {{ name }}"\n'
        '[schedule]\nstart = "2099-01-01T09:00:00"\ntimezone = "Europe/Berlin"\n',
        encoding="utf-8",
    )
    page.set_input_files("#toml-file", str(upload))
    expect(page.locator("#final-check")).to_contain_text(
        "later.toml: 3 message(s) to list people through"
    )

    # every control has a label; at a phone's width nothing scrolls sideways
    unlabelled = page.evaluate(UNLABELLED)
    assert unlabelled == [], unlabelled
    _settled(page, lambda: page.select_option("#pv-contact", ""))
    _shot(page, "composer-preview")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate(FITS), "the composer scrolls sideways at 390 px"
    page.locator("#phone").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "composer-preview-phone.png"))
    page.click("#tab-toml")
    assert page.evaluate(FITS)


def test_a_test_send_before_create_and_a_create_that_would_send_nothing(
    app: LiveApp,
    linked_sandbox: Any,
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    _sign_in(page, app, "/campaigns/new")
    page.fill("#f-name", "City week")
    page.select_option("#f-list", "people")
    page.fill("#f-text", "Hi {{ name }}, see you in {{ city }} this week.")
    _settled(page)
    # rendered for a contact picked from the audience, sent to one's own number
    _settled(page, lambda: page.select_option("#pv-contact", label="Alan Turing · +12025550102"))
    expect(page.locator("#pv-chat .pv-text")).to_have_text(
        "Hi Alan Turing, see you in London this week."
    )
    page.fill("#ct-to", OWN)
    page.click("#ct-send")
    expect(page.locator("#ct-msg")).to_contain_text(f"Test sent to {OWN} through", timeout=15_000)
    expect(page.locator("#ct-msg")).to_contain_text(
        "rendered for Alan Turing. Nothing was created."
    )
    got = wait_for(
        lambda: [p for p in _received(linked_sandbox, OWN) if "see you in London" in p],
        timeout=30,
        what="the test message at the operator's own number",
    )
    assert "Hi Alan Turing, see you in London this week." in got[0], got
    _shot(page, "composer-test-send")
    with app.client() as api:
        assert api.get("/api/v1/campaigns").json()["total"] == 0
    # the number is remembered for the next campaign
    page.goto(f"{app.url}/campaigns/new")
    expect(page.locator("#ct-to")).to_have_value(OWN)

    # a message nobody has the values for: said as you type, and Create refuses it
    page.fill("#f-name", "Coupons")
    page.select_option("#f-list", "people")
    page.fill("#f-start", "2099-01-04T09:00")
    page.fill("#f-text", "Hi {{ name }}, your code is {{ coupon }}.")
    _settled(page)
    words = "coupon is missing for 3 of 3 contacts: Ada Lovelace, Alan Turing, Grace Hopper"
    expect(page.locator("#final-unrenderable")).to_contain_text(words)
    expect(page.locator("#form-create")).to_have_text("Create and schedule")
    page.click("#form-create")
    expect(page.locator("#campaign-msg")).to_contain_text(
        f"Not created: nothing would be sent: {words}."
    )
    # some cannot get it, and it would start at once: both said, and asked first
    page.fill("#f-start", "")
    page.fill("#f-text", "Hi {{ name }}, see you in {{ city }}.")
    _settled(page)
    page.click("#form-create")
    confirm = page.locator("#create-confirm")
    expect(confirm).to_contain_text("Sending starts now, as soon as you confirm: 2 message(s)")
    expect(confirm).to_contain_text(
        "1 of 3 recipient(s) cannot get this message and will be skipped: "
        "city is missing for 1 of 3 contacts: Grace Hopper."
    )
    expect(page.locator("#form-confirm")).to_have_text("Create and send now")
    page.click("#form-confirm-back")
    expect(confirm).to_be_hidden()
    with app.client() as api:
        assert api.get("/api/v1/campaigns").json()["total"] == 0
    unlabelled = page.evaluate(UNLABELLED)
    assert unlabelled == [], unlabelled


def test_clone_and_edit_a_scheduled_campaign(
    app: LiveApp,
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    spec = {
        "name": "Spring sale",
        "list": "people",
        "message": {"type": "text", "text": "Hi {{ name }}, spring is here."},
        "schedule": {"start": "2099-04-01T09:00:00", "timezone": "Europe/Berlin"},
        "pace": {"per_minute": 10, "delay_seconds": [1, 2], "daily_cap": 100},
    }
    with app.client() as api:
        cid = api.post("/api/v1/campaigns", json=spec).json()["id"]
    page = browser_page
    _sign_in(page, app, f"/campaigns/{cid}")
    page.click("#act-edit")
    page.wait_for_url(re.compile(rf"/campaigns/new\?from={cid}&mode=edit$"))
    expect(page.locator("#composer-title")).to_have_text(f"Edit campaign {cid}")
    expect(page.locator("#f-name")).to_have_value("Spring sale")
    expect(page.locator("#f-tz")).to_have_value("Europe/Berlin")
    expect(page.locator("#f-start")).to_have_value("2099-04-01T09:00")
    expect(page.locator("#f-cap")).to_have_value("100")
    page.fill("#f-text", "Hello {{ name }}, spring sale from Monday.")
    page.fill("#f-start", "2099-04-06T10:00")
    _settled(page)
    expect(page.locator("#final-check")).to_contain_text("starting 2099-04-06 10:00 Europe/Berlin")
    page.click("#form-save")
    page.wait_for_url(f"{app.url}/campaigns/{cid}")
    expect(page.locator("#state")).to_have_text("scheduled")
    with app.client() as api:
        shown = api.get(f"/api/v1/campaigns/{cid}").json()
    assert shown["spec"]["message"]["text"] == "Hello {{ name }}, spring sale from Monday."
    assert shown["start_at"].startswith("2099-04-06T08:00")

    # clone: the composer filled from it, named "(copy)"; created as a new campaign
    page.click("#more-actions summary")
    page.click("#act-clone")
    page.wait_for_url(re.compile(rf"/campaigns/new\?from={cid}$"))
    expect(page.locator("#f-name")).to_have_value("Spring sale (copy)")
    expect(page.locator("#f-text")).to_have_value("Hello {{ name }}, spring sale from Monday.")
    page.fill("#f-start", "2099-05-04T09:00")
    page.click("#form-create")
    page.wait_for_url(re.compile(r"/campaigns/\d+$"))
    copy_id = int(page.url.rsplit("/", 1)[1])
    assert copy_id != cid
    expect(page.locator("#state")).to_have_text("scheduled")
    with app.client() as api:
        copy = api.get(f"/api/v1/campaigns/{copy_id}").json()
        assert copy["name"] == "Spring sale (copy)"
        # a running or finished campaign cannot be edited: refused with 409
        api.post(f"/api/v1/campaigns/{copy_id}/cancel")
        refused = api.put(f"/api/v1/campaigns/{copy_id}", json=spec)
        assert refused.status_code == 409, refused.text
    page.reload()
    expect(page.locator("#act-edit")).to_have_count(0)
    expect(page.locator("#act-clone")).to_have_count(1)  # under "More actions"

    if os.environ.get("GATECAST_UPDATE_SCREENSHOTS") == "1":
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        for name in SHOTS:
            shot = ARTIFACTS / f"{name}.png"
            if shot.exists():
                shutil.copy2(shot, DOCS_SHOTS / shot.name)
