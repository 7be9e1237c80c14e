"""The composer's guards over the HTTP API, against the sandbox gateway over real HTTP:
a test send of a campaign file before it is created (rendered for the contact chosen,
nothing stored, the role and the hourly limit of test sends), and a create refused when
no recipient's message renders, saying which variable is missing for whom."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from campaigns import test_sends
from storage import tables
from tests.web.conftest import LiveApp

OWN = "+12025550199"  # the operator's own phone: not a contact
CITY = {
    "name": "City news",
    "list": "people",
    "message": {"type": "text", "text": "Hi {{ name }} from {{ city }}"},
    "schedule": {"start": "2099-01-04T09:00:00", "timezone": "Europe/Berlin"},
}
COUPON = {**CITY, "message": {"type": "text", "text": "Hi {{ name }}, code {{ coupon }}"}}


@pytest.fixture
def app(people_app: LiveApp) -> LiveApp:
    """The app with three people (Grace Hopper has no city) and a linked sender."""
    return people_app


def _received(sandbox: Any, to: str) -> list[str]:
    got = httpx.get(f"{sandbox.url}/sandbox/messages", params={"to": to.lstrip("+")}, timeout=10)
    return [str(m["payload"]) for m in got.json()]


def _stored(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        campaigns = conn.execute(select(func.count()).select_from(tables.campaigns)).scalar_one()
        tests = conn.execute(select(func.count()).select_from(tables.test_sends)).scalar_one()
    return int(campaigns), int(tests)


def _ids(api: httpx.Client) -> dict[str, int]:
    found = api.get("/api/v1/contacts", params={"limit": 10}).json()["items"]
    return {c["name"]: int(c["id"]) for c in found}


def test_a_test_send_before_the_campaign_exists(
    app: LiveApp, linked_sandbox: Any, sqlite_engine: Engine
) -> None:
    with app.client() as api:
        ids = _ids(api)
        body = {"spec": CITY, "to": OWN, "contact_id": ids["Alan Turing"]}
        once = {"Idempotency-Key": "composer-test-1"}  # a double click sends one test
        sent = api.post("/api/v1/campaigns/test-send", json=body, headers=once)
        assert sent.status_code == 201, sent.text
        again = api.post("/api/v1/campaigns/test-send", json=body, headers=once)
        assert again.headers.get("Idempotent-Replayed") == "true" and again.json() == sent.json()
        test = sent.json()
        assert (test["state"], test["target"], test["name"]) == ("sent", OWN, "Alan Turing")
        assert test["content"]["text"] == "Hi Alan Turing from London"
        got = _received(linked_sandbox, OWN)
        assert [p for p in got if "Hi Alan Turing from London" in p] == got and len(got) == 1
        # no contact chosen: the audience's first recipient
        first = api.post("/api/v1/campaigns/test-send", json={"spec": CITY, "to": OWN}).json()
        assert first["content"]["text"] == "Hi Ada Lovelace from Berlin", first
        assert _stored(sqlite_engine) == (0, 0)  # no campaign, no test-send row
        assert api.get("/api/v1/campaigns").json()["total"] == 0

        # refusals name the field: a contact the message does not render for, a bad number
        grace = {"spec": CITY, "to": OWN, "contact_id": ids["Grace Hopper"]}
        refused = api.post("/api/v1/campaigns/test-send", json=grace)
        assert refused.status_code == 422, refused.text
        error = refused.json()["errors"][0]
        assert error["loc"] == ["body", "contact_id"], error
        assert "for Grace Hopper: missing variable 'city'" in error["msg"], error
        bad = api.post("/api/v1/campaigns/test-send", json={"spec": CITY, "to": "12"})
        assert bad.json()["errors"][0]["loc"] == ["body", "to"], bad.text
        wrong = api.post(
            "/api/v1/campaigns/test-send", json={"spec": {**CITY, "list": ""}, "to": OWN}
        )
        assert wrong.status_code == 422 and wrong.json()["code"] == "invalid_campaign", wrong.text

        # a viewer may not send tests (an operator's action, as on a created campaign)
        api.post("/api/v1/users", json={"name": "vera", "role": "viewer", "password": "x" * 12})
        key = api.post("/api/v1/users/vera/keys", json={}).json()["key"]
    with app.client(key=key) as viewer:
        denied = viewer.post("/api/v1/campaigns/test-send", json=body)
        assert denied.status_code == 403 and denied.json()["code"] == "role_required"

    # the hourly limit: 20 test sends a user, then 429 with Retry-After
    with app.client() as api:
        made = 2
        while made < test_sends.PER_HOUR:
            assert api.post("/api/v1/campaigns/test-send", json=body).status_code == 201
            made += 1
        over = api.post("/api/v1/campaigns/test-send", json=body)
        assert over.status_code == 429 and over.json()["code"] == "test_send_too_many", over.text
        assert int(over.headers["Retry-After"]) > 0
    assert _stored(sqlite_engine) == (0, 0)


def test_create_refuses_a_campaign_that_sends_nothing(app: LiveApp, sqlite_engine: Engine) -> None:
    with app.client() as api:
        # nobody has a coupon: refused, saying who lacks what; nothing stored
        refused = api.post("/api/v1/campaigns", json=COUPON)
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["code"] == "nothing_renders", problem
        assert problem["detail"].startswith(
            "nothing would be sent: coupon is missing for 3 of 3 contacts: "
            "Ada Lovelace, Alan Turing, Grace Hopper"
        ), problem["detail"]
        assert problem["missing"] == [
            {
                "variable": "coupon",
                "reason": None,
                "count": 3,
                "names": ["Ada Lovelace", "Alan Turing", "Grace Hopper"],
            }
        ]
        assert (problem["unrenderable_count"], problem["recipients"]) == (3, 3)
        assert problem["errors"][0]["path"] == "message"
        toml = 'name = "T"\nlist = "people"\n[message]\ntype = "text"\ntext = "{{ coupon }}"\n'
        upload = api.post("/api/v1/campaigns/toml", files={"file": ("t.toml", toml.encode())})
        assert upload.status_code == 422 and upload.json()["code"] == "nothing_renders"
        assert _stored(sqlite_engine) == (0, 0)
        # the final check says the same words
        check = api.post("/api/v1/campaigns/check", json=COUPON).json()
        assert check["messages"] == 0
        assert check["unrenderable_words"].startswith("coupon is missing for 3 of 3 contacts")

        # some cannot render: created, and reported (or refused with ?strict=true)
        strict = api.post("/api/v1/campaigns", params={"strict": "true"}, json=CITY)
        assert strict.status_code == 422 and strict.json()["code"] == "campaign_setup"
        assert "city is missing for 1 of 3 contacts: Grace Hopper" in strict.json()["detail"]
        assert _stored(sqlite_engine) == (0, 0)
        created = api.post("/api/v1/campaigns", json=CITY)
        assert created.status_code == 201, created.text
        assert created.json()["unrenderable_words"] == (
            "city is missing for 1 of 3 contacts: Grace Hopper"
        )
        # nothing renders, said explicitly: created
        allowed = api.post("/api/v1/campaigns", params={"allow_unrenderable": "true"}, json=COUPON)
        assert allowed.status_code == 201 and allowed.json()["unrenderable_count"] == 3
    assert _stored(sqlite_engine) == (2, 0)
