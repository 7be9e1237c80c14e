"""A shop with a team: the owner creates the first admin on the command line, the admin
signs in over HTTP and adds an operator and a viewer with their own keys; the viewer may
look but not pause a campaign, the operator pauses it, and the audit log says who did
what, from where (API, CLI and CSV export). Signing out ends the session for a copied
cookie too, and a key past its expiry is refused.
"""

from __future__ import annotations

import csv
import getpass
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    SAMPLES,
    Process,
    Workspace,
    assert_problem,
    table_value,
    wait_for,
    workspace,
)

COOKIE = "gatecast_session"
DASHBOARD = {"X-Gatecast-Dashboard": "1"}
ADMIN_PASSWORD = "boss password 2026"
#: cheap password hashes for the test's processes (documented in the README)
FAST_HASH = {"GATECAST_ARGON2_MEMORY_KIB": "64", "GATECAST_ARGON2_TIME_COST": "1"}
CAMPAIGN: dict[str, Any] = {
    "name": "Team sale",
    "list": "customers",
    "message": {"type": "text", "text": "Hello {{ name }}!"},
    "schedule": {"start": "2099-04-01T09:00:00", "timezone": "Europe/Berlin"},
}


@pytest.fixture
def team_ws(tmp_path: Path, sandbox_process: Process) -> Iterator[Workspace]:
    with workspace(tmp_path / "work", sandbox_process.url, **FAST_HASH) as w:
        yield w


def _ok(res: httpx.Response, *codes: int) -> Any:
    assert res.status_code in (codes or (200,)), (res.status_code, res.text)
    return res.json() if res.content else None


def _bearer(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30.0)


@pytest.mark.slow  # about 25 s: a dozen CLI runs and a key left to expire
def test_a_team_with_roles_and_an_audit_log(team_ws: Workspace) -> None:
    ws = team_ws
    me = f"cli:{getpass.getuser()}"
    created = ws.run("users", "create-admin", "boss", "--password-stdin", stdin=ADMIN_PASSWORD)
    assert "user boss: admin" in created.output
    assert ADMIN_PASSWORD not in created.output
    out = ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    assert table_value(out.output, "imported (new)") == "44"
    server = ws.serve()

    with httpx.Client(base_url=server.url, timeout=30.0, follow_redirects=False) as admin:
        # the admin signs in with name and password (a wrong one first)
        wrong = admin.post("/login", data={"user": "boss", "password": "not it at all"})
        assert wrong.status_code == 401 and "not right" in wrong.text
        signed = admin.post("/login", data={"user": "boss", "password": ADMIN_PASSWORD})
        assert signed.status_code == 303, signed.text
        assert "boss (admin)" in admin.get("/campaigns").text

        # ... and adds an operator and a viewer, each with a key (shown once)
        for name, role in (("olga", "operator"), ("vic", "viewer")):
            user = _ok(
                admin.post(
                    "/api/v1/users",
                    json={"name": name, "role": role, "password": f"{name} password 1"},
                    headers=DASHBOARD,
                ),
                201,
            )
            assert user["role"] == role and "password" not in user
        olga_key = _ok(admin.post("/api/v1/users/olga/keys", json={}, headers=DASHBOARD), 201)
        vic_key = _ok(
            admin.post("/api/v1/users/vic/keys", json={"label": "laptop"}, headers=DASHBOARD), 201
        )
        assert olga_key["role"] == "operator" and olga_key["key"].startswith("gck_")
        listed = _ok(admin.get("/api/v1/users/vic/keys"))
        assert listed["total"] == 1 and "key" not in listed["items"][0]
        too_high = admin.post("/api/v1/users/vic/keys", json={"role": "admin"}, headers=DASHBOARD)
        assert_problem(too_high, 422, "invalid_request")

        with (
            _bearer(server.url, olga_key["key"]) as olga,
            _bearer(server.url, vic_key["key"]) as vic,
        ):
            campaign = _ok(olga.post("/api/v1/campaigns", json=CAMPAIGN), 201)
            cid = campaign["id"]
            # the viewer reads, but may not pause (nor manage users)
            assert _ok(vic.get(f"/api/v1/campaigns/{cid}"))["state"] == "scheduled"
            refused = assert_problem(
                vic.post(f"/api/v1/campaigns/{cid}/pause"), 403, "role_required"
            )
            assert refused["required_role"] == "operator" and refused["role"] == "viewer"
            assert_problem(vic.get("/api/v1/users"), 403, "role_required")
            assert_problem(olga.get("/api/v1/audit"), 403, "role_required")
            # the operator pauses it
            assert _ok(olga.post(f"/api/v1/campaigns/{cid}/pause"))["state"] == "paused"

        # the audit log: who did what, from where, how it ended
        log = _ok(admin.get("/api/v1/audit", params={"action": "pause", "limit": 10}))
        assert set(log) == {"items", "total", "limit", "offset"}
        pauses = [
            (e["actor"], e["role"], e["outcome"], e["status"], e["target_type"], e["target_id"])
            for e in log["items"]
        ]
        assert pauses == [
            ("olga", "operator", "ok", 200, "campaign", str(cid)),
            ("vic", "viewer", "refused", 403, "campaign", str(cid)),
        ]
        assert {e["source"] for e in log["items"]} == {"127.0.0.1"}
        assert log["items"][0]["action"] == "POST /api/v1/campaigns/{campaign_id}/pause"
        made = _ok(admin.get("/api/v1/audit", params={"actor": "olga", "action": "POST"}))
        assert ("campaign", str(cid)) in {(e["target_type"], e["target_id"]) for e in made["items"]}
        sign_ins = _ok(admin.get("/api/v1/audit", params={"action": "sign-in"}))["items"]
        assert [(e["actor"], e["outcome"]) for e in sign_ins] == [
            ("boss", "ok"),
            ("boss", "refused"),
        ]
        cli = _ok(admin.get("/api/v1/audit", params={"actor": me}))["items"]
        assert {e["action"] for e in cli} == {"users create-admin", "contacts import"}
        paged = _ok(admin.get("/api/v1/audit", params={"limit": 2, "offset": 1}))
        assert len(paged["items"]) == 2 and paged["total"] > 3
        assert_problem(
            admin.get("/api/v1/audit", params={"outcome": "maybe"}), 422, "invalid_request"
        )

        export = admin.get("/api/v1/audit/export", params={"action": "pause"})
        assert export.status_code == 200 and export.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(export.text)))
        assert [(r["actor"], r["outcome"]) for r in rows] == [("vic", "refused"), ("olga", "ok")]
        for secret in (ADMIN_PASSWORD, olga_key["key"], vic_key["key"]):
            assert secret not in export.text

        # an expiring key works until its time, then is refused
        soon = datetime.now(UTC) + timedelta(seconds=4)
        short = _ok(
            admin.post(
                "/api/v1/users/olga/keys",
                json={"expires_at": soon.isoformat()},
                headers=DASHBOARD,
            ),
            201,
        )
        with _bearer(server.url, short["key"]) as brief:
            assert brief.get("/api/v1/campaigns").status_code == 200
            wait_for(
                lambda: brief.get("/api/v1/campaigns").status_code == 401,
                timeout=30,
                what="the expired key to be refused",
            )
        states = {k["id"]: k["state"] for k in _ok(admin.get("/api/v1/users/olga/keys"))["items"]}
        assert states[short["id"]] == "expired"

        # signing out revokes the session: a copy of the cookie no longer works
        copied = admin.cookies[COOKIE]
        with httpx.Client(base_url=server.url, cookies={COOKIE: copied}, timeout=30.0) as thief:
            assert thief.get("/api/v1/users").status_code == 200
            assert admin.post("/logout").status_code == 303
            assert thief.get("/api/v1/users").status_code == 401
        assert admin.get("/api/v1/users").status_code == 401

    # the CLI reads the same log and revokes keys; the owner key still works as admin
    listed_cli = ws.run("audit", "list", "--actor", "olga", "--json").json()
    assert "POST /api/v1/campaigns/{campaign_id}/pause" in {
        e["action"] for e in listed_cli["items"]
    }
    ws.run("users", "key", "revoke", str(olga_key["id"]))
    with _bearer(server.url, olga_key["key"]) as olga:
        assert olga.get("/api/v1/campaigns").status_code == 401
    with server.api() as owner:
        assert _ok(owner.get("/api/v1/users"))["total"] == 3
        outs = _ok(owner.get("/api/v1/audit", params={"action": "sign-out"}))["items"]
        assert [(e["actor"], e["role"]) for e in outs] == [("boss", "admin")]
        revoked = _ok(owner.get("/api/v1/audit", params={"action": "users key revoke"}))["items"]
        assert [(e["actor"], e["target_type"], e["target_id"]) for e in revoked] == [
            (me, "api_key", str(olga_key["id"]))
        ]


def test_the_audit_log_says_what_changed_who_was_refused_and_what_left(
    team_ws: Workspace,
) -> None:
    """Issue 27: through a running server, a role change shows its before and after, a
    wrong key shows as a failed authentication, a replayed POST as a replay and a contacts
    export as an export; the CLI's listing shows the change and the key that acted."""
    ws = team_ws
    server = ws.serve()
    with server.api() as owner:
        rita = {"name": "rita", "role": "operator", "password": "rita password 1"}
        once = {"Idempotency-Key": "add-rita-1"}
        first = owner.post("/api/v1/users", json=rita, headers=once)
        again = owner.post("/api/v1/users", json=rita, headers=once)
        assert first.status_code == again.status_code == 201
        assert again.headers["Idempotent-Replayed"] == "true"
        key = _ok(owner.post("/api/v1/users/rita/keys", json={}), 201)
        with _bearer(server.url, key["key"]) as by_key:
            _ok(by_key.post("/api/v1/lists", json={"name": "rita's list"}), 201)
        _ok(owner.patch("/api/v1/users/rita", json={"role": "viewer"}))
        with _bearer(server.url, "gck_not-a-key-at-all-but-long-enough") as stranger:
            assert stranger.get("/api/v1/campaigns").status_code == 401
            assert stranger.get("/api/v1/campaigns").status_code == 401  # counted, not logged
        exported = owner.get("/api/v1/contacts/export", params={"list": "rita's list"})
        assert exported.status_code == 200

        entries = _ok(owner.get("/api/v1/audit", params={"limit": 100}))["items"]
        actions = [e["action"] for e in reversed(entries)]
        assert actions == [
            "POST /api/v1/users",
            "replay POST /api/v1/users",
            "POST /api/v1/users/{name}/keys",
            "POST /api/v1/lists",
            "PATCH /api/v1/users/{name}",
            "authentication",
            "export GET /api/v1/contacts/export",
        ]
        by_action = {e["action"]: e for e in entries}
        assert by_action["PATCH /api/v1/users/{name}"]["changes"] == {
            "role": ["operator", "viewer"]
        }
        assert by_action["POST /api/v1/lists"]["key_id"] == key["id"]
        assert by_action["POST /api/v1/lists"]["actor"] == "rita"
        refused = by_action["authentication"]
        assert (refused["actor"], refused["outcome"], refused["status"]) == (
            "(a key gck_not-a-ke)",
            "refused",
            401,
        )
        export = by_action["export GET /api/v1/contacts/export"]
        assert export["actor"] == "owner key" and "rita" in export["detail"]["query"]

    # the command line records what its changes replaced too
    ws.run("users", "set-role", "rita", "operator")
    by_cli = ws.run("audit", "list", "--action", "users set-role", "--json").json()["items"]
    assert [e["changes"] for e in by_cli] == [{"role": ["viewer", "operator"]}]
    listed = ws.run("audit", "list").output
    assert "role: operator -> viewer" in listed and "role: viewer -> operator" in listed
    assert f"rita (key {key['id']})" in listed
    assert "authentication" in listed and "export GET" in listed and "replay POST" in listed
