"""Sign-in throttling: five wrong keys a minute per address, then 429 with Retry-After."""

from __future__ import annotations

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


def test_behind_a_trusted_proxy_each_client_address_counts_alone(live_sqlite: LiveApp) -> None:
    """The proxy (this machine, trusted by default) reports each client in X-Forwarded-For:
    one client's failures do not lock out another behind the same proxy."""
    with live_sqlite.client(key=None, follow_redirects=False) as proxy:
        for _ in range(MAX_FAILURES):
            res = proxy.post(
                "/login",
                data={"api_key": "wrong", "next": "/"},
                headers={"X-Forwarded-For": "203.0.113.7"},
            )
            assert res.status_code == 401
        guesser = proxy.post(
            "/login", data={"api_key": API_KEY}, headers={"X-Forwarded-For": "203.0.113.7"}
        )
        assert guesser.status_code == 429
        owner = proxy.post(
            "/login", data={"api_key": API_KEY}, headers={"X-Forwarded-For": "198.51.100.2"}
        )
        assert owner.status_code == 303
