"""Plain words and forms safe to submit twice, in Chromium (issue 31, items 2 and 5), as a
person reads the pages: a composer error on its field ("Button 2, URL: ..."), the error
summary's link to it, a kind change that says what it leaves out; "Add user" and "Pause"
double-clicked (one user, a paused campaign, no red error); sign-in with a user's name and
that user's key; a viewer on /campaigns/new told they cannot create campaigns; the Audit
page in sentences ("olga paused campaign 'November promo'"), previews not in it.

One server (on SQLite, with a sandbox gateway over HTTP that links the sender) and one
browser context for the whole module; the tests run in order and build on each other.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from campaigns import users
from campaigns.importer import ImportOptions, import_file
from gatecast.settings import Settings
from gatecast.web.app import create_app
from gatecast.web.context import AppContext
from storage.engine import make_engine
from storage.types import utcnow
from tests.browser import opened_page
from tests.journeys.harness import link_sender_over_api, ok
from tests.web.conftest import API_KEY, LiveApp, gateway_factory_for, serve
from tests.web.test_browser import publish_shots, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser]
#: the screenshots this module takes (docs/screenshots/ with GATECAST_UPDATE_SCREENSHOTS=1)
SHOTS = (
    "composer-field-error",
    "sign-in-how",
    "audit-in-words",
    "composer-insert-variable",
    "campaign-actions",
)

PEOPLE = "name,phone\nAda Lovelace,+12025550101\nAlan Turing,+12025550102\n"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, _sqlite_head: Path) -> Iterator[LiveApp]:
    """The module's one server: a list "people", a linked sender, users olga (admin) and
    vic (viewer)."""
    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread

    path = tmp_path_factory.mktemp("words")
    shutil.copyfile(_sqlite_head, path / "gatecast.db")
    url = f"sqlite:///{path / 'gatecast.db'}"
    engine = make_engine(url)
    people = path / "people.csv"
    people.write_text(PEOPLE, encoding="utf-8")
    import_file(engine, people, ImportOptions(list_name="people"))
    hashing = users.Hashing(64, 1)
    users.create_user(engine, "olga", "admin", "olga password 1", hashing, utcnow())
    users.create_user(engine, "vic", "viewer", "vic password 1", hashing, utcnow())
    config = SandboxConfig(seed=7, status_delays=(0.01, 0.02, 0.03), auto_link=True)
    with run_sandbox_in_thread(config) as sb:
        settings = Settings(
            database_url=url,
            reports_dir=str(path / "reports"),
            _env_file=None,
            argon2_memory_kib=64,
            argon2_time_cost=1,
        )
        ctx = AppContext(
            settings=settings,
            engine=engine,
            api_key=SecretStr(API_KEY),
            gateway_factory=gateway_factory_for(sb),
        )
        app = create_app(ctx)
        base, stop = serve(app)
        live = LiveApp(url=base, ctx=ctx, app=app)
        with live.client() as api:
            link_sender_over_api(api)
        try:
            yield live
        finally:
            stop()
            engine.dispose()


@pytest.fixture(scope="module")
def page(chromium_browser: Any) -> Iterator[Any]:
    """The module's one browser page."""
    yield from opened_page(chromium_browser)


def _sign_in(page: Any, live: LiveApp, path: str, **boxes: str) -> None:
    """Sign out, then in on the sign-in page with ``boxes`` (user, password, api_key)."""
    page.context.clear_cookies()
    page.goto(f"{live.url}/login?next={path}")
    for box, value in boxes.items():
        page.fill(f"#{box}", value)
    page.click("#sign-in")


def _described_by(page: Any, selector: str) -> str:
    """The words an input's aria-describedby points to."""
    return str(
        page.eval_on_selector(
            selector,
            "e => (e.getAttribute('aria-describedby') || '').split(' ').filter(Boolean)"
            ".map(i => document.getElementById(i).textContent).join(' ')",
        )
    )


def _scheduled(live: LiveApp, name: str, *, days: int) -> int:
    """The id of a text campaign ``name`` to the list "people", starting in ``days``."""
    start = (utcnow() + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S")
    spec = {
        "name": name,
        "list": "people",
        "message": {"type": "text", "text": "Hello {{ name }}"},
        "schedule": {"start": start, "timezone": "UTC"},
    }
    with live.client() as api:
        return int(ok(api.post("/api/v1/campaigns", json=spec), 201)["id"])


def test_composer_error_on_its_field_and_kind_change(live: LiveApp, page: Any) -> None:
    from playwright.sync_api import expect

    _sign_in(page, live, "/campaigns/new", api_key=API_KEY)
    expect(page).to_have_url(f"{live.url}/campaigns/new")
    page.fill("#f-name", "Buttons in words")
    page.select_option("#f-list", "people")
    # an interactive message gets no empty button it would then refuse
    page.select_option("#f-type", "interactive")
    expect(page.locator("#buttons .button-row")).to_have_count(0)
    page.click("#add-button")
    page.click("#add-button")
    rows = page.locator("#buttons .button-row")
    first, second = rows.nth(0), rows.nth(1)
    first.locator(".b-text").fill("Yes")
    first.locator(".b-value").fill("yes")
    second.locator(".b-kind").select_option("cta_url")
    second.locator(".b-text").fill("Visit")
    second.locator(".b-value").fill("shop.example")
    page.click("#form-create")

    # on the field: outlined, its words under it, counted from 1 as the form labels it
    value = second.locator(".b-value")
    expect(value).to_have_attribute("aria-invalid", "true")
    said = "Button 2, URL: not a URL (expected http:// or https://...)"
    expect(second.locator(".field-error")).to_have_text(said)
    assert _described_by(page, "#buttons .button-row:nth-child(2) .b-value") == said
    assert "buttons[1]" not in page.locator("#campaign-msg").inner_text()
    # the summary links to the field
    page.locator("#campaign-msg a", has_text=said).click()
    expect(value).to_be_focused()
    expect(page.locator("#pv-chat")).to_contain_text(said)  # the phone says it the same way
    shot(page, "composer-field-error", full_page=False)

    value.fill("https://shop.example/")
    expect(second.locator(".field-error")).to_have_count(0)
    expect(value).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#campaign-msg .error-summary")).to_have_count(0)
    # to a legacy template: the URL button is said to be left out, not made a quick reply
    page.select_option("#f-type", "template")
    note = page.locator("#kind-note")
    expect(note).to_contain_text("'Visit' (Open a URL)")
    expect(note).to_contain_text("quick reply buttons only")
    expect(second.locator(".b-left-out")).to_contain_text("Not sent")
    expect(second.locator(".b-kind")).to_have_value("cta_url")
    # to text and back: the buttons are said to be left out, and are still there after
    page.fill("#f-footer", "Acme")
    page.select_option("#f-type", "text")
    expect(note).to_contain_text("Not sent with it")
    expect(note).to_contain_text("Footer; 2 buttons")
    page.select_option("#f-type", "template")
    expect(page.locator("#buttons .button-row")).to_have_count(2)
    expect(page.locator("#f-footer")).to_have_value("Acme")
    page.click("#form-create")
    page.click("#form-confirm")  # no start: it sends at once, confirmed
    expect(page).to_have_url(re.compile(r"/campaigns/\d+$"))
    cid = int(page.url.rsplit("/", 1)[1])
    with live.client() as api:
        message = ok(api.get(f"/api/v1/campaigns/{cid}"))["spec"]["message"]
    assert message["type"] == "template"
    assert [(b["kind"], b["display_text"]) for b in message["buttons"]] == [("quick_reply", "Yes")]


def test_add_user_double_clicked_adds_one_user(live: LiveApp, page: Any) -> None:
    from playwright.sync_api import expect

    _sign_in(page, live, "/users", user="olga", password="olga password 1")
    expect(page).to_have_url(f"{live.url}/users")
    page.fill("#u-name", "nadia")
    page.select_option("#u-role", "operator")
    page.fill("#u-password", "nadia password 1")
    page.dblclick("#u-add")
    expect(page.locator("#u-msg")).to_have_text(re.compile(r"^Added nadia \(operator\)"))
    expect(page.locator("#u-msg")).not_to_have_class("error")
    # and two requests at once, past any button: one user, and no 500
    page.fill("#u-name", "rita")
    page.fill("#u-password", "rita password 1")
    page.evaluate("() => Promise.all([addUser(), addUser()])")
    expect(page.locator("#u-msg")).to_have_text(re.compile(r"^Added rita"))
    with live.client() as api:
        names = [u["name"] for u in ok(api.get("/api/v1/users"))["items"]]
    assert names.count("nadia") == 1 and names.count("rita") == 1
    # any button that changes something: "New key" double-clicked makes one key
    page.reload()
    page.locator("tr.user[data-user=nadia]").get_by_role("button", name="New key").dblclick()
    expect(page.locator("#key-secret")).to_have_text(re.compile(r"^gck_"))
    with live.client() as api:
        assert ok(api.get("/api/v1/users/nadia/keys"))["total"] == 1


def test_the_same_user_added_twice_at_once_over_the_api(live: LiveApp) -> None:
    """Without a key, two adds at once: one is added, the other refused in words (422)."""
    answers: list[httpx.Response] = []
    body = {"name": "sam", "role": "viewer", "password": "sam password 1"}

    def add() -> None:
        with live.client() as api:
            answers.append(api.post("/api/v1/users", json=body))

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status_code for a in answers) == [201, 422, 422, 422]
    refused = [a.json() for a in answers if a.status_code == 422]
    assert all("exists already" in r["errors"][0]["msg"] for r in refused)


def test_pause_double_clicked_and_the_audit_page_in_words(live: LiveApp, page: Any) -> None:
    from playwright.sync_api import expect

    cid = _scheduled(live, "November promo", days=3)
    _sign_in(page, live, f"/campaigns/{cid}", user="olga", password="olga password 1")
    expect(page.locator("#state")).to_have_text("scheduled")
    page.dblclick("#act-pause")
    expect(page.locator("#state")).to_have_text("paused")
    expect(page.locator("#act-msg")).to_have_text(re.compile(r"^pause: (already )?paused$"))
    expect(page.locator("#act-msg")).not_to_have_class("error")
    # a second Pause that gets through (another tab, a retry) is no error either
    with live.client() as api:
        again = ok(api.post(f"/api/v1/campaigns/{cid}/pause"))
    assert (again["state"], again["detail"]) == ("paused", "already paused")

    page.click("nav >> text=Audit")
    table = page.locator("#audit")
    expect(table).to_contain_text("olga paused campaign 'November promo'")
    expect(table).to_contain_text("olga added user 'nadia'")
    expect(table).to_contain_text("olga signed in")
    expect(table).not_to_contain_text("POST /api/v1")
    shot(page, "audit-in-words")
    # the composer's previews and checks changed nothing: they are not in the log
    page.fill("#audit-filter input[name=action]", "/campaigns/check")
    page.click("#audit-filter button")
    expect(page.locator("tr.entry")).to_have_count(0)


def test_sign_in_with_a_users_key_and_a_viewer_on_the_composer(live: LiveApp, page: Any) -> None:
    from playwright.sync_api import expect

    with live.client() as api:
        key = ok(api.post("/api/v1/users/vic/keys", json={}), 201)["key"]
    _sign_in(page, live, "/campaigns", user="olga", api_key=key)
    expect(page.locator("#sign-in-error")).to_contain_text("not a key of user 'olga'")
    expect(page.locator("#where-keys")).to_contain_text("Users page")
    shot(page, "sign-in-how")
    _sign_in(page, live, "/campaigns", user="vic", api_key=key)
    expect(page).to_have_url(f"{live.url}/campaigns")
    expect(page.locator("#signed-in-as")).to_contain_text("vic")
    page.goto(f"{live.url}/campaigns/new")
    expect(page.locator("main")).to_contain_text("A viewer cannot create or edit campaigns")
    expect(page.locator("#campaign-form")).to_have_count(0)
    publish_shots(*SHOTS)


def test_insert_a_variable_the_audience_has(live: LiveApp, page: Any, tmp_path: Path) -> None:
    """Issue 31, item 2: the composer's "Insert a variable" lists what the chosen list's
    contacts have (with who lacks it) and writes it where the cursor is, by keyboard or
    mouse; a message to groups offers the group's id only."""
    from playwright.sync_api import expect

    shop = tmp_path / "shop.csv"
    shop.write_text(
        "name,phone,City,coupon\nAda Shop,+12025550111,Berlin,A1\nBo Shop,+12025550112,Paris,\n",
        encoding="utf-8",
    )
    import_file(live.ctx.engine, shop, ImportOptions(list_name="shop"))
    _sign_in(page, live, "/campaigns/new", api_key=API_KEY)
    expect(page).to_have_url(f"{live.url}/campaigns/new")
    page.fill("#f-name", "Coupons")
    page.select_option("#f-list", "shop")
    text = page.locator("#f-text")
    text.fill("Hello , see you")
    expect(page.locator("#pv-chat")).to_contain_text("Hello , see you")
    text.focus()
    page.keyboard.press("Control+Home")
    for _ in range(6):
        page.keyboard.press("ArrowRight")

    # by keyboard: Tab to the menu, Enter opens it, Tab to a variable, Enter inserts it
    page.keyboard.press("Tab")
    expect(page.locator("#var-open")).to_be_focused()
    page.keyboard.press("Enter")
    items = page.locator("#var-list button")
    expect(items).to_have_count(4)
    assert [i.get_attribute("data-var") for i in items.all()] == [
        "name",
        "phone",
        "city",
        "coupon",
    ]
    expect(items.nth(0)).to_contain_text("the contact's name")
    expect(items.nth(2)).to_contain_text("every contact has it")
    expect(items.nth(3)).to_contain_text("1 of 2 contacts have it")
    page.locator("#var-menu").scroll_into_view_if_needed()
    shot(page, "composer-insert-variable", full_page=False)
    for _ in range(3):
        page.keyboard.press("Tab")
    expect(items.nth(2)).to_be_focused()
    page.keyboard.press("Enter")
    expect(text).to_have_value("Hello {{ city }}, see you")
    expect(text).to_be_focused()
    expect(page.locator("#var-menu")).to_be_hidden()
    expect(page.locator("#pv-chat")).to_contain_text("Hello Berlin, see you")

    # by mouse, at the cursor left after the first one
    page.keyboard.type(" code ")
    page.click("#var-open")
    page.locator("#var-list button[data-var=coupon]").click()
    expect(text).to_have_value("Hello {{ city }} code {{ coupon }}, see you")
    expect(page.locator("#pv-chat")).to_contain_text("Hello Berlin code A1, see you")

    # Escape closes it and goes back to the menu's button
    page.locator("#var-open").focus()
    page.keyboard.press("Enter")
    expect(items.first).to_be_visible()
    page.keyboard.press("Tab")
    page.keyboard.press("Escape")
    expect(page.locator("#var-menu")).to_be_hidden()
    expect(page.locator("#var-open")).to_be_focused()

    # to groups: a group's message has its id only
    page.check("#f-to-groups")
    page.fill("#f-groups", "120363041234567890@g.us")
    page.click("#var-open")
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-var", "group")
    publish_shots("composer-insert-variable")


def test_campaign_actions_the_state_calls_for_first(live: LiveApp, page: Any) -> None:
    """Issue 31 ("nine action buttons at once"): the campaign page shows the action its
    state calls for (Pause, then Resume) and Edit; the rest wait under "More actions",
    cancel and delete apart in red and still asked first; the menu works by keyboard."""
    from playwright.sync_api import expect

    cid = _scheduled(live, "December promo", days=5)
    _sign_in(page, live, f"/campaigns/{cid}", api_key=API_KEY)
    expect(page.locator("#state")).to_have_text("scheduled")
    bar = page.get_by_role("group", name="Campaign actions")
    shown = bar.locator("button:visible, a:visible, summary:visible")
    expect(shown).to_have_text(["Pause", "Edit", "More actions", "CSV", "Excel", "JSON"])
    for hidden in ("#act-resume", "#act-cancel", "#act-delete", "#act-clone", "#act-retry"):
        expect(page.locator(hidden)).to_be_hidden()

    # the menu by keyboard: Enter opens it, Escape closes it where it was opened
    summary = page.locator("#more-actions summary")
    summary.focus()
    page.keyboard.press("Enter")
    danger = page.get_by_role("group", name="Cannot be undone (you are asked first)")
    expect(danger.get_by_role("button")).to_have_text(["Cancel the campaign", "Delete"])
    expect(page.locator("#act-clone")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.locator("#act-clone")).to_be_focused()
    shot(page, "campaign-actions", full_page=False)
    page.keyboard.press("Escape")
    expect(page.locator("#act-clone")).to_be_hidden()
    expect(summary).to_be_focused()

    # Pause gives way to Resume, which takes the keyboard's place
    page.click("#act-pause")
    expect(page.locator("#state")).to_have_text("paused")
    expect(page.locator("#act-pause")).to_be_hidden()
    expect(page.locator("#act-resume")).to_be_focused()

    # cancel is asked first: "no" changes nothing, "yes" cancels; nothing is left to pause
    summary.click()
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#act-cancel")
    expect(page.locator("#state")).to_have_text("paused")
    expect(page.locator("#act-cancel")).to_be_visible()  # "no": the menu stays open
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#act-cancel")
    expect(page.locator("#state")).to_have_text("cancelled")
    expect(page.locator("#act-resume")).to_be_hidden()
    expect(page.locator("#act-pause")).to_be_hidden()
    expect(page.locator("#act-edit")).to_have_count(1)  # gone once the page is read again
    page.reload()
    expect(page.locator("#act-edit")).to_have_count(0)
    expect(bar.locator("button:visible, a:visible, summary:visible")).to_have_text(
        ["More actions", "CSV", "Excel", "JSON"]
    )
    publish_shots("campaign-actions")
