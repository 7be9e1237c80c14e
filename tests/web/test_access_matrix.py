"""The test of record for access (issue 27): every route x every kind of credential.

The routes come from the built app: every operation of its OpenAPI document, and every
other route of the app (the dashboard's pages, /docs, /openapi.json), so a route added
later is tested without an edit here. For each kind of credential:

* none, an expired key, a revoked key, a forged cookie and a stale cookie (the session of
  a key since revoked or expired, of a user since disabled) are refused: 401 on the API,
  /docs, /openapi.json and /metrics, a redirect to /login on a dashboard page;
* the owner key, a user's key of each role, a key scoped below its user (an operator's
  viewer key), the dashboard session each of these opens, a password session of each role
  and the session of a user since lowered act with their role (``campaigns.users.
  acting_role``): a route that role may call (``gatecast.web.roles``) is not refused (no
  401/403, no redirect to /login), any other is a 403 ``role_required`` naming both roles.

A route that answers a caller without a credential with anything but those refusals has
no rule: the test fails naming it (add it to :data:`OPEN` only when it has its own
authentication, as the webhook intake does). The requests are harmless (ids that do not
exist, empty bodies), so each is answered before any work; the whole matrix takes seconds.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
import sqlalchemy as sa
from fastapi.routing import iter_route_contexts
from sqlalchemy import Engine

from campaigns import users
from gatecast.web import roles, sessions
from gatecast.web.auth import DASHBOARD_HEADER
from storage import tables
from storage.types import utcnow
from tests.web.conftest import API_KEY, LiveApp

#: routes with their own authentication (or none), never decided by the role rule
OPEN = {
    ("POST", "/webhooks/gateway/{secret}"),
    ("GET", "/healthz"),
    ("GET", "/media/{media_id}/{name}"),  # a signed link: the signature is the credential
    ("HEAD", "/media/{media_id}/{name}"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
}
FAST_HASH = {"argon2_memory_kib": 64, "argon2_time_cost": 1}
PASSWORD = "correct horse battery"
_PARAM = re.compile(r"\{([^}:]+)(?::[^}]+)?\}")


@dataclass(frozen=True)
class Credential:
    """One kind of credential: how a client carries it, and the role it acts with
    (None: it must be refused as no credential)."""

    name: str
    role: str | None
    key: str | None = None
    cookie: str | None = None


@dataclass(frozen=True)
class Route:
    """A route of the app: method, template, and whether it is a dashboard page."""

    method: str
    template: str
    page: bool

    def url(self) -> str:
        """A concrete URL: ids that do not exist, names nobody has."""

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.endswith("_id") and name != "instance_id":
                return "987654"
            return {"fmt": "csv", "instance_id": "no-such-instance"}.get(name, "nobody-here")

        return _PARAM.sub(value, self.template)


def _user(engine: Engine, name: str, role: str) -> None:
    users.create_user(engine, name, role, PASSWORD, users.Hashing(64, 1), utcnow())


def _key(engine: Engine, user: str, role: str | None = None) -> users.CreatedKey:
    return users.create_key(engine, user, utcnow(), role=role, label=f"{user} {role}")


def _session(live: LiveApp, **form: str) -> str:
    """Sign in through ``POST /login`` (a key, or a user name and password); the cookie."""
    with live.client(key=None, follow_redirects=False) as browser:
        res = browser.post("/login", data={**form, "next": "/"})
        assert res.status_code == 303, res.text
        return str(browser.cookies[sessions.COOKIE])


def _credentials(live: LiveApp) -> list[Credential]:
    """Every kind of credential, made through the domain and ``POST /login``; the stale
    ones are made good first and spoiled after."""
    engine = live.ctx.engine
    made = [
        Credential("none", None),
        Credential("owner key", roles.ADMIN, key=API_KEY),
        Credential("owner key's session", roles.ADMIN, cookie=_session(live, api_key=API_KEY)),
        Credential("forged cookie", None, cookie=secrets.token_urlsafe(32)),
    ]
    for role in users.ROLES:
        _user(engine, f"{role}-1", role)
        key = _key(engine, f"{role}-1").secret
        made += [
            Credential(f"{role} key", role, key=key),
            Credential(f"{role} key's session", role, cookie=_session(live, api_key=key)),
            Credential(
                f"{role} password session",
                role,
                cookie=_session(live, user=f"{role}-1", password=PASSWORD),
            ),
        ]
    # a key scoped below its user: an operator's viewer key, and the session it opens
    _user(engine, "operator-2", roles.OPERATOR)
    scoped = _key(engine, "operator-2", roles.VIEWER).secret
    made += [
        Credential("operator's viewer key", roles.VIEWER, key=scoped),
        Credential(
            "operator's viewer key's session", roles.VIEWER, cookie=_session(live, api_key=scoped)
        ),
    ]
    # admins' credentials, spoiled: a key expired, a key revoked, a user disabled, lowered
    for user in ("expired-1", "revoked-1", "disabled-1", "lowered-1"):
        _user(engine, user, roles.ADMIN)
    expired = _key(engine, "expired-1")
    expired_session = _session(live, api_key=expired.secret)
    revoked = _key(engine, "revoked-1")
    revoked_session = _session(live, api_key=revoked.secret)
    disabled_session = _session(live, user="disabled-1", password=PASSWORD)
    lowered = _key(engine, "lowered-1")
    lowered_sessions = (
        _session(live, api_key=lowered.secret),
        _session(live, user="lowered-1", password=PASSWORD),
    )
    with engine.begin() as conn:  # create_key refuses a past expiry: it passes here
        conn.execute(
            sa.update(tables.api_keys)
            .where(tables.api_keys.c.id == expired.key.id)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    users.revoke_key(engine, revoked.key.id, utcnow())
    users.set_disabled(engine, "disabled-1")
    users.set_role(engine, "lowered-1", roles.VIEWER)
    return [
        *made,
        Credential("expired key", None, key=expired.secret),
        Credential("expired key's session", None, cookie=expired_session),
        Credential("revoked key", None, key=revoked.secret),
        Credential("revoked key's session", None, cookie=revoked_session),
        Credential("disabled user's session", None, cookie=disabled_session),
        Credential("lowered admin's key", roles.VIEWER, key=lowered.secret),
        Credential("lowered admin's key's session", roles.VIEWER, cookie=lowered_sessions[0]),
        Credential("lowered admin's password session", roles.VIEWER, cookie=lowered_sessions[1]),
    ]


def _routes(live: LiveApp) -> list[Route]:
    """Every operation of the OpenAPI document, and every other route of the app."""
    with live.client() as client:
        doc = client.get("/openapi.json").json()
    documented = {
        (method.upper(), path)
        for path, item in doc["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    served = {
        (method, context.path)
        for context in iter_route_contexts(live.app.routes)
        if context.path and not context.path.startswith("/static")
        for method in context.methods or ()
        if method != "HEAD"
    }
    assert documented <= served, documented - served
    found = [Route(m, t, False) for m, t in sorted(documented - OPEN)]
    found += [Route(m, t, True) for m, t in sorted(served - documented - OPEN)]
    return found


@dataclass
class Matrix:
    live: LiveApp
    routes: list[Route]
    credentials: list[Credential]


@pytest.fixture
def matrix(make_live: Callable[..., LiveApp], sqlite_engine: Engine) -> Matrix:
    live = make_live(sqlite_engine, settings_overrides=FAST_HASH)
    return Matrix(live, _routes(live), _credentials(live))


@pytest.fixture
def client_for(matrix: Matrix) -> Callable[[Credential], Iterator[httpx.Client]]:
    def make(credential: Credential) -> Iterator[httpx.Client]:
        headers = {"Accept": "application/json"}
        if credential.cookie:  # the dashboard's scripts send its header
            headers[DASHBOARD_HEADER[0]] = DASHBOARD_HEADER[1]
        if credential.key:
            headers["Authorization"] = f"Bearer {credential.key}"
        cookies = {sessions.COOKIE: credential.cookie} if credential.cookie else None
        with httpx.Client(
            base_url=matrix.live.url, headers=headers, cookies=cookies, timeout=30
        ) as client:
            yield client

    return make


def _call(client: httpx.Client, route: Route) -> httpx.Response:
    body: dict[str, object] | None = None if route.method in ("GET", "DELETE") else {}
    return client.request(route.method, route.url(), json=body)


def _to_login(res: httpx.Response) -> bool:
    return res.status_code in (302, 303, 307) and res.headers["location"].startswith("/login")


def _refused_as_nobody(route: Route, res: httpx.Response) -> str | None:
    """Why ``res`` is not the refusal of a request without a credential (None: it is)."""
    if route.page and not _to_login(res) and res.status_code != 401:
        return "a page must redirect to /login (or answer 401)"
    if not route.page and res.status_code != 401:
        return "must answer 401"
    return None


def _judged(route: Route, credential: Credential, res: httpx.Response) -> str | None:
    """What is wrong with ``res`` under the documented rule (None: nothing)."""
    if credential.role is None:
        return _refused_as_nobody(route, res)
    needed = roles.required_role(route.method, route.template)
    if users.at_least(credential.role, needed):
        if res.status_code in (401, 403) or _to_login(res):
            return f"acts as {credential.role}, {needed} suffices: must not be refused"
        return None
    if res.status_code != 403:
        return f"acts as {credential.role} below {needed}: must answer 403"
    body = res.json()
    if (body.get("code"), body.get("role"), body.get("required_role")) != (
        roles.ROLE_CODE,
        credential.role,
        needed,
    ):
        return "must be a role_required problem naming both roles"
    return None


def test_every_route_by_every_credential(
    matrix: Matrix, client_for: Callable[[Credential], Iterator[httpx.Client]]
) -> None:
    routes = matrix.routes
    assert sum(not r.page for r in routes) > 70 and sum(r.page for r in routes) > 10, routes
    wrong: list[str] = []
    refusals: dict[str, int] = {}
    for credential in matrix.credentials:
        for client in client_for(credential):
            for route in routes:
                res = _call(client, route)
                problem = _judged(route, credential, res)
                if problem:
                    wrong.append(
                        f"{credential.name}: {route.method} {route.template} answered "
                        f"{res.status_code} {res.text[:120]!r}: {problem}"
                    )
                elif res.status_code == 403:
                    refusals[credential.name] = refusals.get(credential.name, 0) + 1
    assert not wrong, "\n".join(wrong[:40]) + f"\n({len(wrong)} in all)"
    # the matrix has teeth: each limited role is refused somewhere
    for name in ("viewer key", "operator key's session", "operator's viewer key's session"):
        assert refusals.get(name), name
    assert "owner key" not in refusals and "admin password session" not in refusals
    # an expired or revoked key opens no session
    with matrix.live.client(key=None, follow_redirects=False) as browser:
        for credential in matrix.credentials:
            if credential.role is None and credential.key:
                res = browser.post("/login", data={"api_key": credential.key})
                assert res.status_code == 401, credential.name
                assert sessions.COOKIE not in browser.cookies, credential.name


def test_a_route_without_a_rule_fails_the_matrix() -> None:
    """The check the matrix applies to a caller without a credential tells a guarded
    route from one with no rule (an answer that is neither 401 nor a sign-in redirect)."""
    page, api = Route("GET", "/brand-new", True), Route("GET", "/api/v1/brand-new", False)
    nobody = Credential("none", None)
    for answer in (httpx.Response(200, json={}), httpx.Response(404), httpx.Response(422)):
        assert _judged(page, nobody, answer) and _judged(api, nobody, answer)
    assert _judged(page, nobody, httpx.Response(303, headers={"location": "/login?next=/"})) is None
    assert _judged(api, nobody, httpx.Response(401)) is None
    viewer = Credential("viewer key", roles.VIEWER)
    post = Route("POST", "/api/v1/brand-new", False)
    assert _judged(post, viewer, httpx.Response(422))  # a write let through
    assert _judged(Route("GET", "/users", True), viewer, httpx.Response(200))
