"""Listings walked by cursor (issue 30, decision 39 in docs/architecture.md), as an
integrator and a shop owner walk them: through ``gatecast serve``'s API over real HTTP and
its dashboard in Debian's Chromium, against a ``gatecast sandbox`` process.

One server for the module: 230 contacts imported into "customers", a campaign of them
paused after its rows were made (one or two sent at its pace of 1 a minute). Every page of
the deliveries and the contacts is walked by ``next_cursor`` and back by ``prev_cursor``:
nothing missed, nothing repeated, the totals exact and said so; a mangled, edited or
another listing's cursor is a 400 naming ``cursor``; the routes still ask for a key (and
the dashboard for a sign-in); ``offset`` still answers as before.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    assert_problem,
    link_sender_over_api,
    ok,
    wait_for,
    workspace,
)
from tests.journeys.test_web import _sign_in
from tests.journeys.test_web import chromium as chromium  # the module's one browser

PEOPLE = 230
CAMPAIGN: dict[str, Any] = {
    "name": "Pages",
    "list": "customers",
    "message": {"type": "text", "text": "Hello {{ name }}"},
    "pace": {"per_minute": 1, "delay_seconds": [0, 0]},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, sandbox_process: Any) -> Iterator[Any]:
    """``(server, campaign id)``: the module's one server and its paused campaign."""
    path: Path = tmp_path_factory.mktemp("listing-pages")
    with workspace(path, sandbox_process.url) as ws:
        ws.run("db", "upgrade")
        people = path / "people.csv"
        rows = "".join(f"+1415555{i:04d},Person {i}\n" for i in range(PEOPLE))
        people.write_text("phone,name\n" + rows)
        ws.run("contacts", "import", str(people), "--list", "customers")
        server = ws.serve(timeout=180)  # a shared machine may be slow to start it
        with server.api() as api:
            link_sender_over_api(api)
            cid = ok(api.post("/api/v1/campaigns", json=CAMPAIGN), 201)["id"]
            wait_for(
                lambda: ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["total"] == PEOPLE,
                what="the campaign's rows",
            )
            ok(api.post(f"/api/v1/campaigns/{cid}/pause"))
        yield server, cid


def _walk(api: httpx.Client, path: str, **params: Any) -> tuple[list[int], list[int], Any]:
    """Ids of every page forwards from the first, and backwards from ``last``; the first
    page's answer."""
    first = ok(api.get(path, params=params))
    ids: list[int] = []
    page = first
    while True:
        ids += [item["id"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        page = ok(api.get(path, params={**params, "cursor": page["next_cursor"]}))
    back: list[int] = []
    page = ok(api.get(path, params={**params, "cursor": "last"}))
    while True:
        back = [item["id"] for item in page["items"]] + back
        if page["prev_cursor"] is None:
            break
        page = ok(api.get(path, params={**params, "cursor": page["prev_cursor"]}))
    return ids, back, first


def test_api_walks_every_page_by_cursor(served: Any) -> None:
    server, cid = served
    with server.api() as api:
        path = f"/api/v1/campaigns/{cid}/deliveries"
        ids, back, first = _walk(api, path, limit=37)
        assert len(ids) == PEOPLE and ids == sorted(set(ids)) and back == ids
        assert (first["total"], first["total_exact"], first["prev_cursor"]) == (PEOPLE, True, None)
        assert len(first["items"]) == 37 and first["offset"] == 0
        # a search: its matches counted (few here: exact), every page of them walked
        found, back, first = _walk(api, path, limit=4, target="+1415555001")
        assert len(found) == 10 and back == found and first["total"] == 10
        assert first["total_exact"] is True
        everywhere, _, first = _walk(api, "/api/v1/deliveries", limit=100, campaign_id=cid)
        assert everywhere == ids and first["total"] == PEOPLE
        # offset still answers (the old way, slower as rows grow), with a cursor onwards
        skipped = ok(api.get(path, params={"limit": 37, "offset": 37}))
        assert [d["id"] for d in skipped["items"]] == ids[37:74]
        onwards = ok(api.get(path, params={"limit": 37, "cursor": skipped["next_cursor"]}))
        assert [d["id"] for d in onwards["items"]] == ids[74:111]

        contacts, back, first = _walk(api, "/api/v1/contacts", limit=40)
        assert len(contacts) == PEOPLE == first["total"] and back == contacts
        assert contacts == sorted(set(contacts)) and first["total_exact"] is True
        person, _, first = _walk(api, "/api/v1/contacts", limit=40, q="Person 12")
        assert len(person) == 11 == first["total"]  # 12, 120-129


def _forged(cursor: str) -> str:
    text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    version, kind, direction, row_id, sign = text.split(".")
    edited = f"{version}.{kind}.{direction}.{int(row_id) + 1}.{sign}".encode()
    return base64.urlsafe_b64encode(edited).decode().rstrip("=")


def test_a_bad_cursor_is_a_400_naming_it_and_the_access_rules_stay(served: Any) -> None:
    server, cid = served
    path = f"/api/v1/campaigns/{cid}/deliveries"
    with server.api() as api:
        good = ok(api.get(path, params={"limit": 10}))["next_cursor"]
        theirs = ok(api.get("/api/v1/contacts", params={"limit": 10}))["next_cursor"]
        for where, cursor in (
            (path, "not-a-cursor"),
            (path, _forged(good)),
            (path, theirs),
            ("/api/v1/contacts", good),
            ("/api/v1/deliveries", "AAAA"),
        ):
            body = assert_problem(api.get(where, params={"cursor": cursor}), 400, "invalid_request")
            assert body["errors"][0]["loc"] == ["query", "cursor"], body
            assert body["detail"].startswith("cursor: "), body
        both = assert_problem(api.get(path, params={"cursor": good, "offset": 5}), 400,
                              "invalid_request")  # fmt: skip
        assert both["errors"][0]["loc"] == ["query", "cursor"]
        assert "not both" in both["detail"]
    with server.api(key=None) as anonymous:
        for where in (path, "/api/v1/deliveries", "/api/v1/contacts"):
            assert_problem(anonymous.get(where, params={"cursor": good}), 401, "unauthorized")
    redirected = httpx.get(f"{server.url}/contacts?cursor={good}", follow_redirects=False)
    assert redirected.status_code in (302, 303, 307) and "/login" in redirected.headers["location"]


def test_browser_walks_recipients_and_contacts_by_cursor(served: Any, chromium: Any) -> None:
    server, cid = served
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        _sign_in(page, server, f"/campaigns/{cid}")
        total = page.locator("#d-total")
        total.filter(has_text="of 230 recipient(s)").wait_for()
        assert total.inner_text() == "1–50 of 230 recipient(s)"
        seen: list[str] = []
        for start in range(1, PEOPLE + 1, 50):
            end = min(start + 49, PEOPLE)
            total.filter(has_text=f"{start:,}–{end:,} of 230").wait_for()
            seen += page.locator("#deliveries tbody tr").evaluate_all(
                "rows => rows.map(r => r.dataset.target)"
            )
            if end < PEOPLE:
                page.click("#d-next")
        assert page.locator("#d-next").is_disabled() and len(seen) == len(set(seen)) == PEOPLE
        page.click("#d-prev")
        total.filter(has_text="151–200 of 230").wait_for()
        page.click("#d-first")
        total.filter(has_text="1–50 of 230").wait_for()
        page.click("#d-last")  # the last full page
        total.filter(has_text="181–230 of 230").wait_for()

        page.goto(f"{server.url}/contacts")
        assert page.inner_text("#search-total") == "1–50 of 230 contacts."
        phones: list[str] = []
        while True:
            phones += page.locator(
                "#contacts-table tbody tr td[data-label=Phone]"
            ).all_inner_texts()
            if not page.locator("#next-page").count():
                break
            page.click("#next-page")
            page.wait_for_url("**cursor=**")
        assert len(phones) == len(set(phones)) == PEOPLE
        assert page.inner_text("#search-total") == "201–230 of 230 contacts."
        page.click("#prev-page")
        page.wait_for_selector("#search-total:has-text('151–200 of 230')")
        page.click("#last-page")
        page.wait_for_selector("#search-total:has-text('181–230 of 230')")
        forged = page.goto(f"{server.url}/contacts?cursor=not-a-cursor")
        assert forged is not None and forged.status == 400
        assert "cursor" in page.inner_text("body")
    finally:
        context.close()
