"""The HTTP API and the dashboard, as an integrator and a shop owner use them.

Everything goes through ``gatecast serve`` (its API over real HTTP, its dashboard in
Debian's Chromium) and the CLI, against a ``gatecast sandbox`` process:

- a POST repeated with the same ``Idempotency-Key`` creates once and answers the same;
  the same key with another body is refused;
- the new-campaign form double-clicked creates one campaign;
- the Instances page left open while a linked phone's connection drops never asks for a
  QR code (which would end the session): gatecast reconnects it;
- errors are problem details (JSON) without server paths or CLI options.

The browser journeys are ``slow`` (deselected by default: ``pytest -m slow``).
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    API_KEY,
    SAMPLES,
    Process,
    Server,
    Workspace,
    table_value,
    wait_for,
)
from tests.journeys.harness import assert_nothing_leaked as _assert_nothing_leaked
from tests.journeys.harness import assert_problem as _assert_problem

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

CAMPAIGN: dict[str, Any] = {
    "name": "Spring sale",
    "list": "customers",
    "message": {"type": "text", "text": "Hello {{ name }}, 20% off this week!"},
    "schedule": {"start": "2099-04-01T09:00:00", "timezone": "Europe/Berlin"},
    "pace": {"per_minute": 20, "delay_seconds": [5, 15], "daily_cap": 500},
}


# --- steps ----------------------------------------------------------------------------


def _import_customers(ws: Workspace) -> None:
    out = ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    assert table_value(out.output, "imported (new)") == "44"


def _campaign_ids(api: httpx.Client) -> list[int]:
    res = api.get("/api/v1/campaigns")
    assert res.status_code == 200, res.text
    return [int(c["id"]) for c in res.json()["items"]]


# --- idempotency (API) ------------------------------------------------------------------


def test_a_repeated_post_with_its_idempotency_key_creates_one_campaign(ws: Workspace) -> None:
    _import_customers(ws)
    server = ws.serve()
    with server.api() as api:
        key = {"Idempotency-Key": f"create-{uuid.uuid4()}"}
        first = api.post("/api/v1/campaigns", json=CAMPAIGN, headers=key)
        again = api.post("/api/v1/campaigns", json=CAMPAIGN, headers=key)
        assert first.status_code == 201, first.text
        assert again.status_code == 201, again.text
        assert again.content == first.content
        assert again.headers.get("idempotent-replayed") == "true"
        assert _campaign_ids(api) == [first.json()["id"]]

        # two at the same moment (a double click with nothing else to stop it)
        key2 = {"Idempotency-Key": f"create-{uuid.uuid4()}"}
        answers: list[httpx.Response] = []

        def post() -> None:
            with server.api() as own:
                answers.append(own.post("/api/v1/campaigns", json=CAMPAIGN, headers=key2))

        threads = [threading.Thread(target=post) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [a.status_code for a in answers] == [201, 201], [a.text for a in answers]
        assert answers[0].content == answers[1].content
        assert len(_campaign_ids(api)) == 2

    # the key survives a restart: the replay comes from the database
    server.stop()
    with ws.serve().api() as api:
        replay = api.post("/api/v1/campaigns", json=CAMPAIGN, headers=key)
        assert replay.status_code == 201 and replay.content == first.content
        assert len(_campaign_ids(api)) == 2


def test_an_idempotency_key_reused_with_another_body_is_refused(ws: Workspace) -> None:
    _import_customers(ws)
    server = ws.serve()
    with server.api() as api:
        key = {"Idempotency-Key": f"create-{uuid.uuid4()}"}
        first = api.post("/api/v1/campaigns", json=CAMPAIGN, headers=key)
        assert first.status_code == 201, first.text
        other = {**CAMPAIGN, "name": "Another sale"}
        refused = api.post("/api/v1/campaigns", json=other, headers=key)
        body = _assert_problem(refused, 422, "idempotency_key_reused")
        assert "Idempotency-Key" in body["detail"] and "different request" in body["detail"]
        assert _campaign_ids(api) == [first.json()["id"]]

        # the other creating routes honour the header too
        list_key = {"Idempotency-Key": f"list-{uuid.uuid4()}"}
        a = api.post("/api/v1/lists", json={"name": "vip"}, headers=list_key)
        b = api.post("/api/v1/lists", json={"name": "vip"}, headers=list_key)
        assert a.status_code == b.status_code == 201 and a.content == b.content
        _assert_problem(
            api.post("/api/v1/lists", json={"name": "vip2"}, headers=list_key),
            422,
            "idempotency_key_reused",
        )
        upload_key = {"Idempotency-Key": f"import-{uuid.uuid4()}"}
        files = {"file": ("contacts.csv", (SAMPLES / "contacts.csv").read_bytes())}
        one = api.post(
            "/api/v1/imports", files=files, data={"list_name": "again"}, headers=upload_key
        )
        two = api.post(
            "/api/v1/imports", files=files, data={"list_name": "again"}, headers=upload_key
        )
        assert one.status_code == two.status_code == 202, two.text
        assert one.json()["id"] == two.json()["id"]
        assert len(api.get("/api/v1/imports").json()) == 2  # the CLI's and this one


# --- problem details (API) ----------------------------------------------------------------


def test_errors_are_problem_details_without_paths_or_cli_options(ws: Workspace) -> None:
    server = ws.serve()
    with server.api() as api:
        body = _assert_problem(api.get("/api/v1/campaigns/987654"), 404, "not_found")
        assert "987654" in body["detail"]
        _assert_problem(api.get("/api/v1/no-such-thing"), 404, "not_found")
        _assert_problem(api.delete("/api/v1/campaigns"), 405, "method_not_allowed")
        invalid = _assert_problem(api.post("/api/v1/lists", json={}), 422, "invalid_request")
        assert invalid["errors"][0]["loc"] == ["body", "name"], invalid
        # an id too large for the database: refused, naming the parameter
        too_large = _assert_problem(
            api.get("/api/v1/imports/99999999999999999999"), 422, "invalid_request"
        )
        assert too_large["errors"][0]["loc"] == ["path", "import_id"], too_large
        assert "OverflowError" not in too_large["detail"]
        _assert_problem(server.api(key=None).get("/api/v1/campaigns"), 401, "unauthorized")


def test_an_upload_error_names_the_original_file_not_a_temp_path(ws: Workspace) -> None:
    server = ws.serve()
    table = b"Customer,City\nOlivia,Berlin\n"  # no phone column
    with server.api() as api:
        jobs_before = api.get("/api/v1/imports").json()
        preview = api.post("/api/v1/imports/preview", files={"file": ("shop customers.csv", table)})
        assert preview.status_code == 200, preview.text
        problem = preview.json()["problem"]
        assert problem.startswith("shop customers.csv: no phone column"), problem
        assert "phone_column" in problem, problem
        _assert_nothing_leaked(preview.text)

        broken = api.post(
            "/api/v1/imports/preview", files={"file": ("price list.xlsx", b"not a workbook")}
        )
        body = _assert_problem(broken, 422, "invalid_request")
        assert "price list.xlsx" in body["detail"], body
        assert body["errors"][0]["loc"] == ["body", "file"], body

        started = api.post(
            "/api/v1/imports",
            files={"file": ("shop customers.csv", table)},
            data={"list_name": "shop"},
        )
        refused = _assert_problem(started, 422, "invalid_request")  # refused before a job
        assert refused["errors"][0]["loc"] == ["body", "file"], refused
        assert "shop customers.csv: no phone column" in refused["detail"], refused
        _assert_nothing_leaked(started.text)
        assert api.get("/api/v1/imports").json() == jobs_before  # no job was started


# --- the dashboard in Chromium ------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium(chromium_browser: Any) -> Any:
    """The headless Chromium for the module's browser journeys (the session's one)."""
    return chromium_browser


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh browser context and page (no cookies from another journey)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    context.close()


def _sign_in(page: Any, server: Server, path: str) -> None:
    page.goto(f"{server.url}/login?next={path}")
    page.fill("#api_key", API_KEY)
    page.click("#sign-in")
    page.wait_for_url(f"{server.url}{path}")


def _sandbox(sandbox_process: Process, path: str, method: str = "GET") -> Any:
    res = httpx.request(method, f"{sandbox_process.url}{path}", timeout=10)
    assert res.status_code == 200, res.text
    return res.json()


def _qr_requests(sandbox_process: Process) -> int:
    return int(_sandbox(sandbox_process, "/sandbox/stats")["requests"].get("get_qrcode", 0))


@pytest.mark.slow
@pytest.mark.browser
def test_a_double_clicked_campaign_form_creates_one_campaign(ws: Workspace, page: Any) -> None:
    _import_customers(ws)
    server = ws.serve()
    # serve says how to sign in, and where the key is, never the key (its output is a log)
    wait_for(lambda: "sign in at " in server.process.output(), what="the sign-in hint")
    hint = server.process.output().split("sign in at ", 1)[1].splitlines()[0]
    assert hint.startswith(f"{server.url}/login with the key in GATECAST_API_KEY"), hint
    assert API_KEY not in server.process.output()
    _sign_in(page, server, "/campaigns/new")
    page.fill("#f-name", "Double click sale")
    page.select_option("#f-list", "customers")
    page.fill("#f-text", "Hello {{ name }}, one message only.")
    page.fill("#f-start", "2099-01-01T09:00")
    page.dblclick("#form-create")
    page.wait_for_url(re.compile(r"/campaigns/\d+$"))
    shown = int(page.url.rsplit("/", 1)[1])
    page.wait_for_timeout(1500)  # a second request, had there been one, has landed
    with server.api() as api:
        assert _campaign_ids(api) == [shown]


@pytest.mark.slow
@pytest.mark.browser
def test_the_instances_page_open_during_a_connection_drop_never_asks_for_a_qr(
    ws: Workspace, page: Any, sandbox_process: Process
) -> None:
    from playwright.sync_api import expect

    instance_id = ws.link_sender()
    server = ws.serve()
    _sign_in(page, server, "/instances")
    card = page.locator(f".instance[data-instance='{instance_id}']")
    expect(card.locator("[data-role=state]")).to_have_text("connected")
    asked_before = _qr_requests(sandbox_process)

    # the phone loses its connection for a moment (the gateway posts "disconnected")
    _sandbox(sandbox_process, f"/sandbox/instances/{instance_id}/disconnect", "POST")
    with server.api() as api:
        wait_for(
            lambda: api.get(f"/api/v1/instances/{instance_id}").json()["state"] != "connected",
            what="gatecast to learn of the drop",
        )
        expect(card.locator("[data-role=state]")).to_have_text(
            re.compile("reconnecting"), timeout=15_000
        )
        expect(card.locator("[data-role=qr-img]")).to_be_hidden()
        expect(card.locator("[data-role=reconnecting]")).to_contain_text("reconnects it")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "instance-reconnecting.png"), full_page=True)
        # gatecast's reconnector brings it back (it checks every 10 s)
        expect(card.locator("[data-role=state]")).to_have_text("connected", timeout=60_000)
        assert api.get(f"/api/v1/instances/{instance_id}").json()["state"] == "connected"
        expect(card.locator("[data-role=reconnecting]")).to_be_hidden()
        expect(card.locator("[data-role=show-qr]")).to_be_hidden()
    gateway_view = {i["instance_id"]: i for i in _sandbox(sandbox_process, "/sandbox/instances")}
    assert gateway_view[instance_id]["state"] == "connected", gateway_view[instance_id]
    assert _qr_requests(sandbox_process) == asked_before, "the page asked for a QR code"


@pytest.mark.slow
@pytest.mark.browser
def test_the_dashboard_says_errors_in_web_terms(ws: Workspace, page: Any) -> None:
    from playwright.sync_api import expect

    server = ws.serve()
    _sign_in(page, server, "/contacts")
    upload = ws.path / "shop customers.csv"
    upload.write_text("Customer,City\nOlivia,Berlin\n", encoding="utf-8")
    page.set_input_files("#file", str(upload))
    page.click("#preview-btn")
    problem = page.locator("#preview-problem")
    expect(problem).to_contain_text("shop customers.csv: no phone column")
    expect(problem).to_contain_text("phone_column field")
    _assert_nothing_leaked(problem.inner_text())

    broken = ws.path / "price list.xlsx"
    broken.write_bytes(b"not a workbook")
    page.set_input_files("#file", str(broken))
    page.click("#preview-btn")
    expect(page.locator("#upload-msg")).to_contain_text("price list.xlsx")
    _assert_nothing_leaked(page.locator("#upload-msg").inner_text())

    # pages that do not exist are pages, not JSON
    missing = page.goto(f"{server.url}/no-such-page")
    assert missing is not None and missing.status == 404
    expect(page.locator("h1")).to_have_text("Not found")
    _assert_nothing_leaked(page.content())
