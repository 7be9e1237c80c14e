"""Accessibility of every dashboard page in a real browser (Debian's Chromium), against
``gatecast serve`` and ``gatecast sandbox`` as processes (one of each for the module):

- axe-core (vendored: tests/web/axe/axe.min.js, see its README) checks each page, signed in
  as the owner, in the light and the dark theme (the browser's ``prefers-color-scheme``, as
  the dashboard follows it): no serious or critical violation (WCAG 2.2 AA contrast among
  them); a failure lists each by rule, element and page;
- on a phone (390 px) the composer's Preview toggle stays in reach while the form is long,
  brings the phone preview of what is being typed into view, and takes the user back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.harness import (
    API_KEY,
    QUICK_STATUSES,
    SAMPLES,
    Server,
    import_over_api,
    link_sender_over_api,
    ok,
    start_sandbox,
    wait_for,
    workspace,
)
from tests.media_files import pdf
from tests.web.test_browser import publish_shots, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser]
AXE = Path(__file__).with_name("axe") / "axe.min.js"
#: the impacts that fail a page (axe's "minor" and "moderate" are reported, not failed)
FAILING = ("serious", "critical")
#: axe over the whole page: each violation with its rule, impact, help and elements
RUN_AXE = """async () => {
  const r = await axe.run(document, {resultTypes: ["violations"]});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(" "), why: n.failureSummary}))}));
}"""
PHONE = {"width": 390, "height": 844}
#: the top of the phone preview, in the viewport's coordinates
PHONE_TOP = "() => document.getElementById('phone').getBoundingClientRect().top"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``gatecast serve`` for the module, against a sandbox where everyone replies."""
    sandbox = start_sandbox(
        tmp_path_factory.mktemp("sandbox"), *QUICK_STATUSES, "--reply-rate", "1"
    )
    try:
        with workspace(tmp_path_factory.mktemp("work"), sandbox.url) as w:
            yield w.serve()
    finally:
        sandbox.stop()


@pytest.fixture(scope="module")
def pages(server: Server) -> list[str]:
    """Every dashboard page with something on it: a sender, imported contacts, a campaign
    sent (everyone replies) and one scheduled, a segment, a media file, a user, a webhook
    endpoint."""
    with server.api() as api:
        iid = link_sender_over_api(api, "Shop phone")
        import_over_api(api, SAMPLES / "contacts.csv", "customers")
        menu = {
            "type": "list",
            "title": "Lunch in {{ city }}",
            "text": "Hi {{ name }}, what would you like on Friday?",
            "button_text": "See the menu",
            "sections": [{"title": "Mains", "rows": [{"title": "Lasagne", "row_id": "l"}]}],
        }
        to = {"list": "customers", "instances": [iid]}
        later = {"start": "2030-04-01T09:00:00", "timezone": "Europe/Berlin"}
        lunch = {**to, "name": "Friday lunch", "message": menu, "schedule": later}
        scheduled = ok(api.post("/api/v1/campaigns", json=lunch), 201)
        hello = {"type": "text", "text": "{Hi|Hello} {{ name }}, the shop opens on Monday."}
        fast = {"per_minute": 600, "delay_seconds": [0, 0]}
        now = {**to, "name": "Spring now", "message": hello, "pace": fast}
        sent = ok(api.post("/api/v1/campaigns", json=now), 201)
        segment = {"name": "pro plan", "lists": ["customers"], "where": {"Plan": "pro"}}
        ok(api.post("/api/v1/segments", json=segment), 201)
        user = {"name": "vera", "role": "viewer", "password": "vera password 1"}
        ok(api.post("/api/v1/users", json=user), 201)
        hook = {"url": "https://crm.example.com/hooks", "events": ["*"], "description": "CRM"}
        ok(api.post("/api/v1/webhook-endpoints", json=hook), 201)
        contact = ok(api.get("/api/v1/contacts?limit=1"))["items"][0]["id"]
        ok(api.post("/api/v1/media", files={"file": ("menu.pdf", pdf())}), 201)
        rule = {"name": "Hours", "trigger": "keyword", "keywords": ["hours"], "message": hello}
        ok(api.post("/api/v1/reply-rules", json=rule), 201)
    return [
        "/overview",
        "/campaigns",
        f"/campaigns/{scheduled['id']}",
        "/campaigns/new",
        f"/campaigns/new?from={scheduled['id']}",
        "/contacts",
        f"/contacts/{contact}",
        "/segments",
        "/media",
        "/auto-replies",
        "/instances",
        "/users",
        "/audit",
        "/settings",
        "/webhooks",
        "/campaigns/999999",  # the not-found page
        # last, so that the replies have come meanwhile (_replied waits for them)
        f"/campaigns/{sent['id']}",
        "/replies",
    ]


def _replied(server: Server) -> None:
    """Wait until the campaign sent at once has a reply (the sandbox's replies come a few
    seconds after the reads)."""
    with server.api() as api:
        wait_for(lambda: ok(api.get("/api/v1/replies?limit=1"))["total"], what="a reply")


def _axe(page: Any, where: str) -> list[str]:
    """The serious and critical violations axe finds on ``page``: one line per rule, with
    the elements (the first five) and why the first fails."""
    page.wait_for_load_state("networkidle")
    found = page.evaluate(RUN_AXE)
    lines = []
    for v in found:
        if v["impact"] not in FAILING:
            continue
        targets = [n["target"] for n in v["nodes"]]
        more = f" and {len(targets) - 5} more" if len(targets) > 5 else ""
        why = " ".join(v["nodes"][0]["why"].split())
        lines.append(
            f"{where}: {v['id']} ({v['impact']}: {v['help']}) at {', '.join(targets[:5])}"
            f"{more}; {why}"
        )
    return lines


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_passes_axe(
    chromium_browser: Any, server: Server, pages: list[str], scheme: str
) -> None:
    context = chromium_browser.new_context(
        viewport={"width": 1280, "height": 900}, color_scheme=scheme
    )
    context.add_init_script(path=str(AXE))  # axe in every page the context opens
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        page.goto(f"{server.url}/overview")
        page.wait_for_url(re.compile(r"/login\?next="))
        page.fill("#api_key", "not the key")
        page.click("#sign-in")
        page.locator(".error").wait_for()
        problems = _axe(page, f"sign-in with an error ({scheme})")
        page.fill("#api_key", API_KEY)
        page.click("#sign-in")
        page.wait_for_url(f"{server.url}/overview")
        for path in pages:
            if path == "/replies":
                _replied(server)
            page.goto(f"{server.url}{path}")
            problems += _axe(page, f"{path} ({scheme})")

        # states a page reaches by use: the composer refusing a campaign and its
        # "Insert a variable" menu open, a campaign's "More actions" open, a webhook
        # endpoint's change refused and its secret panel open, an import's mapping step
        page.goto(f"{server.url}/campaigns/new")
        page.fill("#f-name", "")
        page.click("#form-create")
        page.locator("[aria-invalid=true]").first.wait_for()
        problems += _axe(page, f"/campaigns/new, refused ({scheme})")
        page.click("#var-open")
        page.locator("#var-list button").first.wait_for()
        problems += _axe(page, f"/campaigns/new, Insert a variable open ({scheme})")
        page.goto(f"{server.url}{pages[2]}")  # the scheduled campaign's "More actions"
        page.click("#more-actions summary")
        page.locator("#act-cancel").wait_for()
        problems += _axe(page, f"{pages[2]}, More actions open ({scheme})")
        page.goto(f"{server.url}/webhooks")  # an endpoint's change form refused, its secret
        card = page.locator(".endpoint").first
        card.get_by_text("Change this endpoint").click()
        card.locator("form [name=url]").fill("ftp://crm.example.com/hooks")
        card.get_by_role("button", name="Save changes").click()
        card.locator("[aria-invalid=true]").first.wait_for()
        card.get_by_text("Change the secret").first.click()
        problems += _axe(page, f"/webhooks, change refused, secret open ({scheme})")
        page.goto(f"{server.url}/contacts")
        page.set_input_files("#file", str(SAMPLES / "contacts.csv"))
        page.click("#preview-btn")
        page.locator("#attr-table tbody tr").first.wait_for()
        problems += _axe(page, f"/contacts, import mapping ({scheme})")
        shot(page, f"a11y-contacts-{scheme}", full_page=False)  # artifacts only
    finally:
        context.close()
    assert not problems, "axe found:\n" + "\n".join(problems)


def test_phone_preview_in_reach(chromium_browser: Any, server: Server, pages: list[str]) -> None:
    from playwright.sync_api import expect

    context = chromium_browser.new_context(viewport=PHONE)
    context.add_init_script(path=str(AXE))
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        page.goto(f"{server.url}/campaigns/new")
        page.fill("#api_key", API_KEY)
        page.click("#sign-in")
        page.wait_for_url(f"{server.url}/campaigns/new")

        # typing the message far down the form: the preview is out of sight, its toggle not
        page.fill("#f-name", "Open day")
        page.fill("#f-text", "Hello {{ name }}, the doors open at nine.")
        page.locator("#f-win-from").scroll_into_view_if_needed()
        toggle = page.locator("#pv-toggle")
        expect(toggle).to_be_in_viewport()
        expect(toggle).to_have_text("Preview")
        assert page.evaluate(PHONE_TOP) > PHONE["height"], "the preview is in sight already"

        # the toggle brings the phone preview of what was typed into view ...
        toggle.click()
        expect(page.locator("#pv-chat")).to_contain_text("the doors open at nine")
        expect(page.locator("#phone")).to_be_in_viewport()
        expect(toggle).to_have_text("Back to the form")
        shot(page, "composer-phone-preview", full_page=False)

        # ... and takes the user back where they were
        toggle.click()
        expect(page.locator("#f-win-from")).to_be_in_viewport()
        expect(toggle).to_have_text("Preview")

        # the toggle in the dark theme passes axe too
        page.emulate_media(color_scheme="dark")
        problems = _axe(page, "/campaigns/new at 390 px (dark)")
        assert not problems, "axe found:\n" + "\n".join(problems)

        # on a desktop the preview stands beside the form: no toggle
        page.set_viewport_size({"width": 1280, "height": 900})
        expect(toggle).to_be_hidden()
        publish_shots("composer-phone-preview")
    finally:
        context.close()
