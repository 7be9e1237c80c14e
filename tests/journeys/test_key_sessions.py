"""A session carries what opened it (issue 27), through ``gatecast serve`` over real HTTP,
a browser-like client posting the sign-in form:

- an admin gives a CI job a viewer key (of an admin user); signing in to the dashboard with
  it opens a viewer's session: pages and reads work, adding a user, the admin pages, a list
  and linking a sender are refused;
- a key about to expire signs in; once it has expired, its session is refused (401 on the
  API, the sign-in page for the dashboard), and so is the session of a key revoked;
- an operator lowered to viewer can no longer write through the session already open.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import Process, Server, assert_problem, wait_for, workspace

DASHBOARD = {"X-Gatecast-Dashboard": "1"}
FAST_HASH = {"GATECAST_ARGON2_MEMORY_KIB": "64", "GATECAST_ARGON2_TIME_COST": "1"}


@pytest.fixture
def server(tmp_path: Path, sandbox_process: Process) -> Iterator[Server]:
    with workspace(tmp_path / "work", sandbox_process.url, **FAST_HASH) as ws:
        yield ws.serve()


def _ok(res: httpx.Response, *codes: int) -> Any:
    assert res.status_code in (codes or (200,)), (res.status_code, res.text)
    return res.json() if res.content else None


def _user(admin: httpx.Client, name: str, role: str) -> None:
    _ok(
        admin.post(
            "/api/v1/users", json={"name": name, "role": role, "password": f"{name} password 1"}
        ),
        201,
    )


def _key(admin: httpx.Client, user: str, **fields: str) -> dict[str, Any]:
    made: dict[str, Any] = _ok(admin.post(f"/api/v1/users/{user}/keys", json=fields), 201)
    return made


def _browser(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30.0, follow_redirects=False)


def _sign_in(browser: httpx.Client, **form: str) -> None:
    res = browser.post("/login", data={**form, "next": "/campaigns"})
    assert res.status_code == 303 and res.headers["location"] == "/campaigns", res.text


def _to_sign_in(res: httpx.Response) -> bool:
    return res.status_code == 303 and res.headers["location"].startswith("/login")


def test_a_session_acts_as_its_key_and_ends_with_it(server: Server) -> None:
    with server.api() as admin:
        # the admin gives CI a read-only key of an admin's account
        _user(admin, "ada", "admin")
        ci_key = _key(admin, "ada", role="viewer", label="CI")
        assert ci_key["role"] == "viewer"
        iid = _ok(admin.post("/api/v1/instances", json={"label": "shop"}), 201)["instance_id"]

    with _browser(server) as ci:
        _sign_in(ci, api_key=ci_key["key"])
        page = ci.get("/campaigns")
        assert page.status_code == 200 and "ada (viewer)" in page.text
        assert _ok(ci.get("/api/v1/campaigns"))["total"] == 0
        assert ci.get("/instances").status_code == 200
        refused = assert_problem(
            ci.post(
                "/api/v1/users",
                json={"name": "mallory", "role": "admin", "password": "mallory password"},
                headers=DASHBOARD,
            ),
            403,
            "role_required",
        )
        assert (refused["role"], refused["required_role"]) == ("viewer", "admin")
        for admin_page in ("/users", "/audit", "/webhooks"):
            res = ci.get(admin_page, headers={"Accept": "text/html"})
            assert res.status_code == 403 and "admin role" in res.text, admin_page
        assert_problem(
            ci.post("/api/v1/lists", json={"name": "ci"}, headers=DASHBOARD), 403, "role_required"
        )
        # linking a sender changes it at the gateway: a POST, for operators
        link = ci.post(f"/api/v1/instances/{iid}/link", headers=DASHBOARD)
        assert assert_problem(link, 403, "role_required")["required_role"] == "operator"
        assert ci.get(f"/api/v1/instances/{iid}/qr").status_code in (404, 405)

    with server.api() as admin:
        assert admin.get("/api/v1/users/mallory").status_code == 404
        _user(admin, "olga", "operator")
        soon = datetime.now(UTC) + timedelta(seconds=3)
        brief = _key(admin, "olga", expires_at=soon.isoformat(), label="brief")
        revoked = _key(admin, "olga", label="lost laptop")
        _user(admin, "omar", "operator")

    with _browser(server) as expiring, _browser(server) as lost, _browser(server) as omar:
        _sign_in(expiring, api_key=brief["key"])
        _sign_in(lost, api_key=revoked["key"])
        _sign_in(omar, user="omar", password="omar password 1")
        for browser in (expiring, lost, omar):
            assert "(operator)" in browser.get("/campaigns").text
        made = omar.post("/api/v1/lists", json={"name": "omar's"}, headers=DASHBOARD)
        assert made.status_code == 201, made.text

        with server.api() as admin:
            # an operator lowered to viewer: the open session may no longer write
            _ok(admin.patch("/api/v1/users/omar", json={"role": "viewer"}))
            # a key revoked: the session it opened ends at once
            _ok(admin.delete(f"/api/v1/users/olga/keys/{revoked['id']}"), 204)
        assert_problem(
            omar.post("/api/v1/lists", json={"name": "omar 2"}, headers=DASHBOARD),
            403,
            "role_required",
        )
        assert "omar (viewer)" in omar.get("/campaigns").text
        assert lost.get("/api/v1/campaigns").status_code == 401
        assert _to_sign_in(lost.get("/campaigns"))

        # a key past its expiry: the session it opened ends with it
        wait_for(
            lambda: expiring.get("/api/v1/campaigns").status_code == 401,
            timeout=30,
            what="the expired key's session to be refused",
        )
        assert _to_sign_in(expiring.get("/campaigns"))
        with server.api() as admin:
            keys = _ok(admin.get("/api/v1/users/olga/keys"))["items"]
        assert {k["label"]: k["state"] for k in keys} == {
            "brief": "expired",
            "lost laptop": "revoked",
        }
