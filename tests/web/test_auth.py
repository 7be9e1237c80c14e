"""API-key auth: bearer header, dashboard session, key file generation."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from gatecast.settings import Settings
from gatecast.web.auth import (
    KEY_FILE_NAME,
    MIN_KEY_LENGTH,
    WeakApiKey,
    api_key_notice,
    dashboard_addresses,
    ensure_api_key,
    key_file_path,
    key_matches,
)
from tests.web.conftest import API_KEY, LiveApp

PROTECTED = [
    "/api/v1/contacts",
    "/api/v1/deliveries",
    "/api/v1/instances",
    "/metrics",
    "/openapi.json",
    "/docs",
]


@pytest.mark.parametrize("path", PROTECTED)
def test_routes_refuse_missing_and_wrong_keys(live_sqlite: LiveApp, path: str) -> None:
    with live_sqlite.client(key=None) as anon:
        res = anon.get(path)
        assert res.status_code == 401
        assert res.headers["www-authenticate"] == "Bearer"
    with live_sqlite.client(key="wrong-" + API_KEY) as bad:
        res = bad.get(path)
        assert res.status_code == 401
        assert API_KEY not in res.text
    with live_sqlite.client() as good:
        assert good.get(path).status_code == 200


def test_every_api_route_is_guarded(live_sqlite: LiveApp) -> None:
    """Walk the OpenAPI document: each operation refuses an anonymous call with 401."""
    with live_sqlite.client() as good:
        doc = good.get("/openapi.json").json()
    open_paths = {"/healthz"}
    with live_sqlite.client(key=None) as anon:
        for path, ops in doc["paths"].items():
            if path in open_paths:
                continue
            concrete = path.replace("{", "").replace("}", "")  # any id: auth comes first
            for method in ops:
                res = anon.request(method.upper(), concrete)
                assert res.status_code == 401, (method, path, res.status_code)


def test_healthz_is_open(live_sqlite: LiveApp) -> None:
    with live_sqlite.client(key=None) as anon:
        assert anon.get("/healthz").json() == {"status": "ok"}


def test_dashboard_redirects_to_login_then_session_works(live_sqlite: LiveApp) -> None:
    with live_sqlite.client(key=None, follow_redirects=False) as browser:
        res = browser.get("/instances")
        assert res.status_code == 303
        assert res.headers["location"].startswith("/login?next=")
        res = browser.post("/login", data={"api_key": "nope", "next": "/instances"})
        assert res.status_code == 401
        assert "not right" in res.text
        assert browser.get("/api/v1/instances").status_code == 401
        res = browser.post("/login", data={"api_key": API_KEY, "next": "/instances"})
        assert res.status_code == 303
        assert res.headers["location"] == "/instances"
        assert API_KEY not in res.headers.get("set-cookie", "")
        assert browser.get("/instances").status_code == 200
        # the session cookie also authenticates API calls made by the pages
        assert browser.get("/api/v1/instances").status_code == 200
        browser.post("/logout")
        assert browser.get("/api/v1/instances").status_code == 401


def test_cookie_only_writes_need_the_dashboard_header(live_sqlite: LiveApp) -> None:
    """A form another site makes the browser post carries the cookie but no custom header."""
    with live_sqlite.client(key=None, follow_redirects=False) as browser:
        browser.post("/login", data={"api_key": API_KEY, "next": "/"})
        forged = browser.post("/api/v1/lists", json={"name": "forged"})
        assert forged.status_code == 403
        assert "X-Gatecast-Dashboard" in forged.json()["detail"]
        assert browser.get("/api/v1/lists").status_code == 200  # reads stay open
        assert "forged" not in browser.get("/api/v1/lists").text
        ok = browser.post(
            "/api/v1/lists", json={"name": "mine"}, headers={"X-Gatecast-Dashboard": "1"}
        )
        assert ok.status_code == 201
    with live_sqlite.client() as api:  # the API key needs no such header
        assert api.post("/api/v1/lists", json={"name": "by key"}).status_code == 201
    js = Path("gatecast/web/dashboard/static/gatecast.js").read_text()
    assert '"X-Gatecast-Dashboard": "1"' in js


def test_login_never_redirects_off_site(live_sqlite: LiveApp) -> None:
    with live_sqlite.client(key=None, follow_redirects=False) as browser:
        res = browser.post("/login", data={"api_key": API_KEY, "next": "//evil.example/x"})
        assert res.headers["location"] == "/"


def test_key_from_environment_wins(tmp_path: Path) -> None:
    s = Settings(
        api_key=SecretStr("from-env-0123456789abcdefghij"),
        database_url=f"sqlite:///{tmp_path}/g.db",
        _env_file=None,
    )
    key = ensure_api_key(s)
    assert key.value.get_secret_value() == "from-env-0123456789abcdefghij"
    assert not key.created
    assert not (tmp_path / KEY_FILE_NAME).exists()
    assert "from-env" not in repr(key)


def test_key_generated_once_beside_sqlite_and_private(tmp_path: Path) -> None:
    s = Settings(database_url=f"sqlite:///{tmp_path}/g.db", _env_file=None)
    assert key_file_path(s) == tmp_path / KEY_FILE_NAME
    first = ensure_api_key(s)
    assert first.created and first.path == tmp_path / KEY_FILE_NAME
    assert len(first.value.get_secret_value()) >= 32
    assert stat.S_IMODE((tmp_path / KEY_FILE_NAME).stat().st_mode) == 0o600
    again = ensure_api_key(s)
    assert not again.created
    assert again.value.get_secret_value() == first.value.get_secret_value()


def test_key_matches_is_strict() -> None:
    key = SecretStr("abc")
    assert key_matches(key, "abc")
    assert not key_matches(key, "abcd")
    assert not key_matches(key, "")
    assert not key_matches(key, None)
    assert not key_matches(SecretStr(""), "")


def test_openapi_declares_the_bearer_scheme(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        doc = api.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["apiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["apiKey"]["description"],
    }
    assert doc["paths"]["/api/v1/campaigns"]["get"]["security"] == [{"apiKey": []}]
    assert "security" not in doc["paths"]["/healthz"]["get"]


def test_the_generated_key_is_announced_once(tmp_path: Path) -> None:
    s = Settings(database_url=f"sqlite:///{tmp_path}/g.db", _env_file=None)
    first = ensure_api_key(s)
    notice = api_key_notice(first)
    assert notice is not None
    assert first.value.get_secret_value() in notice
    assert str(tmp_path / KEY_FILE_NAME) in notice
    assert api_key_notice(ensure_api_key(s)) is None
    assert dashboard_addresses("http://127.0.0.1:8080/") == (
        "dashboard http://127.0.0.1:8080/   API http://127.0.0.1:8080/api/v1"
        "   docs http://127.0.0.1:8080/docs"
    )


def test_healthz_reports_an_unreachable_database(make_live: Any) -> None:
    from storage.engine import make_engine

    dead = make_engine(
        "postgresql+psycopg://postgres:pw-should-not-leak@127.0.0.1:9/nowhere",
        connect_args={"connect_timeout": 2},
    )
    live = make_live(dead)
    with live.client(key=None) as anon:
        res = anon.get("/healthz")
    assert res.status_code == 503
    assert res.json()["status"] == "error"
    assert "pw-should-not-leak" not in res.text


def test_a_short_key_is_refused_wherever_it_comes_from(tmp_path: Path) -> None:
    short = "x" * (MIN_KEY_LENGTH - 1)
    s = Settings(
        api_key=SecretStr(short), database_url=f"sqlite:///{tmp_path}/g.db", _env_file=None
    )
    with pytest.raises(WeakApiKey) as refused:
        ensure_api_key(s)
    assert "GATECAST_API_KEY" in str(refused.value) and f"at least {MIN_KEY_LENGTH}" in str(
        refused.value
    )
    assert short not in str(refused.value)
    (tmp_path / KEY_FILE_NAME).write_text("short\n")
    with pytest.raises(WeakApiKey, match=KEY_FILE_NAME):
        ensure_api_key(Settings(database_url=f"sqlite:///{tmp_path}/g.db", _env_file=None))
    ok = Settings(
        api_key=SecretStr("x" * MIN_KEY_LENGTH),
        database_url=f"sqlite:///{tmp_path}/g.db",
        _env_file=None,
    )
    assert ensure_api_key(ok).source == "environment"
