"""Sign-in throttling: five wrong keys a minute per address, then 429 with Retry-After."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from sqlalchemy import Engine

from campaigns import audit
from gatecast.web.audit import FailureLog
from gatecast.web.sessions import COOKIE
from gatecast.web.sign_in_throttle import MAX_FAILURES, SignInThrottle
from tests.web.conftest import API_KEY, LiveApp


def test_five_failures_lock_an_address_for_the_rest_of_the_minute() -> None:
    now = [100.0]
    throttle = SignInThrottle(clock=lambda: now[0])
    for _ in range(MAX_FAILURES - 1):
        throttle.failed("10.0.0.1")
        assert throttle.retry_after("10.0.0.1") is None
    throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 60
    assert throttle.retry_after("10.0.0.2") is None  # per address
    now[0] += 30.5
    assert throttle.retry_after("10.0.0.1") == 30
    now[0] += 29.5  # the first failure leaves the window
    assert throttle.retry_after("10.0.0.1") is None


def test_a_success_clears_the_address() -> None:
    throttle = SignInThrottle(clock=lambda: 0.0)
    for _ in range(MAX_FAILURES - 1):
        throttle.failed("a")
    throttle.succeeded("a")
    throttle.failed("a")
    assert throttle.retry_after("a") is None


def test_memory_is_bounded_by_the_number_of_addresses() -> None:
    throttle = SignInThrottle(max_addresses=3, clock=lambda: 0.0)
    for n in range(10):
        throttle.failed(f"10.0.0.{n}")
    assert len(throttle._failures) == 3
    assert set(throttle._failures) == {"10.0.0.7", "10.0.0.8", "10.0.0.9"}


def test_the_login_page_answers_429_in_plain_words(live_sqlite: LiveApp) -> None:
    with live_sqlite.client(key=None, follow_redirects=False) as browser:
        for _ in range(MAX_FAILURES):
            res = browser.post("/login", data={"api_key": "wrong", "next": "/"})
            assert res.status_code == 401
        res = browser.post("/login", data={"api_key": API_KEY, "next": "/"})
        assert res.status_code == 429
        assert 1 <= int(res.headers["retry-after"]) <= 60
        assert "Too many wrong keys from your address" in res.text
        assert f"Try again in {res.headers['retry-after']} seconds" in res.text
        assert COOKIE not in res.headers.get("set-cookie", "")
    with live_sqlite.client() as api:  # the API key itself still works for API clients
        assert api.get("/api/v1/lists").status_code == 200


def _fail_from(client: httpx.Client, forwarded: str) -> None:
    for _ in range(MAX_FAILURES):
        res = client.post(
            "/login",
            data={"api_key": "wrong", "next": "/"},
            headers={"X-Forwarded-For": forwarded},
        )
        assert res.status_code == 401


def _sign_in_as(client: httpx.Client, forwarded: str) -> int:
    headers = {"X-Forwarded-For": forwarded}
    return client.post("/login", data={"api_key": API_KEY}, headers=headers).status_code


def test_a_local_client_claiming_another_address_is_not_believed(live_sqlite: LiveApp) -> None:
    """No proxy is trusted by default (not even this machine): a client that sends
    X-Forwarded-For neither escapes the throttle nor changes the audit log's source."""
    with live_sqlite.client(key=None, follow_redirects=False) as guesser:
        _fail_from(guesser, "203.0.113.7")
        assert _sign_in_as(guesser, "198.51.100.2") == 429  # a new claimed address: no escape
    entries = audit.entries(live_sqlite.ctx.engine).items
    assert {e.source for e in entries} == {"127.0.0.1"}
    # six refusals (five wrong keys, one throttled): one entry a minute per address
    assert [(e.action, e.outcome) for e in entries] == [("sign-in", "refused")]


def test_refused_credentials_are_logged_once_a_minute_per_address_counting_the_rest() -> None:
    now = [0.0]
    log = FailureLog(window=60, max_addresses=2, clock=lambda: now[0])
    assert log.admit("a") == 0
    assert log.admit("a") is None and log.admit("a") is None
    now[0] = 30.0
    assert log.admit("b") == 0  # per address
    assert log.admit("b") is None
    now[0] = 61.0
    assert log.admit("a") == 2  # the next entry counts the ones left out
    assert log.admit("c") == 0  # memory is bounded: the oldest address (b) is forgotten
    assert log.admit("b") == 0  # remembered, it would still be within its minute


def test_behind_a_trusted_proxy_each_client_address_counts_alone(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    """A proxy listed in GATECAST_TRUSTED_PROXIES reports each client in X-Forwarded-For:
    one client's failures do not lock out another behind the same proxy, and the audit log
    names the client."""
    live = make_live(sqlite_engine, settings_overrides={"trusted_proxies": "127.0.0.1"})
    with live.client(key=None, follow_redirects=False) as proxy:
        _fail_from(proxy, "203.0.113.7")
        assert _sign_in_as(proxy, "203.0.113.7") == 429
        assert _sign_in_as(proxy, "198.51.100.2") == 303
    sources = {e.source for e in audit.entries(live.ctx.engine).items}
    assert sources == {"203.0.113.7", "198.51.100.2"}
