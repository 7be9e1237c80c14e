"""The composer's media upload in a real browser (Debian's Chromium), as an operator uses
it: a file of the wrong type is refused in words, a picture uploaded fills the Media URL
(a picture needs no file name), the campaign is created from the form and sent to the
sandbox, and the URL the gateway received gives back the picture's bytes. The media
library lists it with the campaign that sent it; a document uploaded there is listed at
once; deleting the picture is refused in words while a scheduled campaign will still
send it, the unused document is deleted. A viewer gets no upload control and no delete.
Its screenshots: composer-media-upload, media-library (test-artifacts/screenshots/, and
docs/screenshots/ with GATECAST_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from campaigns import users
from campaigns.importer import ImportOptions, import_file
from storage.types import utcnow
from tests.journeys.harness import link_sender_over_api, wait_for
from tests.media_files import pdf, png
from tests.web.conftest import API_KEY, LiveApp, gateway_factory_for
from tests.web.test_browser import (  # noqa: F401  (the one browser of this module)
    ARTIFACTS,
    browser_page,
    publish_shots,
)
from tests.web.test_browser_composer import create_now, service  # noqa: F401  (as there)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PEOPLE = "name,phone\nAda Lovelace,+12025550101\nAlan Turing,+12025550102\n"


@pytest.fixture
def app(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    linked_sandbox: Any,
    tmp_path: Path,
) -> LiveApp:
    people = tmp_path / "people.csv"
    people.write_text(PEOPLE, encoding="utf-8")
    import_file(sqlite_engine, people, ImportOptions(list_name="people"))
    live = make_live(
        sqlite_engine,
        gateway_factory=gateway_factory_for(linked_sandbox),
        settings_overrides={
            "public_url": "self",
            "argon2_memory_kib": 64,
            "argon2_time_cost": 1,
        },
    )
    users.create_user(
        sqlite_engine, "vic", "viewer", "vic password 1", users.Hashing(64, 1), utcnow()
    )
    with live.client() as api:
        link_sender_over_api(api)
    return live


def test_upload_a_picture_from_the_composer_and_send_it(
    app: LiveApp,
    service: None,  # noqa: F811
    linked_sandbox: Any,
    browser_page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    page.goto(f"{app.url}/campaigns/new")
    page.fill("#api_key", API_KEY)
    page.click("#sign-in")
    page.wait_for_url(re.compile(r"/campaigns/new$"))
    page.fill("#f-name", "Winter sale")
    page.select_option("#f-list", "people")
    page.select_option("#f-type", "media")
    upload = page.get_by_label("…or upload a file")
    expect(upload).to_be_visible()

    # a text file dressed as a picture: refused in words, nothing filled in
    fake = tmp_path / "poster.png"
    fake.write_text("not a picture at all\n", encoding="utf-8")
    upload.set_input_files(str(fake))
    expect(page.locator("#f-media-msg")).to_contain_text(
        "poster.png: this type of file cannot be sent as media"
    )
    expect(page.locator("#f-media-msg")).to_have_class("error")
    expect(page.locator("#f-media")).to_have_value("")

    # the real picture: uploaded, its link and name fill the fields
    picture = png(32, 24)
    real = tmp_path / "Winter sale.png"
    real.write_bytes(picture)
    upload.set_input_files(str(real))
    expect(page.locator("#f-media-msg")).to_contain_text("Uploaded Winter_sale.png (image")
    expect(page.locator("#f-media")).to_have_value(
        re.compile(re.escape(app.url) + r"/media/\d+/Winter_sale\.png\?expires=\d+&signature=")
    )
    expect(page.locator("#f-filename")).to_have_value("")  # a picture shows itself
    # the phone preview shows the picture itself, fetched from its signed link
    expect(page.locator("#pv-chat .pv-image img")).to_have_attribute(
        "src", re.compile(r"/media/\d+/Winter_sale\.png\?")
    )
    page.wait_for_function(  # the browser loaded it from the link: 32 px wide
        "() => document.querySelector('#pv-chat .pv-image img').naturalWidth === 32"
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#media-upload").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "composer-media-upload.png"))

    page.fill("#f-text", "Our winter sale, {{ name }}!")
    page.fill("#f-rate", "600")
    page.fill("#f-dmin", "0")
    page.fill("#f-dmax", "0")
    media_url = page.locator("#f-media").input_value()
    create_now(page)  # no start: said and confirmed
    page.wait_for_url(re.compile(r"/campaigns/\d+$"))
    expect(page.locator("body")).to_have_attribute("data-campaign-done", "yes", timeout=60_000)

    for number in ("12025550101", "12025550102"):
        got = wait_for(
            lambda n=number: httpx.get(
                f"{linked_sandbox.url}/sandbox/messages", params={"to": n}, timeout=10
            ).json(),
            timeout=30,
            what=f"the picture to {number}",
        )
        items = got["items"] if isinstance(got, dict) else got
        url = items[-1]["payload"]["media_url"]
        fetched = httpx.get(url, timeout=10)  # as the gateway fetches it: no sign-in
        assert (fetched.status_code, fetched.content) == (200, picture)

    # the media library: the picture, what it is, and the campaign that sent it
    page.goto(f"{app.url}/media")
    row = page.locator("#media-table tr[data-name='Winter_sale.png']")
    expect(row).to_contain_text("Picture")
    expect(row.locator("td[data-label=Size]")).to_have_text(f"{len(picture)} bytes")
    expect(row.locator("[data-role=uses]")).to_contain_text("Winter sale")
    expect(row.locator("[data-role=uses]")).to_contain_text("completed")
    # a document uploaded here is listed at once, used by no campaign
    menu = tmp_path / "Lunch menu.pdf"
    menu.write_bytes(pdf())
    page.set_input_files("#m-file", str(menu))
    expect(page.locator("#m-msg")).to_have_text("Uploaded Lunch_menu.pdf.")
    doc = page.locator("#media-table tr[data-name='Lunch_menu.pdf']")
    expect(doc).to_contain_text("Document")
    expect(doc.locator("[data-role=uses]")).to_have_text("no campaign")
    expect(page.locator("#media-count")).to_have_text("2 file(s).")

    # a scheduled campaign sends the picture later: deleting it is refused in words
    with app.client() as api:
        later = api.post(
            "/api/v1/campaigns",
            json={
                "name": "Spring sale",
                "list": "people",
                "message": {"type": "media", "media_url": media_url},
                "schedule": {"start": "2099-03-01T09:00:00", "timezone": "UTC"},
            },
        )
        assert later.status_code == 201, later.text
    page.reload()
    expect(row.locator("[data-role=uses]")).to_contain_text("Spring sale")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "media-library.png"), full_page=True)
    page.on("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete Winter_sale.png").click()
    expect(page.locator("#media-msg")).to_contain_text(
        "Winter_sale.png is used by campaign 'Spring sale' (scheduled), which will still "
        "send it: cancel those campaigns (or change their message) first"
    )
    expect(row).to_have_count(1)
    doc.get_by_role("button", name="Delete Lunch_menu.pdf").click()
    expect(page.locator("#media-msg")).to_have_text("Deleted Lunch_menu.pdf.")
    expect(doc).to_have_count(0)
    expect(page.locator("#media-count")).to_have_text("1 file(s).")
    publish_shots("composer-media-upload", "media-library")

    # a viewer's composer has no upload control (the API refuses them too)
    page.context.clear_cookies()
    page.goto(f"{app.url}/login?next=/campaigns/new")
    page.fill("#user", "vic")
    page.fill("#password", "vic password 1")
    page.click("#sign-in")
    expect(page.locator("#signed-in-as")).to_have_text("vic (viewer)")
    page.goto(f"{app.url}/campaigns/new")
    expect(page.locator("#f-media-file")).to_have_count(0)
    # ... nor does their media library: the files only
    page.goto(f"{app.url}/media")
    expect(row).to_contain_text("Winter_sale.png")
    expect(page.locator("#m-file")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete Winter_sale.png")).to_have_count(0)
    with app.client() as api:
        assert api.get("/api/v1/media").json()["total"] == 1
