"""The dashboard in a real browser: Playwright driving Debian's Chromium (never a download).

One journey, as a shop owner would take it: sign in, link a sandbox instance by scanning
its QR code, upload samples/contacts.xlsx and read the rejected rows, create a campaign
with a preview, watch it complete against the sandbox (scheduler and dispatcher running
in this process), download the report. Screenshots of each page go to
test-artifacts/screenshots/; with GATECAST_UPDATE_SCREENSHOTS=1 they also replace the
ones in docs/screenshots/ (which the README and docs show), so a plain run never touches
tracked files.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openpyxl
import pytest
from sqlalchemy import Engine

from tests.browser import opened_page
from tests.qr import decode_qr
from tests.web.conftest import API_KEY, LiveApp, gateway_factory_for

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
DOCS_SHOTS = ROOT / "docs" / "screenshots"
SAMPLES = ROOT / "samples"
#: true when the page scrolls sideways (at a phone's width it must not)
SIDEWAYS = "() => document.scrollingElement.scrollWidth > window.innerWidth"


@pytest.fixture
def browser_page(chromium_browser: Any) -> Iterator[Any]:
    """A Chromium page in a fresh context of the session's browser (no other test's
    cookies)."""
    yield from opened_page(chromium_browser)


@pytest.fixture
def running_service(sqlite_engine: Engine, sandbox: Any) -> Iterator[None]:
    """Scheduler and dispatcher, as ``gatecast serve`` runs them, against the sandbox."""
    from scheduler.service import Service, ServiceOptions

    options = ServiceOptions(poll_seconds=0.1, sync_seconds=0.3, leader_ttl_seconds=5)
    with Service(sqlite_engine, gateway_factory_for(sandbox), options=options):
        yield


def sign_in(page: Any, url: str, path: str) -> None:
    """Open ``path`` signed out (the sign-in page comes first), sign in with the API key,
    and land on ``path``."""
    from playwright.sync_api import expect

    page.goto(f"{url}{path}")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.fill("#api_key", API_KEY)
    page.click("#sign-in")
    expect(page).to_have_url(f"{url}{path}")


def shot(page: Any, name: str, *, full_page: bool = True) -> None:
    """A screenshot (of the whole page, or the viewport) into
    test-artifacts/screenshots/NAME.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


#: the screenshots this module's journey takes (docs/screenshots/ shows them)
JOURNEY_SHOTS = (
    "01-sign-in",
    "02-instance-qr",
    "03-instance-connected",
    "04-contacts-preview",
    "05-contacts-imported",
    "06-campaign-preview",
    "07-campaign-complete",
    "08-campaigns",
    "09-api-docs",
)


def publish_shots(*names: str) -> None:
    """With GATECAST_UPDATE_SCREENSHOTS=1, copy the screenshots ``names`` (all when none
    given) to docs/screenshots/."""
    if os.environ.get("GATECAST_UPDATE_SCREENSHOTS") != "1":
        return
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    for found in sorted(ARTIFACTS.glob("*.png")):
        if not names or found.stem in names:
            shutil.copy2(found, DOCS_SHOTS / found.name)


def test_dashboard_journey(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    sandbox: Any,
    running_service: None,
    browser_page: Any,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    live = make_live(
        sqlite_engine,
        gateway_factory=gateway_factory_for(sandbox),
        settings_overrides={"public_url": "self", "webhook_secret": "browser-hook-secret"},
    )
    page = browser_page

    # sign in (a page asks for it first)
    page.goto(f"{live.url}/instances")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.fill("#api_key", "not the key")
    page.click("#sign-in")
    expect(page.locator(".error")).to_contain_text("not right")
    shot(page, "01-sign-in")
    page.fill("#api_key", API_KEY)
    page.click("#sign-in")
    expect(page).to_have_url(f"{live.url}/instances")

    # link an instance: create it, read the QR code off the page, scan it with the "phone"
    page.fill("#new-label", "Shop phone")
    page.click("#create-instance")
    card = page.locator(".instance").first
    qr = card.locator("[data-role=qr-img]")
    expect(qr).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    shot(page, "02-instance-qr")
    iid = card.get_attribute("data-instance")
    assert iid
    for _ in range(4):  # a QR rotates (as a phone app's does): scan the new one if it did
        src = str(qr.get_attribute("src"))
        res = httpx.post(
            f"{sandbox.url}/sandbox/instances/{iid}/scan", json={"code": decode_qr(src)}
        )
        if "expired" not in res.text:
            break
        expect(qr).not_to_have_attribute("src", src, timeout=60_000)
    assert res.status_code == 200, res.text
    expect(card.locator("[data-role=state]")).to_have_text("connected", timeout=30_000)
    expect(card.locator("[data-role=qr]")).to_be_hidden()
    card.locator("button[data-op=webhook]").click()
    expect(card.locator("[data-role=msg]")).to_have_text("webhook registered")
    shot(page, "03-instance-connected")

    # contacts: preview the mapping, import, read the rejected rows
    page.click("nav >> text=Contacts")
    page.set_input_files("#file", str(SAMPLES / "contacts.xlsx"))
    page.fill("#list_name", "customers")
    page.click("#preview-btn")
    expect(page.locator("#phone_column")).to_have_value("Phone")
    expect(page.locator("#preview-table")).to_contain_text("+12025550143")
    shot(page, "04-contacts-preview")
    page.click("#import-btn")
    expect(page.locator("#upload-msg")).to_contain_text("Imported into list", timeout=60_000)
    rejects = page.locator("#rejects-table tbody tr")
    expect(rejects.first).to_be_visible()
    assert rejects.count() >= 1
    first_reject = rejects.first.inner_text()
    assert re.search(r"^\d+", first_reject.strip()), first_reject
    imported = int(page.locator("[data-count=New]").inner_text())
    rejected = int(page.locator("[data-count=Rejected]").inner_text())
    assert imported > 0 and rejected == rejects.count()
    shot(page, "05-contacts-imported")

    # campaign: form, preview, create (start now), watch it complete
    page.click("nav >> text=Campaigns")
    page.click("#new-campaign")
    page.fill("#f-name", "Browser promo")
    page.select_option("#f-list", "customers")
    page.fill("#f-text", "{Hi|Hello} {{ name }}, the {{ city }} shop has a new offer.")
    page.fill("#f-rate", "600")
    page.fill("#f-dmin", "0")
    page.fill("#f-dmax", "0")
    page.fill("#f-cap", "1000")
    page.click("#form-preview")
    expect(page.locator("#preview-items")).to_contain_text("shop has a new offer")
    expect(page.locator("#campaign-msg")).to_contain_text("nothing was stored")
    shot(page, "06-campaign-preview")
    page.click("#form-create")
    # no start: the page says it sends at once and asks first
    expect(page.locator("#create-confirm")).to_contain_text("Sending starts now")
    page.click("#form-confirm")
    page.wait_for_url(re.compile(r"/campaigns/\d+$"))
    cid = int(page.url.rsplit("/", 1)[1])
    expect(page.locator("body")).to_have_attribute("data-campaign-done", "yes", timeout=90_000)
    expect(page.locator("#state")).to_have_text("completed")
    expect(page.locator("#c-queued")).to_have_text("0")
    sent_like = sum(
        int(page.locator(f"#c-{s}").inner_text()) for s in ("sent", "delivered", "read")
    )
    assert sent_like == imported
    expect(page.locator("#chart polyline[data-series=sent]")).to_have_count(1)
    expect(page.locator("#deliveries tbody tr").first).to_be_visible()
    shot(page, "07-campaign-complete")

    # the report downloads
    with page.expect_download() as dl:
        page.click("#dl-xlsx")
    saved = tmp_path / dl.value.suggested_filename
    dl.value.save_as(saved)
    assert saved.name == f"campaign-{cid}-browser-promo.xlsx"
    book = openpyxl.load_workbook(saved, read_only=True)
    assert len(book.sheetnames) >= 2
    with page.expect_download() as dl_csv:
        page.click("#dl-csv")
    csv_path = tmp_path / dl_csv.value.suggested_filename
    dl_csv.value.save_as(csv_path)
    assert len(csv_path.read_text(encoding="utf-8-sig").strip().splitlines()) == imported + 1

    # a second campaign from a TOML file, scheduled for later: pause, resume, cancel it
    toml = tmp_path / "later.toml"
    toml.write_text(
        'name = "Later promo"\nlist = "customers"\n[message]\ntype = "text"\n'
        'text = "Hello {{ name }}"\n[schedule]\nstart = "2099-01-01T09:00:00"\n'
        'timezone = "Europe/Berlin"\n',
        encoding="utf-8",
    )
    page.goto(f"{live.url}/campaigns/new")
    page.set_input_files("#toml-file", str(toml))
    # the upload's final check answers first, as a person sees it before creating
    expect(page.locator("#final-check")).to_contain_text("later.toml", timeout=30_000)
    page.click("#toml-create")
    page.wait_for_url(re.compile(r"/campaigns/\d+$"), timeout=60_000)
    expect(page.locator("#state")).to_have_text("scheduled")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#act-pause")
    expect(page.locator("#state")).to_have_text("paused")
    page.click("#act-resume")
    expect(page.locator("#state")).to_have_text("scheduled")
    page.click("#more-actions summary")  # cancel waits under "More actions"
    page.click("#act-cancel")
    expect(page.locator("#state")).to_have_text("cancelled")
    expect(page.locator("#act-pause")).to_be_disabled()

    page.click("nav >> text=Campaigns")
    expect(page.locator("#campaigns-table")).to_contain_text("Browser promo")
    expect(page.locator("#campaigns-table")).to_contain_text("Later promo")
    shot(page, "08-campaigns")
    page.goto(f"{live.url}/docs")
    expect(page.locator(".swagger-ui")).to_be_visible()
    expect(page.locator("body")).to_contain_text("/api/v1/campaigns")
    shot(page, "09-api-docs")

    publish_shots(*JOURNEY_SHOTS)
