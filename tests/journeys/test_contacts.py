"""Contact management as a user does it (issue 19, item 1): add, edit, tag, search and
export on the CLI, read back from the exported file; create, search, tag, a campaign to
the tag sent through a ``gatecast sandbox`` process and the contact's page showing the
delivery on the API; bad input refused with a clear error and nothing stored.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from openpyxl import load_workbook

from tests.journeys.harness import Server, Workspace, assert_problem, link_sender_over_api, wait_for
from tests.journeys.harness import ok as _ok
from tests.journeys.test_web import _sign_in
from tests.journeys.test_web import chromium as chromium  # the module's one browser


def test_cli_add_edit_tag_search_export(ws: Workspace) -> None:
    ws.run(
        "contacts", "add", "+14155550101", "--name", "José Núñez", "--attr", "City=Zürich",
        "--attr", "plan=gold", "--tag", "VIP", "--list", "customers",
    )  # fmt: skip
    ws.run("contacts", "add", "+14155550102", "--name", "Ann Lee", "--attr", "city=Berlin",
           "--list", "customers")  # fmt: skip
    ws.run("contacts", "add", "+14155550103", "--name", "Bo", "--list", "others")
    # no case, no accents: the name, an attribute value, the phone's digits
    assert [c["phone"] for c in ws.run("contacts", "search", "JOSE", "--json").json()["items"]] == [
        "+14155550101"
    ]
    assert ws.run("contacts", "search", "zurich", "--json").json()["total"] == 1
    assert (
        ws.run("contacts", "search", "555-0102", "--json").json()["items"][0]["name"] == "Ann Lee"
    )
    assert ws.run("contacts", "search", "--list", "customers", "--json").json()["total"] == 2
    paged = ws.run("contacts", "search", "--per-page", "2", "--page", "2", "--json").json()
    assert (paged["total"], len(paged["items"])) == (3, 1)

    ws.run("contacts", "edit", "+14155550101", "--attr", "plan=platinum", "--unset", "city",
           "--tag", "newsletter", "--untag", "vip", "--name", "José N.")  # fmt: skip
    tagged = ws.run("contacts", "tag", "spring", "--query", "berlin").output
    assert "1 contact tagged 'spring'" in tagged
    numbers = ws.path / "numbers.txt"
    numbers.write_text("phone\n+14155550101\n(415) 555-0103\n", encoding="utf-8")
    assert (
        "2 contacts tagged 'spring'"
        in ws.run("contacts", "tag", "spring", "--file", str(numbers)).output
    )
    ws.run("contacts", "untag", "spring", "+14155550103")
    assert ws.run("contacts", "search", "--tag", "spring", "--json").json()["total"] == 2
    assert (
        "removed from list 'others'"
        in ws.run("contacts", "delete", "+14155550103", "--list", "others").output
    )

    out = ws.path / "customers.csv"
    assert (
        "2 contacts written" in ws.run("contacts", "export", str(out), "--list", "customers").output
    )
    rows = {r["phone"]: r for r in csv.DictReader(io.StringIO(out.read_text(encoding="utf-8")))}
    assert set(rows) == {"+14155550101", "+14155550102"}
    jose = rows["+14155550101"]
    assert (jose["name"], jose["plan"], jose["city"]) == ("José N.", "platinum", "")
    assert (jose["tags"], jose["opted_out"]) == ("newsletter,spring", "no")
    assert (rows["+14155550102"]["city"], rows["+14155550102"]["tags"]) == ("Berlin", "spring")

    ws.run("contacts", "optout", "+14155550102")
    book = ws.path / "out.xlsx"
    ws.run("contacts", "export", str(book), "--opted-out")
    sheet = load_workbook(book, read_only=True)["Contacts"]
    values = [[c.value for c in row] for row in sheet.iter_rows()]
    assert values[0][:2] == ["phone", "name"] and len(values) == 2
    assert values[1][0] == "+14155550102" and "yes" in values[1]


def test_cli_bad_input_is_refused_and_stores_nothing(ws: Workspace) -> None:
    ws.run("contacts", "add", "+14155550101", "--name", "Ann", "--list", "customers")
    cases = {
        ("contacts", "add", "+14155550102", "--attr", "city"): "not key=value",
        ("contacts", "add", "+14155550102", "--attr", "city="): "empty value",
        ("contacts", "add", "+14155550102", "--tag", " "): "a tag cannot be empty",
        ("contacts", "add", "12"): "not a usable phone number",
        ("contacts", "add", "+14155550101"): "already a contact",
        ("contacts", "edit", "+14155550199", "--name", "X"): "no contact with phone +14155550199",
        ("contacts", "edit", "+14155550101", "--unset", "city"): "has no attribute 'city'",
        ("contacts", "tag", "vip", "+14155550199"): "no contact with phone",
        ("contacts", "search", "--list", "nope"): "no list called 'nope'",
        ("contacts", "search", "--tag", "nope"): "no tag called 'nope'",
        ("contacts", "delete", "+14155550101", "--list", "nope"): "no list called 'nope'",
        ("contacts", "export", "x.csv", "--list", "nope"): "no list called 'nope'",
    }
    for args, words in cases.items():
        res = ws.run(*args, ok=False)
        assert res.code == 1 and words in res.output, (args, res.output)
    everyone = ws.run("contacts", "search", "--json").json()
    assert everyone["total"] == 1
    assert everyone["items"][0]["attributes"] == {}
    assert ws.run("contacts", "show", "+14155550101", "--json").json()["tags"] == []


CAMPAIGN = {
    "name": "Spring VIP",
    "audience": {"tags": ["spring-vip"]},
    "message": {"type": "text", "text": "Hallo {{ name }}"},
    "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
}


def test_api_create_search_tag_send_and_contact_page(ws: Workspace) -> None:
    server: Server = ws.serve()
    api = server.api()
    link_sender_over_api(api)
    body = {"phone": "+1 415 555 0101", "name": "Zoë", "attributes": {"City": "Köln"},
            "list_name": "customers"}  # fmt: skip
    headers = {"Idempotency-Key": "contact-zoe"}
    made = _ok(api.post("/api/v1/contacts", json=body, headers=headers), 201)
    again = api.post("/api/v1/contacts", json=body, headers=headers)
    assert again.status_code == 201 and again.json()["id"] == made["id"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert (made["phone"], made["attributes"], made["lists"]) == (
        "+14155550101", {"city": "Köln"}, ["customers"]
    )  # fmt: skip
    _ok(api.post("/api/v1/contacts", json={"phone": "+14155550102", "name": "Max",
                                           "attributes": {"city": "Bonn"}}), 201)  # fmt: skip
    dup = assert_problem(api.post("/api/v1/contacts", json=body), 422, "invalid_request")
    assert dup["errors"][0]["loc"] == ["body", "phone"] and "already a contact" in dup["detail"]
    bad = assert_problem(
        api.post("/api/v1/contacts", json={"phone": "+14155550103", "tags": [" "]}),
        422, "invalid_request",
    )  # fmt: skip
    assert "tag" in bad["detail"]
    assert_problem(api.get("/api/v1/contacts", params={"list": "nope"}), 422, "invalid_request")

    found = _ok(api.get("/api/v1/contacts", params={"q": "KOLN"}))
    assert (found["total"], found["items"][0]["id"]) == (1, made["id"])
    assert set(found) == {"items", "total", "limit", "offset", "total_exact", "next_cursor",
                          "prev_cursor"}  # fmt: skip
    assert found["total_exact"] is True
    tagged = _ok(api.post("/api/v1/contacts/tag", json={"tag": "Spring-VIP", "q": "köln"}))
    assert tagged == {"tag": "spring-vip", "changed": 1}
    assert _ok(api.get("/api/v1/contacts", params={"tag": "spring-vip"}))["total"] == 1
    edited = _ok(
        api.patch(f"/api/v1/contacts/{made['id']}", json={"name": "Zoë K", "add_tags": ["x"]})
    )
    assert (edited["name"], edited["tags"]) == ("Zoë K", ["spring-vip", "x"])
    assert_problem(api.patch("/api/v1/contacts/999999", json={"name": "n"}), 404, "not_found")

    cid = _ok(api.post("/api/v1/campaigns", json=CAMPAIGN), 201)["id"]
    wait_for(
        lambda: _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["done"],
        timeout=120,
        what="the campaign to finish",
    )

    def delivered() -> Any:
        page = _ok(api.get(f"/api/v1/contacts/{made['id']}"))
        states = [d["state"] for d in page["deliveries"]]
        return states and states[0] in ("delivered", "read") and page

    page = wait_for(delivered, timeout=60, what="the delivery to be delivered")
    line = page["deliveries"][0]
    assert (line["campaign_id"], line["campaign_name"]) == (cid, "Spring VIP")
    assert line["state_words"] in ("delivered", "read") and line["sent_at"]
    other = _ok(api.get("/api/v1/contacts", params={"q": "bonn"}))["items"][0]
    assert _ok(api.get(f"/api/v1/contacts/{other['id']}"))["deliveries"] == []

    lists = {x["name"]: x["id"] for x in _ok(api.get("/api/v1/lists"))["items"]}
    out = _ok(api.delete(f"/api/v1/contacts/{made['id']}/lists/{lists['customers']}"))
    assert out["lists"] == []
    export = api.get("/api/v1/contacts/export", params={"list": "customers"})
    assert export.status_code == 200 and export.text.startswith("phone,name")
    assert len(export.text.strip().splitlines()) == 1  # the header: nobody left in it
    assert_problem(api.get("/api/v1/contacts/export", params={"list": "nope"}), 422,
                   "invalid_request")  # fmt: skip


PHONE_WIDTH = {"width": 390, "height": 844}
SPRING = """name = "Spring"

[audience]
tags = ["spring"]

[message]
type = "text"
text = "Hallo {{ name }}"

[pace]
per_minute = 600
delay_seconds = [0, 0]
"""
#: every visible form control without a label (by its id), in the page
UNLABELLED = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
  .filter(e => e.offsetParent !== null && !(e.labels && e.labels.length)
    && !e.getAttribute('aria-label'))
  .map(e => e.id || e.name)"""
#: whether the page scrolls sideways
SIDEWAYS = "() => document.documentElement.scrollWidth > document.documentElement.clientWidth"


@pytest.mark.slow
@pytest.mark.browser
def test_browser_search_and_contact_page_at_phone_width(ws: Workspace, chromium: Any) -> None:
    ws.link_sender()
    ws.run("contacts", "add", "+14155550101", "--name", "Zoë Brückner", "--attr", "city=Köln",
           "--tag", "spring", "--list", "customers")  # fmt: skip
    people = ws.path / "people.csv"  # more than one page of 50
    people.write_text(
        "phone,name\n" + "".join(f"+141555502{i:02d},Person {i}\n" for i in range(2, 60))
    )
    ws.run("contacts", "import", str(people), "--list", "customers")
    spring = ws.path / "spring.toml"
    spring.write_text(SPRING, encoding="utf-8")
    cid = str(ws.run("campaign", "create", str(spring), "--json").json()["id"])
    ws.run("campaign", "run", cid, "--webhook", "--settle", "1", timeout=300)
    server = ws.serve()

    context = chromium.new_context(viewport=PHONE_WIDTH)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        _sign_in(page, server, "/contacts")
        assert page.evaluate(UNLABELLED) == [] and not page.evaluate(SIDEWAYS)
        assert page.inner_text("#search-total") == "1–50 of 59 contacts."
        page.click("#next-page")
        page.wait_for_url("**cursor=**")
        assert page.locator("#contacts-table tbody tr").count() == 9
        assert page.inner_text("#search-total") == "51–59 of 59 contacts."
        page.fill("#search-q", "KOLN")
        page.select_option("#search-list", label="customers")
        page.fill("#search-tag", "spring")
        page.click("#search-form button[type=submit]")
        page.wait_for_url("**q=KOLN**")
        assert page.inner_text("#search-total").startswith("1 contact")
        page.click("#contacts-table a:has-text('Zoë Brückner')")
        page.wait_for_selector("#contact-title")
        assert not page.evaluate(SIDEWAYS) and page.evaluate(UNLABELLED) == []
        state = page.inner_text("#deliveries-table td[data-label=State]")
        assert state in ("delivered", "read", "sent, not yet delivered"), state
        assert "Spring" in page.inner_text("#deliveries-table")
        assert "Köln" in page.inner_text("#contact-attributes")
        page.fill("#edit-tags", "spring, vip")
        page.fill("#edit-attrs", "city=Köln\nplan=gold")
        page.click("#save-btn")
        page.wait_for_function("document.querySelector('#contact-tags').innerText.includes('vip')")
        assert "gold" in page.inner_text("#contact-attributes")
        page.click("#opt-btn")
        page.wait_for_function(
            "document.querySelector('#contact-status').innerText.includes('opted out')"
        )
        page.goto(f"{server.url}/contacts?tag=nope")
        assert "no tag called 'nope'" in page.inner_text("#search-error")
    finally:
        context.close()
    shown = ws.run("contacts", "show", "+14155550101", "--json").json()
    assert (shown["tags"], shown["attributes"]["plan"], shown["opted_out"]) == (
        ["spring", "vip"],
        "gold",
        True,
    )
