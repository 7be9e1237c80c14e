"""Authorisation per role (issue 15): the rule in plain words, dashboard pages per role,
sessions and keys ending, sign-out, audited refusals, per-user idempotency.

Every route of the built app by every role and kind of credential is
``tests/web/test_access_matrix.py`` (issue 27); the rule is ``gatecast.web.roles``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import Engine

from campaigns import users
from gatecast.web import roles, sessions
from gatecast.web.auth import template_of
from storage.types import utcnow
from tests.web.conftest import API_KEY, LiveApp

#: routes with their own authentication (or none): never decided by the role rule
OPEN = {
    ("POST", "/webhooks/gateway/{secret}"),
    ("GET", "/healthz"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
}
#: cheap, quick settings for password hashes in tests
FAST_HASH = {"argon2_memory_kib": 64, "argon2_time_cost": 1}
PASSWORD = "correct horse battery"


@dataclass
class Team:
    """The live app and one key per role (the owner key as ``owner``)."""

    live: LiveApp
    keys: dict[str, str]


@pytest.fixture
def team(make_live: Callable[..., LiveApp], sqlite_engine: Engine) -> Team:
    live = make_live(sqlite_engine, settings_overrides=FAST_HASH)
    hashing = users.Hashing(64, 1)
    keys = {"owner": API_KEY}
    for role in users.ROLES:
        users.create_user(sqlite_engine, f"{role}-1", role, PASSWORD, hashing, utcnow())
        keys[role] = users.create_key(sqlite_engine, f"{role}-1", utcnow()).secret
    return Team(live, keys)


def test_the_rule_in_plain_words() -> None:
    need = roles.required_role
    assert need("GET", "/api/v1/campaigns") == "viewer"
    assert need("POST", "/api/v1/campaigns/{campaign_id}/pause") == "operator"
    assert need("DELETE", "/api/v1/instances/{instance_id}") == "operator"
    assert need("GET", "/api/v1/users") == "admin"
    assert need("POST", "/api/v1/users/{name}/keys") == "admin"
    assert need("GET", "/api/v1/audit/export") == "admin"
    assert need("POST", "/api/v1/webhook-endpoints") == "admin"
    assert need("POST", "/api/v1/contacts/{contact_id}/erase") == "admin"
    assert need("POST", "/api/v1/contacts/{contact_id}/opt-out") == "operator"
    # a route nobody has written yet is covered by the default
    assert need("GET", "/api/v1/brand-new") == "viewer"
    assert need("PUT", "/api/v1/brand-new/{thing_id}") == "operator"
    assert need("GET", "/users") == "admin" and need("GET", "/campaigns") == "viewer"


def test_templates_are_found_again_from_paths() -> None:
    assert (
        template_of("/api/v1/campaigns/3/pause", {"campaign_id": "3"})
        == "/api/v1/campaigns/{campaign_id}/pause"
    )
    assert (
        template_of("/api/v1/contacts/5/lists/5", {"contact_id": "5", "list_id": "5"})
        == "/api/v1/contacts/{contact_id}/lists/{list_id}"
    )
    assert template_of("/api/v1/segments/segments", {"name": "segments"}) == (
        "/api/v1/segments/{name}"
    )


@contextmanager
def _session(live: LiveApp, name: str) -> Iterator[httpx.Client]:
    with live.client(key=None, follow_redirects=False) as client:
        res = client.post("/login", data={"user": name, "password": PASSWORD, "next": "/"})
        assert res.status_code == 303, res.text
        yield client


def test_dashboard_pages_per_role(team: Team) -> None:
    live = team.live
    dashboard = {"X-Gatecast-Dashboard": "1"}
    with _session(live, "viewer-1") as viewer:
        page = viewer.get("/campaigns")
        assert page.status_code == 200 and "role-viewer" in page.text
        assert 'href="/users"' not in page.text  # no admin pages offered
        refused = viewer.post("/api/v1/lists", json={"name": "x"}, headers=dashboard)
        assert refused.status_code == 403 and refused.json()["code"] == roles.ROLE_CODE
        for admin_page in ("/users", "/audit", "/webhooks"):
            res = viewer.get(admin_page, headers={"Accept": "text/html"})
            assert res.status_code == 403, admin_page
            assert "admin role" in res.text
    with _session(live, "operator-1") as operator:
        assert operator.post("/api/v1/lists", json={"name": "x"}, headers=dashboard).is_success
        assert operator.get("/users").status_code == 403
    with _session(live, "admin-1") as admin:
        for admin_page in ("/users", "/audit", "/webhooks"):
            assert admin.get(admin_page).status_code == 200, admin_page
        assert "operator-1" in admin.get("/users").text


def test_sessions_and_keys_end(team: Team) -> None:
    live = team.live
    engine = live.ctx.engine
    hashing = users.Hashing(64, 1)
    # a new password ends the user's sessions
    with _session(live, "operator-1") as browser:
        assert browser.get("/api/v1/lists").status_code == 200
        users.set_password(engine, "operator-1", "another password 1", hashing, utcnow())
        assert browser.get("/api/v1/lists").status_code == 401
    # disabling ends sessions and refuses keys
    with _session(live, "viewer-1") as browser:
        users.set_disabled(engine, "viewer-1")
        assert browser.get("/api/v1/lists").status_code == 401
    with live.client(key=team.keys["viewer"]) as client:
        assert client.get("/api/v1/lists").status_code == 401
    # a revoked key is refused, and the session it opened ends
    key = users.create_key(engine, "admin-1", utcnow())
    with live.client(key=None, follow_redirects=False) as by_key:
        assert by_key.post("/login", data={"api_key": key.secret}).status_code == 303
        assert by_key.get("/api/v1/users").status_code == 200
        users.revoke_key(engine, key.key.id, utcnow())
        assert by_key.get("/api/v1/users").status_code == 401
    with live.client(key=key.secret) as client:
        assert client.get("/api/v1/lists").status_code == 401
    # a lower role lowers the user's keys at once
    users.set_role(engine, "admin-1", "viewer")
    with live.client(key=team.keys["admin"]) as client:
        assert client.get("/api/v1/users").status_code == 403


def test_sign_out_revokes_a_user_session(team: Team) -> None:
    live = team.live
    with _session(live, "operator-1") as browser:
        cookie = browser.cookies[sessions.COOKIE]
        with live.client(key=None, cookies={sessions.COOKIE: cookie}) as thief:
            assert thief.get("/api/v1/lists").status_code == 200
            assert browser.post("/logout").status_code == 303
            assert thief.get("/api/v1/lists").status_code == 401


def test_a_wrong_password_is_refused_and_audited(team: Team) -> None:
    from campaigns.audit import AuditFilter, entries

    with team.live.client(key=None, follow_redirects=False) as browser:
        res = browser.post("/login", data={"user": "operator-1", "password": "wrong wrong"})
        assert res.status_code == 401
        assert "not right" in res.text
    found = entries(team.live.ctx.engine, AuditFilter(action="sign-in")).items
    assert [(e.actor, e.outcome) for e in found] == [("operator-1", "refused")]


def test_idempotency_keys_are_per_user(team: Team) -> None:
    """Two users sending the same Idempotency-Key each get their own creation."""
    made = []
    for who, phone in (("operator", "+4915112345671"), ("admin", "+4915112345672")):
        with team.live.client(key=team.keys[who]) as client:
            res = client.post(
                "/api/v1/contacts", json={"phone": phone}, headers={"Idempotency-Key": "same-1"}
            )
            assert res.status_code == 201, res.text
            made.append(res.json()["phone"])
    assert made == ["+4915112345671", "+4915112345672"]
