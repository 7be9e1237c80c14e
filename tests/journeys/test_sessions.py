"""Dashboard sessions, as a shop owner signs in and out and as an intruder tries.

Through ``gatecast serve`` over real HTTP (httpx posting the sign-in form):

- signing out ends the session on the server: a copy of the cookie taken before is
  refused afterwards;
- the cookie is ``Secure`` when a trusted proxy says the request came over HTTPS, and
  only then;
- five wrong keys in a minute from one address answer 429 with ``Retry-After``, in words
  on the sign-in page;
- ``gatecast serve`` refuses to start with a short API key and says why.
"""

from __future__ import annotations

import httpx

from tests.journeys.harness import API_KEY, Server, Workspace

COOKIE = "gatecast_session"


def _browser(server: Server) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30.0, follow_redirects=False)


def _sign_in(browser: httpx.Client, key: str = API_KEY, **headers: str) -> httpx.Response:
    return browser.post("/login", data={"api_key": key, "next": "/campaigns"}, headers=headers)


def test_signing_out_refuses_a_copied_cookie(ws: Workspace) -> None:
    server = ws.serve()
    with _browser(server) as browser:
        res = _sign_in(browser)
        assert res.status_code == 303 and res.headers["location"] == "/campaigns", res.text
        assert "; secure" not in res.headers["set-cookie"].lower()  # plain HTTP here
        copied = browser.cookies[COOKIE]
        assert API_KEY not in copied
        with httpx.Client(
            base_url=server.url, cookies={COOKIE: copied}, follow_redirects=False
        ) as intruder:
            assert intruder.get("/campaigns").status_code == 200
            assert intruder.get("/api/v1/campaigns").status_code == 200

            assert browser.post("/logout").status_code == 303
            assert browser.get("/campaigns").headers["location"].startswith("/login")

            page = intruder.get("/campaigns")
            assert page.status_code == 303 and page.headers["location"].startswith("/login")
            assert intruder.get("/api/v1/campaigns").status_code == 401
        # signing in again works, with a new cookie
        assert _sign_in(browser).status_code == 303
        assert browser.cookies[COOKIE] != copied
        assert browser.get("/campaigns").status_code == 200


def test_the_cookie_is_secure_behind_a_trusted_https_proxy(ws: Workspace) -> None:
    """A proxy listed in GATECAST_TRUSTED_PROXIES is believed; by default nobody is (not
    even this machine), so the header is ignored."""
    server = ws.serve(GATECAST_TRUSTED_PROXIES="127.0.0.1")
    with _browser(server) as proxied:
        res = _sign_in(proxied, **{"X-Forwarded-Proto": "https"})
        assert res.status_code == 303
        assert "; secure" in res.headers["set-cookie"].lower()
    server.stop()
    untrusting = ws.serve()
    with _browser(untrusting) as proxied:
        res = _sign_in(proxied, **{"X-Forwarded-Proto": "https"})
        assert res.status_code == 303
        assert "; secure" not in res.headers["set-cookie"].lower()


def test_repeated_wrong_keys_are_throttled(ws: Workspace) -> None:
    server = ws.serve()
    with _browser(server) as guesser:
        for n in range(5):
            res = _sign_in(guesser, key=f"guess-{n}")
            assert res.status_code == 401 and "That key is not right." in res.text
        res = _sign_in(guesser)  # even the right key waits
        assert res.status_code == 429
        wait = int(res.headers["retry-after"])
        assert 1 <= wait <= 60
        assert f"Too many wrong keys from your address. Try again in {wait} seconds." in res.text
        assert COOKIE not in res.headers.get("set-cookie", "")
    with server.api() as api:  # API clients with the key are not affected
        assert api.get("/api/v1/campaigns").status_code == 200


def test_serve_refuses_a_short_api_key(ws: Workspace) -> None:
    short = "tooshort-1234"
    done = ws.run("serve", "--port", "0", ok=False, timeout=60, GATECAST_API_KEY=short)
    assert done.code == 2, done.output
    assert "the API key in GATECAST_API_KEY is 13 characters long" in done.output
    assert "at least 24" in done.output
    assert short not in done.output
    assert "gatecast serving on" not in done.output
