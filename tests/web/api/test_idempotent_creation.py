"""Every creating POST of the API honours ``Idempotency-Key``: the app's routes are
enumerated (a POST answering 201 or 202), and each is called twice with one key; the
repeat replays the first answer and nothing is created a second time. A 201 says where
the new thing is (``Location``, a GET there answers it), on the replay too."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import Engine

from gatecast.web.idempotency import HEADER, REPLAYED_HEADER
from tests.web.conftest import LiveApp, gateway_factory_for

CSV = b"phone,name\n+12025550143,Olivia\n+12025550144,Liam\n"
CAMPAIGN_TOML = b'name = "toml"\nlist = "people"\n[message]\ntype = "text"\ntext = "Hi"\n'


@dataclass
class Case:
    """How to create one thing, and the listing whose total counts them."""

    listing: str
    request: dict[str, Any] = field(default_factory=dict)
    count: Callable[[Any], int] = lambda body: int(body["total"])
    #: the path to call, when the route's has parameters
    path: str = ""


CASES: dict[str, Case] = {
    "/api/v1/lists": Case("/api/v1/lists", {"json": {"name": "fresh"}}),
    "/api/v1/contacts": Case(
        "/api/v1/contacts", {"json": {"phone": "+12025550199", "list_name": "people"}}
    ),
    "/api/v1/segments": Case("/api/v1/segments", {"json": {"name": "all", "lists": ["people"]}}),
    "/api/v1/campaigns": Case(
        "/api/v1/campaigns",
        {"json": {"name": "json", "list": "people", "message": {"type": "text", "text": "Hi"}}},
    ),
    "/api/v1/campaigns/toml": Case(
        "/api/v1/campaigns", {"files": {"file": ("c.toml", CAMPAIGN_TOML, "application/toml")}}
    ),
    "/api/v1/imports": Case(
        "/api/v1/imports",
        {"files": {"file": ("c.csv", CSV, "text/csv")}, "data": {"list_name": "imported"}},
        count=len,
    ),
    "/api/v1/webhook-endpoints": Case(
        "/api/v1/webhook-endpoints",
        {"json": {"url": "https://example.com/hook", "events": ["delivery.sent"]}},
    ),
    "/api/v1/webhook-endpoints/{endpoint_id}/test": Case(
        "/api/v1/webhook-endpoints/1",
        count=lambda body: int(body["messages"]["pending"]),
        path="/api/v1/webhook-endpoints/1/test",
    ),
    "/api/v1/instances": Case("/api/v1/instances", {"json": {"label": "shop"}}),
    "/api/v1/users": Case(
        "/api/v1/users",
        {"json": {"name": "olivia", "role": "viewer", "password": "a long enough password"}},
    ),
    "/api/v1/media": Case(
        "/api/v1/media", {"files": {"file": ("menu.pdf", b"%PDF-1.4\n%%EOF\n", "application/pdf")}}
    ),
    "/api/v1/reply-rules": Case(
        "/api/v1/reply-rules",
        {
            "json": {
                "name": "hours",
                "trigger": "keyword",
                "keywords": ["hours"],
                "message": {"type": "text", "text": "9 to 5"},
            }
        },
    ),
    "/api/v1/campaigns/{campaign_id}/clone": Case(
        "/api/v1/campaigns", {"json": {"name": "again"}}, path="/api/v1/campaigns/1/clone"
    ),
}
#: creating routes without a case here, and why
NOT_HERE = {
    # a replay would keep the new key readable in the stored answers: not idempotent
    "/api/v1/users/{name}/keys": "answers a secret shown once; a repeat makes a second key",
    # needs a linked sender: replayed in tests/journeys/test_operator.py
    "/api/v1/campaigns/{campaign_id}/test-sends": "needs a linked sender",
    # sends, stores nothing: replayed in tests/web/api/test_composer_guards.py
    "/api/v1/campaigns/test-send": "needs a linked sender",
    # no listing counts messages: replayed in tests/journeys/test_messages_api.py
    "/api/v1/messages": "no listing counts messages",
    # needs a reply come in: replayed in tests/journeys/test_messages_api.py
    "/api/v1/replies/{reply_id}/answer": "needs a reply come in",
}


def _creating_routes(api: httpx.Client) -> dict[str, dict[str, Any]]:
    """The POST operations of the OpenAPI document that answer 201 or 202."""
    doc = api.get("/openapi.json").json()
    return {
        path: item["post"]
        for path, item in doc["paths"].items()
        if "post" in item and {"201", "202"} & set(item["post"]["responses"])
    }


def test_every_creating_post_replays_a_repeated_key(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine, sandbox: Any
) -> None:
    live = make_live(sqlite_engine, gateway_factory=gateway_factory_for(sandbox))
    with live.client() as api:
        routes = _creating_routes(api)
        assert set(routes) == set(CASES) | set(NOT_HERE), "a creating route without a case"
        for path, operation in routes.items():
            if path == "/api/v1/users/{name}/keys":
                continue
            headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
            assert HEADER in headers, f"{path} does not declare {HEADER}"
        setup = api.post("/api/v1/contacts", json={"phone": "+12025550100", "list_name": "people"})
        assert setup.status_code == 201, setup.text
        for path, case in CASES.items():
            _created_once(api, path, case)


def _created_once(api: httpx.Client, path: str, case: Case) -> None:
    path = case.path or path
    before = case.count(api.get(case.listing).json())
    key = {HEADER: str(uuid.uuid4())}
    first = api.post(path, headers=key, **case.request)
    assert first.status_code in (201, 202), (path, first.text)
    assert REPLAYED_HEADER not in first.headers
    again = api.post(path, headers=key, **case.request)
    assert again.status_code == first.status_code, (path, again.text)
    assert again.headers.get(REPLAYED_HEADER) == "true", path
    assert again.json() == first.json(), path
    if first.status_code == 201:  # where the new thing is, on the replay too
        location = first.headers["location"]
        assert again.headers["location"] == location, path
        assert api.get(location).status_code == 200, (path, location)
    assert case.count(api.get(case.listing).json()) == before + 1, path
    # the same key for another request (here another query) is refused, creating nothing
    reused = api.post(path, headers=key, params={"another": "request"}, **case.request)
    assert reused.status_code == 422, (path, reused.text)
    assert reused.json()["code"] == "idempotency_key_reused", path
    assert case.count(api.get(case.listing).json()) == before + 1, path
