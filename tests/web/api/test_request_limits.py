"""Bounded, well-formed requests over HTTP (issue 27), on SQLite and PostgreSQL: limits on
tags, attributes and phones answered 422 naming the field and the limit, quickly and with
nothing stored; unknown body fields refused naming them; names holding bidirectional
controls refused; a key's expiry at most five years ahead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import Engine

from campaigns import contacts
from campaigns.campaign_file import MAX_BUTTONS
from campaigns.users import MAX_KEY_LIFETIME
from tests.web.conftest import LiveApp

FAST = {"argon2_memory_kib": 64, "argon2_time_cost": 1}
RLO = "\u202e"


def _refused(res: httpx.Response, *loc: str | int) -> dict[str, Any]:
    """A 422 naming ``loc`` among its fields; its body."""
    assert res.status_code == 422, res.text
    body: dict[str, Any] = res.json()
    assert [*loc] in [e["loc"] for e in body["errors"]], body
    return body


def test_tags_attributes_and_phones_have_limits(live: LiveApp) -> None:
    with live.client() as api:
        many = [f"t{i}" for i in range(20_000)]
        res = api.post("/api/v1/contacts", json={"phone": "+4915112345678", "tags": many})
        assert str(contacts.MAX_TAGS) in _refused(res, "body", "tags")["detail"]
        attrs = {f"k{i}": "v" for i in range(contacts.MAX_ATTRIBUTES + 1)}
        res = api.post("/api/v1/contacts", json={"phone": "+4915112345678", "attributes": attrs})
        _refused(res, "body", "attributes")
        long_key = {"k" * (contacts.MAX_ATTRIBUTE_KEY + 1): "v"}
        res = api.post("/api/v1/contacts", json={"phone": "+4915112345678", "attributes": long_key})
        assert str(contacts.MAX_ATTRIBUTE_KEY) in _refused(res, "body", "attributes")["detail"]
        assert api.get("/api/v1/contacts").json()["total"] == 0  # nothing stored

        # at the limit: one contact with every tag, written at once
        tags = [f"t{i}" for i in range(contacts.MAX_TAGS)]
        made = api.post("/api/v1/contacts", json={"phone": "+4915112345678", "tags": tags})
        assert made.status_code == 201, made.text
        assert sorted(made.json()["tags"]) == sorted(tags)
        edited = api.patch(
            f"/api/v1/contacts/{made.json()['id']}",
            json={"remove_tags": tags[:50], "add_tags": [f"n{i}" for i in range(50)]},
        )
        assert edited.status_code == 200, edited.text
        assert len(edited.json()["tags"]) == contacts.MAX_TAGS
        # an edit may not grow a contact past the attribute limit either
        half = {f"a{i}": "v" for i in range(contacts.MAX_ATTRIBUTES // 2 + 1)}
        contact = f"/api/v1/contacts/{made.json()['id']}"
        assert api.patch(contact, json={"attributes": half}).status_code == 200
        other = {f"b{i}": "v" for i in range(contacts.MAX_ATTRIBUTES // 2 + 1)}
        _refused(api.patch(contact, json={"attributes": other}), "body", "attributes")

        phones = [f"+49151{i:08d}" for i in range(contacts.MAX_PHONES + 1)]
        res = api.post("/api/v1/contacts/tag", json={"tag": "vip", "phones": phones})
        assert str(contacts.MAX_PHONES) in _refused(res, "body", "phones")["detail"]


def test_campaign_lists_have_limits(live: LiveApp) -> None:
    buttons = [
        {"kind": "quick_reply", "display_text": f"b{i}", "id": f"b{i}"}
        for i in range(MAX_BUTTONS + 1)
    ]
    campaign = {
        "name": "x",
        "groups": ["1203630@g.us"],
        "message": {"type": "interactive", "text": "hi", "buttons": buttons},
    }
    with live.client() as api:
        res = api.post("/api/v1/campaigns/preview", json=campaign)
        _refused(res, "body", "message", "buttons")


def test_unknown_body_fields_are_refused_naming_them(live: LiveApp) -> None:
    with live.client() as api:
        res = api.post("/api/v1/contacts", json={"phone": "+4915112345678", "nmae": "Ann"})
        body = _refused(res, "body", "nmae")
        assert "unknown field" in body["detail"], body
        _refused(api.post("/api/v1/instances", json={"lable": "shop"}), "body", "lable")
        _refused(api.post("/api/v1/lists", json={"name": "a", "descr": "b"}), "body", "descr")
        assert api.get("/api/v1/contacts").json()["total"] == 0
        assert api.get("/api/v1/instances").json()["total"] == 0


def test_names_holding_bidi_controls_and_nul_are_refused(
    make_live: Callable[..., LiveApp], engine: Engine
) -> None:
    live = make_live(engine, settings_overrides=FAST)
    name = f"invoice{RLO}gnp.exe"
    with live.client() as api:
        for url, body, loc in [
            ("/api/v1/lists", {"name": name}, ("body", "name")),
            ("/api/v1/contacts", {"phone": "+4915112345678", "name": name}, ("body", "name")),
            ("/api/v1/contacts", {"phone": "+4915112345678", "tags": [name]}, ("body", "tags")),
            (
                "/api/v1/contacts",
                {"phone": "+4915112345678", "list_name": name},
                ("body", "list_name"),
            ),
            ("/api/v1/segments", {"name": name, "lists": ["a"]}, ("body", "name")),
            ("/api/v1/instances", {"label": name}, ("body", "label")),
            ("/api/v1/lists", {"name": "a\x00b"}, ("body", "name")),
        ]:
            res = api.post(url, json=body)
            assert res.status_code == 422, (url, res.text)
            assert [*loc] in [e["loc"] for e in res.json()["errors"]], (url, res.text)
        campaign = {"name": name, "list": "a", "message": {"type": "text", "text": "hi"}}
        _refused(api.post("/api/v1/campaigns/preview", json=campaign), "body", "name")
        user = {"name": "ann", "role": "viewer", "password": "long enough 1"}
        assert api.post("/api/v1/users", json=user).status_code == 201
        _refused(api.post("/api/v1/users/ann/keys", json={"label": name}), "body", "label")
        assert api.get("/api/v1/lists").json()["total"] == 0
        assert api.get("/api/v1/contacts").json()["total"] == 0
        res = api.get("/api/v1/contacts", params={"q": "a\x00b"})
        _refused(res, "query", "q")


def test_a_key_expires_within_five_years(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    live = make_live(sqlite_engine, settings_overrides=FAST)
    with live.client() as api:
        user = {"name": "ann", "role": "viewer", "password": "long enough 1"}
        assert api.post("/api/v1/users", json=user).status_code == 201
        res = api.post("/api/v1/users/ann/keys", json={"expires_at": "9999-12-31T00:00:00Z"})
        body = _refused(res, "body", "expires_at")
        assert f"more than {MAX_KEY_LIFETIME.days} days ahead" in body["detail"], body
        soon = api.post("/api/v1/users/ann/keys", json={"expires_at": "2030-01-01T00:00:00Z"})
        assert soon.status_code == 201, soon.text
        assert [k["state"] for k in api.get("/api/v1/users/ann/keys").json()["items"]] == ["active"]


def test_sign_in_with_unstorable_text_is_refused_not_a_500(
    make_live: Callable[..., LiveApp], engine: Engine
) -> None:
    live = make_live(engine, settings_overrides=FAST)
    with live.client(key=None, follow_redirects=False) as browser:
        for form in (
            {"user": "a\x00b", "password": "long enough 1"},
            {"user": "ann", "password": "a\x00b"},
            {"api_key": "gck_a\x00b"},
            {"api_key": "caf\u00e9\x00"},
        ):
            res = browser.post("/login", data=form)
            assert res.status_code < 500, (form, res.status_code, res.text[:300])
        latin = {b"Authorization": b"Bearer caf\xe9"}
        assert browser.get("/api/v1/campaigns", headers=latin).status_code == 401
