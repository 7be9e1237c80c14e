"""The overview page and bulk actions on contacts in a real browser (Debian's Chromium),
against ``gatecast serve`` and ``gatecast sandbox`` as processes (one of each for the
module):

- a campaign capped at one send a day runs against the sandbox: the overview (the page
  after sign-in) shows it running with its progress and why it waits (the daily cap),
  the sender's sends today against the cap, and a logged-out sender paused with the
  action that lifts it; ``GET /api/v1/overview`` says the same, to a viewer too;
- contacts ticked in the list are tagged, all matching a search added to a list, one
  opted out, one erased after a typed confirmation; ``gatecast contacts`` and the API read
  what is stored, the audit log holds each action, a repeat with the same
  ``Idempotency-Key`` is replayed; a viewer sees no bulk actions and the API refuses them
  (an operator may not erase).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.browser import signed_in_page
from tests.journeys.harness import (
    API_KEY,
    QUICK_STATUSES,
    Server,
    Workspace,
    assert_problem,
    link_sender_over_api,
    ok,
    start_sandbox,
    workspace,
)
from tests.web.test_browser import SIDEWAYS, publish_shots, shot

pytestmark = [pytest.mark.slow, pytest.mark.browser]
CLUB = [
    ("Ada Lovelace", "+447911123501"),
    ("Bo Diddley", "+447911123502"),
    ("Cy Twombly", "+447911123503"),
    ("Di Fortune", "+447911123504"),
]

#: a campaign of the three buyers through one sender, at most one send a day
CAPPED = {
    "name": "Capped promo",
    "list": "buyers",
    "message": {"type": "text", "text": "Hi {{ name }}, new stock is in."},
    "pace": {"per_minute": 600, "delay_seconds": [0, 0], "daily_cap": 1},
}


def _import(w: Workspace, list_name: str, people: list[tuple[str, str]]) -> None:
    """``gatecast contacts import`` of a CSV of ``people`` into ``list_name``."""
    path = w.path / f"{list_name}.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([("Name", "Phone"), *people])
    w.run("contacts", "import", str(path), "--list", list_name, "--region", "GB")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """One workspace for the module: its sandbox and two lists of contacts."""
    sandbox = start_sandbox(tmp_path_factory.mktemp("sandbox"), *QUICK_STATUSES)
    try:
        with workspace(tmp_path_factory.mktemp("work"), sandbox.url) as w:
            _import(w, "buyers", [(f"Buyer {n}", f"+4479111234{n:02d}") for n in range(1, 4)])
            _import(w, "club", CLUB)
            yield w
    finally:
        sandbox.stop()


@pytest.fixture(scope="module")
def server(ws: Workspace) -> Server:
    """``gatecast serve`` (API, dashboard and scheduler) for the module."""
    return ws.serve()


@pytest.fixture(scope="module")
def viewer_key(server: Server) -> str:
    """A viewer's API key (the user ``vera``)."""
    with server.api() as api:
        return _user_key(api, "vera", "viewer")


def _user_key(api: httpx.Client, name: str, role: str) -> str:
    """A new user ``name`` with ``role``, and an API key of theirs."""
    user = {"name": name, "role": role, "password": f"{name} password 1"}
    ok(api.post("/api/v1/users", json=user), 201)
    return str(ok(api.post(f"/api/v1/users/{name}/keys", json={}), 201)["key"])


def _page(chromium_browser: Any, server: Server, path: str, *, key: str = API_KEY) -> Any:
    """A page of a fresh browser context, signed in with ``key``, on ``path``."""
    return signed_in_page(chromium_browser, server.url, path, key)


def test_overview_shows_sending_and_a_paused_sender(
    chromium_browser: Any, server: Server, viewer_key: str
) -> None:
    from playwright.sync_api import expect

    with server.api() as api:
        shop = link_sender_over_api(api, "shop")
        spare = link_sender_over_api(api, "spare")
        ok(api.post(f"/api/v1/instances/{spare}/logout"))  # the dashboard's Log out
        cid = ok(api.post("/api/v1/campaigns", json={**CAPPED, "instances": [shop]}), 201)["id"]

    # the page after sign-in is the overview
    page = _page(chromium_browser, server, "/")
    try:
        page.wait_for_url(f"{server.url}/overview")
        expect(page.locator("nav.main a").first).to_have_text("Overview")
        row = page.locator(f"#running-table tr[data-campaign='{cid}']")
        for _ in range(60):  # the page reads the database when opened: open it again
            seen = row.inner_text() if row.count() else ""
            if "daily cap reached" in seen and "1 / 3 done" in seen:
                break
            page.wait_for_timeout(500)
            page.reload()
        expect(row).to_contain_text("Capped promo")
        expect(row).to_contain_text("1 / 3 done (33%)")
        expect(row).to_contain_text("waiting: daily cap reached (1 of 1 today)")
        expect(row).to_contain_text("What to do: wait for the next day")
        expect(page.locator(f"#senders-table tr[data-sender='{shop}']")).to_contain_text("1 of 1")
        paused = page.locator(f"#attention li[data-attention='{spare}']")
        expect(paused.first).to_contain_text("spare: logged out: paused")
        expect(paused.first).to_contain_text("What to do: link it: show its QR code")
        expect(page.locator("#replies-count")).to_contain_text("in the last 24 hours")
        shot(page, "overview")
        publish_shots("overview")
        page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing sideways
        for path in ("/overview", "/contacts?q=buyer"):
            page.goto(f"{server.url}{path}")
            assert not page.evaluate(SIDEWAYS), path
        expect(page.locator("#bulk-all-label")).to_be_visible()  # a search: all matching
    finally:
        page.context.close()

    # the API says the same, to a viewer too; a GET changes nothing
    with server.api(viewer_key) as viewer:
        seen = ok(viewer.get("/api/v1/overview"))
    running = {c["id"]: c for c in seen["running"]}
    assert running[cid]["done"] == 1 and running[cid]["total"] == 3, running
    assert "daily cap reached" in running[cid]["waiting"], running[cid]
    assert {a["instance_id"] for a in seen["attention"]} >= {spare}
    shop_day = next(s for s in seen["senders"] if s["instance_id"] == shop)
    assert (shop_day["sends_today"], shop_day["daily_cap"]) == (1, 1), shop_day


def _club_ids(api: httpx.Client) -> dict[str, int]:
    found = ok(api.get("/api/v1/contacts", params={"q": "", "limit": 100}))
    return {c["name"]: c["id"] for c in found["items"] if c["phone"] in dict(CLUB).values()}


def _shown(ws: Workspace, phone: str) -> dict[str, Any]:
    found: dict[str, Any] = ws.run("contacts", "show", phone, "--json").json()
    return found


def _tick(page: Any, *names: str) -> None:
    for name in names:
        page.locator("#contacts-table tr", has_text=name).locator(".bulk-row").check()


def test_bulk_actions_on_contacts(
    chromium_browser: Any, ws: Workspace, server: Server, viewer_key: str
) -> None:
    from playwright.sync_api import expect

    with server.api() as api:
        club = next(i for i in ok(api.get("/api/v1/lists"))["items"] if i["name"] == "club")
        ids = _club_ids(api)
    listed = f"/contacts?list_id={club['id']}"
    page = _page(chromium_browser, server, listed)
    try:
        page.wait_for_url(re.compile(r"/contacts\?list_id="))
        expect(page.locator("#contacts-table tbody tr")).to_have_count(4)
        # tick two rows, tag them
        _tick(page, "Ada Lovelace", "Bo Diddley")
        expect(page.locator("#bulk-count")).to_have_text("2 contacts selected.")
        page.fill("#bulk-tag", "vip")
        page.click("#bulk-apply")
        expect(page.locator("#bulk-msg")).to_contain_text("2 contact(s) tagged “vip”")
        # every contact matching the search (the list), added to a new list
        page.check("#bulk-all")
        expect(page.locator("#bulk-count")).to_have_text(
            "All 4 contacts matching this search are selected."
        )
        page.select_option("#bulk-action", "add-to-list")
        page.fill("#bulk-list", "winter party")
        page.click("#bulk-apply")
        expect(page.locator("#bulk-msg")).to_contain_text("4 contact(s) added to “winter party”")
        # one opted out (the page's box ticks and unticks every row)
        page.check("#bulk-page")
        page.uncheck("#bulk-page")
        _tick(page, "Cy Twombly")
        expect(page.locator("#bulk-count")).to_have_text("1 contact selected.")
        page.select_option("#bulk-action", "opt-out")
        page.fill("#bulk-reason", "asked at the till")
        page.click("#bulk-apply")
        expect(page.locator("#bulk-msg")).to_contain_text("1 contact(s) opted out")
        row = page.locator("#contacts-table tr", has_text="Cy Twombly")
        expect(row).to_contain_text("opted out")
        # one erased: refused until the word is typed
        _tick(page, "Di Fortune")
        page.select_option("#bulk-action", "erase")
        expect(page.locator("#bulk-confirm")).to_be_visible()
        page.click("#bulk-apply")
        expect(page.locator("#bulk-msg")).to_contain_text("Type the word erase to confirm")
        expect(page.locator("#contacts-table")).to_contain_text("Di Fortune")
        page.fill("#bulk-confirm", "erase")
        page.click("#bulk-apply")
        expect(page.locator("#bulk-msg")).to_contain_text("1 contact(s) erased")
        expect(page.locator("#contacts-table tbody tr")).to_have_count(3)
        expect(page.locator("#contacts-table")).not_to_contain_text("Di Fortune")
        shot(page, "contacts-bulk")
        publish_shots("contacts-bulk")
    finally:
        page.context.close()

    # what is stored, as the CLI reads it
    tagged = ws.run("contacts", "search", "--tag", "vip", "--json").json()
    assert sorted(c["name"] for c in tagged["items"]) == ["Ada Lovelace", "Bo Diddley"]
    winter = ws.run("contacts", "search", "--list", "winter party", "--json").json()
    assert winter["total"] == 3  # Di was erased since
    cy = _shown(ws, "+447911123503")
    assert cy["opted_out"] is True and cy["opt_out_reason"] == "asked at the till", cy
    gone = ws.run("contacts", "show", "+447911123504", ok=False)
    assert gone.code != 0 and "no contact" in gone.output.lower(), gone.output

    with server.api() as api:
        assert api.get(f"/api/v1/contacts/{ids['Di Fortune']}").status_code == 404
        # every action is in the audit log
        audit = ok(api.get("/api/v1/audit", params={"action": "contacts/bulk", "limit": 50}))
        actions = sorted(e["action"] for e in audit["items"])
        for name in ("tag", "add-to-list", "opt-out", "erase"):
            assert any(a.endswith(f"/contacts/bulk/{name}") for a in actions), actions
        # safe to submit twice: the same key replays the first answer
        body = {"search": {"q": "", "list_id": club["id"]}, "tag": "club"}
        first = api.post("/api/v1/contacts/bulk/tag", json=body, headers={"Idempotency-Key": "k1"})
        again = api.post("/api/v1/contacts/bulk/tag", json=body, headers={"Idempotency-Key": "k1"})
        assert ok(first) == ok(again) == {"action": "tag", "changed": 3}
        assert again.headers.get("Idempotent-Replayed") == "true"
        # and without a key, done twice it changes nothing the second time
        assert ok(api.post("/api/v1/contacts/bulk/tag", json=body))["changed"] == 0
        erased_again = ok(
            api.post(
                "/api/v1/contacts/bulk/erase",
                json={"ids": [ids["Di Fortune"]], "confirm": "erase"},
            )
        )
        assert erased_again["erased"] == 0 and erased_again["missing"] == [ids["Di Fortune"]]
        assert_problem(
            api.post(
                "/api/v1/contacts/bulk/erase", json={"ids": [ids["Ada Lovelace"]], "confirm": "no"}
            ),
            422,
            "invalid_request",
        )
        # an operator may tag, but not erase
        otto = _user_key(api, "otto", "operator")
    with server.api(otto) as operator:
        erase = {"ids": [ids["Ada Lovelace"]], "confirm": "erase"}
        assert_problem(
            operator.post("/api/v1/contacts/bulk/erase", json=erase), 403, "role_required"
        )

    # a viewer sees the list without bulk actions; the API refuses them
    page = _page(chromium_browser, server, listed, key=viewer_key)
    try:
        page.wait_for_url(re.compile(r"/contacts\?list_id="))
        expect(page.locator("#contacts-table tbody tr")).to_have_count(3)
        expect(page.locator("#bulk-form")).to_have_count(0)
        expect(page.locator(".bulk-row")).to_have_count(0)
    finally:
        page.context.close()
    with server.api(viewer_key) as viewer:
        refused = viewer.post("/api/v1/contacts/bulk/opt-out", json={"ids": [ids["Ada Lovelace"]]})
        assert_problem(refused, 403, "role_required")
    assert _shown(ws, "+447911123501")["opted_out"] is False
