"""The users, keys and audit routes over HTTP (as the owner key, an admin): refusals name
the field, changes apply, keys are shown once and revoked, and each change is in the
audit log with its route, target and outcome."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine

from tests.web.conftest import LiveApp

FAST = {"argon2_memory_kib": 64, "argon2_time_cost": 1}


def test_users_keys_and_their_audit_entries(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    live = make_live(sqlite_engine, settings_overrides=FAST)
    with live.client() as api:
        short = api.post("/api/v1/users", json={"name": "ana", "role": "viewer", "password": "x"})
        assert short.status_code == 422
        assert short.json()["errors"][0]["loc"] == ["body", "password"]
        bad_role = api.post(
            "/api/v1/users", json={"name": "ana", "role": "chief", "password": "long enough 1"}
        )
        assert bad_role.status_code == 422
        made = api.post(
            "/api/v1/users", json={"name": "ana", "role": "operator", "password": "long enough 1"}
        )
        assert made.status_code == 201, made.text
        taken = api.post(
            "/api/v1/users", json={"name": "ana", "role": "viewer", "password": "long enough 1"}
        )
        assert taken.status_code == 422 and taken.json()["errors"][0]["loc"] == ["body", "name"]
        assert api.get("/api/v1/users/nobody").status_code == 404

        made_key = api.post("/api/v1/users/ana/keys", json={"role": "viewer", "label": "ci"})
        key = made_key.json()
        assert made_key.headers["location"] == f"/api/v1/users/ana/keys/{key['id']}"
        assert key["key"].startswith("gck_") and key["prefix"] == key["key"][:12]
        with live.client(key=key["key"]) as ana:
            assert ana.get("/api/v1/campaigns").status_code == 200
            assert ana.post("/api/v1/lists", json={"name": "x"}).status_code == 403
            changed = api.patch("/api/v1/users/ana", json={"role": "viewer", "disabled": True})
            assert changed.json()["role"] == "viewer" and changed.json()["disabled"] is True
            assert ana.get("/api/v1/campaigns").status_code == 401
            api.patch("/api/v1/users/ana", json={"disabled": False})
            assert ana.get("/api/v1/campaigns").status_code == 200
            assert api.delete(made_key.headers["location"]).status_code == 204
            assert ana.get("/api/v1/campaigns").status_code == 401
        assert api.delete(f"/api/v1/users/nobody/keys/{key['id']}").status_code == 404
        keys = api.get("/api/v1/users/ana/keys").json()
        assert [k["state"] for k in keys["items"]] == ["revoked"]
        assert key["key"] not in api.get("/api/v1/users/ana/keys").text

        log = api.get("/api/v1/audit", params={"action": "/api/v1/users"}).json()
        seen = [
            (e["actor"], e["action"], e["target_type"], e["target_id"], e["outcome"])
            for e in reversed(log["items"])
        ]
        assert seen[:4] == [
            ("owner key", "POST /api/v1/users", "user", None, "failed"),
            ("owner key", "POST /api/v1/users", "user", None, "failed"),
            ("owner key", "POST /api/v1/users", "user", str(made.json()["id"]), "ok"),
            ("owner key", "POST /api/v1/users", "user", None, "failed"),
        ]
        assert (
            "owner key",
            "DELETE /api/v1/users/{name}/keys/{key_id}",
            "key",
            str(key["id"]),
            "ok",
        ) in seen
        refused = api.get("/api/v1/audit", params={"outcome": "refused"}).json()["items"]
        # the disabled user's key refused twice: one entry a minute per address, never the
        # key (its shown prefix only); the viewer key's 403 names the key that acted
        assert [(e["actor"], e["role"], e["status"], e["key_id"]) for e in refused] == [
            (f"(a key {key['prefix']})", "", 401, None),
            ("ana", "viewer", 403, key["id"]),
        ]
        assert refused[0]["action"] == "authentication" and key["key"] not in str(refused)
        changes = [
            e["changes"]
            for e in reversed(log["items"])
            if e["action"].startswith(("PATCH", "DEL")) and e["outcome"] == "ok"
        ]
        assert changes == [
            {"role": ["operator", "viewer"], "disabled": [False, True]},
            {"disabled": [True, False]},
            {"state": ["active", "revoked"]},
        ]
        assert "long enough 1" not in api.get("/api/v1/audit/export").text
        exported = api.get("/api/v1/audit", params={"action": "export"}).json()["items"]
        assert [e["action"] for e in exported] == ["export GET /api/v1/audit/export"]
        # the dashboard's Audit page shows the key that acted and what a change replaced
        page = api.get("/audit", params={"actor": "ana"})
        assert page.status_code == 200, page.text
        assert f"(with API key {key['id']})" in page.text
        changes_page = api.get("/audit", params={"action": "PATCH"}).text
        assert "role: operator &rarr; viewer" in changes_page
        every = api.get("/api/v1/audit").json()["total"]
        since = api.get("/api/v1/audit", params={"since": "2000-01-01T00:00:00+00:00"})
        assert since.json()["total"] == every
        until = api.get("/api/v1/audit", params={"until": "2000-01-01T00:00:00+00:00"})
        assert until.json()["total"] == 0
        naive = api.get("/api/v1/audit", params={"since": "2000-01-01T00:00:00"})
        assert naive.status_code == 422 and naive.json()["errors"][0]["loc"] == ["query", "since"]
