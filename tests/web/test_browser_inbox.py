"""The replies inbox's answers in a real browser (Debian's Chromium), against ``gatecast
serve`` and ``gatecast sandbox`` as processes (one of each for the module; issue 32,
item 4): a person writes in, an operator finds it among the replies still to handle,
answers it on the Replies page; the sandbox's record shows the answer to that person
from the sender they wrote to, the reply is handled (the page and the API say so), and a
viewer is offered no answer."""

from __future__ import annotations

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
    link_sender_over_api,
    ok,
    start_sandbox,
    wait_for,
    workspace,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
WRITER = "+447911123601"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    sandbox = start_sandbox(tmp_path_factory.mktemp("sandbox"), *QUICK_STATUSES)
    try:
        with workspace(tmp_path_factory.mktemp("work"), sandbox.url) as w:
            yield w
    finally:
        sandbox.stop()


@pytest.fixture(scope="module")
def server(ws: Workspace) -> Server:
    return ws.serve()


def _received(ws: Workspace, phone: str, sender: str) -> list[str]:
    """What the sandbox recorded as sent to ``phone`` by ``sender``."""
    query = {"to": phone.lstrip("+"), "instance_id": sender}
    got = httpx.get(f"{ws.gateway_url}/sandbox/messages", params=query, timeout=10).json()
    return [str(m["payload"]) for m in (got["items"] if isinstance(got, dict) else got)]


def test_an_operator_answers_a_reply_on_the_replies_page(
    chromium_browser: Any, ws: Workspace, server: Server
) -> None:
    from playwright.sync_api import expect

    with server.api() as api:
        shop = link_sender_over_api(api, "shop")
        httpx.post(
            f"{ws.gateway_url}/sandbox/instances/{shop}/incoming",
            json={"from": WRITER.lstrip("+"), "text": "Do you deliver on Sundays?"},
            timeout=10,
        ).raise_for_status()
        reply = wait_for(
            lambda: ok(api.get("/api/v1/replies", params={"handled": "false"}))["items"],
            what="the reply in the inbox",
        )[0]
        user = {"name": "vera", "role": "viewer", "password": "vera password 1"}
        ok(api.post("/api/v1/users", json=user), 201)
        viewer_key = str(ok(api.post("/api/v1/users/vera/keys", json={}), 201)["key"])

    # a viewer sees the reply but is offered no answer
    page = signed_in_page(chromium_browser, server.url, "/replies", viewer_key)
    try:
        page.wait_for_url(f"{server.url}/replies")
        expect(page.locator(f"tr[data-reply='{reply['id']}']")).to_contain_text("Sundays")
        expect(page.locator(f"#answer-{reply['id']}")).to_have_count(0)
    finally:
        page.context.close()

    page = signed_in_page(chromium_browser, server.url, "/replies?handled=no", API_KEY)
    try:
        page.wait_for_url(re.compile(r"/replies\?handled=no"))
        row = page.locator(f"tr[data-reply='{reply['id']}']")
        expect(row).to_contain_text("Do you deliver on Sundays?")
        row.locator("summary").click()
        page.fill(f"#answer-text-{reply['id']}", "Yes, every Sunday until noon")
        page.click(f"#answer-send-{reply['id']}")
        # answered: it leaves the replies still to handle
        expect(page.locator("#replies-count")).to_have_text("No reply matches.")
        page.goto(f"{server.url}/replies?handled=yes")
        expect(page.locator(f"tr[data-reply='{reply['id']}'] .handled")).to_contain_text("handled")
    finally:
        page.context.close()

    # the person got the answer, once, from the sender they wrote to
    answers = wait_for(
        lambda: [m for m in _received(ws, WRITER, shop) if "every Sunday" in m],
        what="the answer at the sandbox",
    )
    assert len(answers) == 1, answers
    with server.api() as api:
        handled = ok(api.get("/api/v1/replies", params={"handled": "true"}))["items"]
        assert [r["id"] for r in handled] == [reply["id"]] and handled[0]["handled_at"]
        assert ok(api.get("/api/v1/replies", params={"handled": "false"}))["total"] == 0
