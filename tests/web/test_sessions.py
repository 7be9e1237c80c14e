"""Dashboard sessions over HTTP: server-side records, sign-out revokes a copied cookie,
expiry, a changed key, the cookie's flags."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
from pydantic import SecretStr
from sqlalchemy import Engine

from gatecast.web import sessions
from storage.queries.sessions import count_sessions
from tests.web.conftest import API_KEY, LiveApp

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _sign_in(live: LiveApp, **headers: str) -> tuple[httpx.Response, str]:
    with live.client(key=None, follow_redirects=False) as browser:
        res = browser.post("/login", data={"api_key": API_KEY, "next": "/"}, headers=headers)
        assert res.status_code == 303, res.text
        cookie = res.cookies.get(sessions.COOKIE) or _cookie_value(res)
        return res, cookie


def _cookie_value(res: httpx.Response) -> str:
    header = res.headers["set-cookie"]
    name, _, rest = header.partition("=")
    assert name == sessions.COOKIE
    return rest.split(";", 1)[0]


def _copy(live: LiveApp, cookie: str) -> httpx.Client:
    return live.client(key=None, follow_redirects=False, cookies={sessions.COOKIE: cookie})


def test_sign_out_refuses_a_copied_cookie(live_sqlite: LiveApp) -> None:
    with live_sqlite.client(key=None, follow_redirects=False) as browser:
        browser.post("/login", data={"api_key": API_KEY, "next": "/"})
        cookie = browser.cookies[sessions.COOKIE]
        assert API_KEY not in cookie and len(cookie) >= 40
        with _copy(live_sqlite, cookie) as thief:
            assert thief.get("/api/v1/lists").status_code == 200
            assert thief.get("/campaigns").status_code == 200
            out = browser.post("/logout")
            assert out.status_code == 303
            assert 'gatecast_session=""' in out.headers["set-cookie"]
            assert thief.get("/api/v1/lists").status_code == 401
            res = thief.get("/campaigns")
            assert res.status_code == 303 and res.headers["location"].startswith("/login")
        assert browser.get("/api/v1/lists").status_code == 401


def test_signing_in_again_replaces_the_session(live_sqlite: LiveApp) -> None:
    with live_sqlite.client(key=None, follow_redirects=False) as browser:
        browser.post("/login", data={"api_key": API_KEY, "next": "/"})
        first = browser.cookies[sessions.COOKIE]
        browser.post("/login", data={"api_key": API_KEY, "next": "/"})
        assert browser.cookies[sessions.COOKIE] != first
        assert browser.get("/api/v1/lists").status_code == 200
    with _copy(live_sqlite, first) as old:
        assert old.get("/api/v1/lists").status_code == 401
    assert count_sessions(live_sqlite.ctx.engine) == 1


def test_the_database_keeps_a_digest_not_the_cookie(live_sqlite: LiveApp) -> None:
    from sqlalchemy import select

    from storage import tables

    _, cookie = _sign_in(live_sqlite)
    with live_sqlite.ctx.engine.connect() as conn:
        rows = conn.execute(select(tables.dashboard_sessions)).mappings().all()
    assert len(rows) == 1
    assert cookie not in str(dict(rows[0])) and API_KEY not in str(dict(rows[0]))


def test_a_session_ends_after_twelve_hours(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    now = [NOW]
    live = make_live(sqlite_engine, clock=lambda: now[0])
    _, cookie = _sign_in(live)
    with _copy(live, cookie) as browser:
        now[0] = NOW + timedelta(hours=12)  # not used since sign-in
        assert browser.get("/api/v1/lists").status_code == 401
    assert count_sessions(sqlite_engine) == 1
    _sign_in(live)  # a sign-in prunes the expired record
    assert count_sessions(sqlite_engine) == 1


def test_a_session_in_use_is_extended(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    """Used when less than 6 of its 12 hours remain, a session gets 12 hours again (and
    the browser the cookie again); used earlier, nothing is written."""
    now = [NOW]
    live = make_live(sqlite_engine, clock=lambda: now[0])
    _, cookie = _sign_in(live)
    with _copy(live, cookie) as browser:
        now[0] = NOW + timedelta(hours=5)
        res = browser.get("/api/v1/lists")
        assert res.status_code == 200 and "set-cookie" not in res.headers
        now[0] = NOW + timedelta(hours=11)
        res = browser.get("/campaigns")
        assert res.status_code == 200
        assert f"{sessions.COOKIE}={cookie}" in res.headers["set-cookie"]
        assert "max-age=43200" in res.headers["set-cookie"].lower()
        now[0] = NOW + timedelta(hours=22, minutes=59)
        assert browser.get("/api/v1/lists").status_code == 200
        now[0] = NOW + timedelta(hours=22, minutes=59) + timedelta(hours=12)
        assert browser.get("/api/v1/lists").status_code == 401


def test_a_session_of_another_key_is_refused(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    """Changing the API key signs every dashboard out (same database, new key)."""
    _, cookie = _sign_in(make_live(sqlite_engine))
    rotated = make_live(sqlite_engine, api_key=SecretStr("rotated-" + API_KEY))
    with _copy(rotated, cookie) as browser:
        assert browser.get("/api/v1/lists").status_code == 401


def test_unknown_and_oversized_cookies_are_refused(live_sqlite: LiveApp) -> None:
    for value in ("nope", "x" * 5000):
        with _copy(live_sqlite, value) as browser:
            assert browser.get("/api/v1/lists").status_code == 401


def test_the_cookie_is_httponly_lax_and_secure_only_over_https(live_sqlite: LiveApp) -> None:
    plain, _ = _sign_in(live_sqlite)
    flags = plain.headers["set-cookie"].lower()
    assert "httponly" in flags and "samesite=lax" in flags and "max-age=43200" in flags
    assert "; secure" not in flags
    # a local client claiming HTTPS is not believed: no proxy is trusted by default
    claimed, _ = _sign_in(live_sqlite, **{"X-Forwarded-Proto": "https"})
    assert "; secure" not in claimed.headers["set-cookie"].lower()
