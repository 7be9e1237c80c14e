"""The deployment settings over HTTP (issue 31, decision 65), on both databases: every
role reads them, only admins change them; a wrong field is named and nothing is stored;
the defaults apply to imports naming no country and to campaigns whose file has no
[pace] or window, created after they are saved, never to what exists; secrets and the
gateway's credentials are never shown; the change is in the audit log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine

from tests.journeys.harness import import_over_api
from tests.web.conftest import LiveApp

FAST = {"argon2_memory_kib": 64, "argon2_time_cost": 1}
DEPLOYMENT = {
    **FAST,
    "gateway_url": "https://gate:hunter2@gw.example:8443/base?token=t0ken",
    "webhook_secret": "webhook-s3cret",
}
DEFAULTS = {
    "region": "gb",
    "pace": {"per_minute": 7, "delay_seconds": [30, 40], "daily_cap": 250},
    "schedule": {"window": ["09:00", "20:00"], "timezone": "Europe/London"},
}


def _key(api: httpx.Client, name: str, role: str) -> str:
    made = api.post("/api/v1/users", json={"name": name, "role": role, "password": "a password 1"})
    assert made.status_code == 201, made.text
    key: str = api.post(f"/api/v1/users/{name}/keys", json={}).json()["key"]
    return key


def _campaign(api: httpx.Client, name: str, **more: Any) -> dict[str, Any]:
    body = {"name": name, "list": "uk", "message": {"type": "text", "text": "Hi"}, **more}
    made = api.post("/api/v1/campaigns", json=body)
    assert made.status_code == 201, made.text
    spec: dict[str, Any] = api.get(f"/api/v1/campaigns/{made.json()['id']}").json()["spec"]
    return spec


def test_settings_roles_validation_and_where_they_apply(
    make_live: Callable[..., LiveApp], engine: Engine, tmp_path: Path
) -> None:
    live = make_live(engine, settings_overrides=DEPLOYMENT)
    with live.client() as api:
        viewer, operator = _key(api, "vic", "viewer"), _key(api, "opal", "operator")
        with live.client(key=viewer) as vic:
            shown = vic.get("/api/v1/settings")
        assert shown.status_code == 200, shown.text
        got = shown.json()
        assert (got["region"], got["pace"], got["schedule"]) == (None, None, None)
        assert got["deployment"] == {
            "public_url": None,
            "webhook_secret_set": True,
            "gateway_url": "https://gw.example:8443/base",
            "warmup_enabled": False,
            "built_in_region": "US",
            "built_in_pace": {
                "per_minute": 20.0,
                "delay_seconds": [5.0, 15.0],
                "daily_cap": 500,
                "typing": False,
            },
        }
        for secret in ("hunter2", "t0ken", "webhook-s3cret"):
            assert secret not in shown.text
        for key in (viewer, operator):
            with live.client(key=key) as caller:
                refused = caller.put("/api/v1/settings", json=DEFAULTS)
            assert refused.status_code == 403 and refused.json()["code"] == "role_required"

        # a campaign created before any default keeps the built-in pace and no window
        path = tmp_path / "uk.csv"
        path.write_text("name,phone\nAda,+447911223344\n", encoding="utf-8")
        assert import_over_api(api, path, "uk")["status"] == "completed"
        before = _campaign(api, "Before")

        wrong = api.put(
            "/api/v1/settings",
            json={
                "region": "XX",
                "pace": {"per_minute": -1, "delay_seconds": [30, 3], "daily_cap": 0},
                "schedule": {"window": ["25:00", "20:00"], "timezone": "UTC", "cron": "x"},
            },
        )
        assert wrong.status_code == 422, wrong.text
        paths = {e["path"]: e["msg"] for e in wrong.json()["errors"]}
        assert set(paths) == {
            "region",
            "pace.per_minute",
            "pace.delay_seconds",
            "pace.daily_cap",
            "schedule.window[0]",
            "schedule.cron",
        }, paths
        assert "XX" in paths["region"] and "not a default" in paths["schedule.cron"]
        zone = api.put("/api/v1/settings", json={"region": "GB", "schedule": {"timezone": "Mars"}})
        assert [e["path"] for e in zone.json()["errors"]] == ["schedule.timezone"], zone.text
        assert api.get("/api/v1/settings").json()["region"] is None  # nothing stored

        saved = api.put("/api/v1/settings", json=DEFAULTS)
        assert saved.status_code == 200, saved.text
        assert saved.json()["region"] == "GB"
        assert saved.json()["schedule"] == DEFAULTS["schedule"]

        # an import naming no country reads local numbers as GB ones
        path.write_text("name,phone\nBen,07911 223355\n", encoding="utf-8")
        done = import_over_api(api, path, "uk")
        assert (done["status"], done["region"], done["imported"]) == ("completed", "GB", 1), done
        # a campaign without [pace] or window gets the defaults; its own pace stays
        after = _campaign(api, "After")
        assert after["pace"] == {
            "per_minute": 7.0,
            "delay_seconds": [30.0, 40.0],
            "daily_cap": 250,
            "typing": False,
        }
        assert after["schedule"]["window"] == ["09:00", "20:00"]
        assert after["schedule"]["timezone"] == "Europe/London"
        own = _campaign(
            api,
            "Own",
            pace={"per_minute": 3},
            schedule={"start": "2030-04-01T09:00:00", "timezone": "Asia/Tokyo"},
        )
        assert own["pace"]["per_minute"] == 3.0 and own["schedule"]["timezone"] == "Asia/Tokyo"
        assert own["schedule"]["window"] == ["09:00", "20:00"]
        kept = api.get("/api/v1/campaigns").json()["items"]
        first = next(c for c in kept if c["name"] == "Before")
        assert api.get(f"/api/v1/campaigns/{first['id']}").json()["spec"] == before
        assert before["pace"]["per_minute"] == 20.0 and before["schedule"]["window"] is None

        # back to the built-in defaults: all three null
        cleared = api.put("/api/v1/settings", json={})
        assert (cleared.json()["region"], cleared.json()["pace"]) == (None, None)

        log = api.get("/api/v1/audit", params={"action": "/api/v1/settings"}).json()["items"]
        outcomes = sorted((e["outcome"], e["status"]) for e in log)
        assert outcomes == [
            ("failed", 422),
            ("failed", 422),
            ("ok", 200),
            ("ok", 200),
            ("refused", 403),
            ("refused", 403),
        ], outcomes
        changed = next(
            e
            for e in log
            if e["status"] == 200
            and e["changes"]
            and "region" in e["changes"]
            and e["changes"]["region"][1] == "GB"
        )
        assert changed["changes"]["region"] == [None, "GB"]
