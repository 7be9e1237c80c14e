"""Dashboard pages over HTTP: sign-in, each page renders real data, static files."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.web.api.test_campaigns import CAMPAIGN, _with_contacts
from tests.web.conftest import API_KEY, LiveApp, gateway_factory_for


@contextmanager
def _signed_in(live: LiveApp) -> Iterator[httpx.Client]:
    with live.client(key=None, follow_redirects=False) as browser:
        res = browser.post("/login", data={"api_key": API_KEY, "next": "/"})
        assert res.status_code == 303
        yield browser


def test_pages_render_real_data(live_sqlite: LiveApp, sandbox: Any) -> None:
    live_sqlite.ctx.gateway_factory = gateway_factory_for(sandbox)
    with live_sqlite.client() as api, _signed_in(live_sqlite) as browser:
        _with_contacts(api)
        iid = api.post("/api/v1/instances", json={"label": "front desk"}).json()["instance_id"]
        cid = api.post("/api/v1/campaigns", json=CAMPAIGN).json()["id"]

        assert browser.get("/").headers["location"] == "/overview"
        page = browser.get("/campaigns").text
        assert "Spring sale" in page and f'href="/campaigns/{cid}"' in page
        # searched by name (any case) and filtered by state, as the list's form sends them
        found = browser.get("/campaigns", params={"q": "SPRING", "state": "scheduled"}).text
        assert f'href="/campaigns/{cid}"' in found and "1 campaign(s)" in found
        none = browser.get("/campaigns", params={"q": "spring", "state": "running"}).text
        assert f'href="/campaigns/{cid}"' not in none and "No campaign matches." in none
        page = browser.get(f"/campaigns/{cid}").text
        assert "Spring sale" in page and f"const CID = {cid};" in page
        assert f"/api/v1/campaigns/{cid}/report.xlsx" in page
        res = browser.get("/campaigns/999")
        assert res.status_code == 404 and "campaign 999" in res.text
        page = browser.get("/campaigns/new").text
        assert '<option value="customers">' in page and "front desk" in page
        page = browser.get("/contacts", params={"q": "olivia"}).text
        assert "+12025550143" in page and "Noah" not in page
        assert "customers" in page
        # the yes/no filters: nobody has opted out
        page = browser.get("/contacts", params={"q": "olivia", "opted_out": "no"}).text
        assert "+12025550143" in page
        page = browser.get("/contacts", params={"q": "olivia", "opted_out": "yes"}).text
        assert "+12025550143" not in page
        assert browser.get("/replies", params={"opt_out": "yes"}).status_code == 200
        # an unknown contact, or an unknown campaign to clone: the not-found page
        res = browser.get("/contacts/999")
        assert res.status_code == 404 and "contact 999" in res.text
        res = browser.get("/campaigns/new", params={"from": 999})
        assert res.status_code == 404 and "campaign 999" in res.text
        page = browser.get("/instances").text
        assert iid in page and "front desk" in page
        # the scheduled campaign's daily cap (1000) applies to the instance
        assert api.get(f"/api/v1/instances/{iid}").json()["daily_cap"] == 1000
        assert "of 1000 (daily cap)" in page
        seg = api.post("/api/v1/segments", json={"name": "all-customers", "lists": ["customers"]})
        assert seg.status_code == 201, seg.text
        segments = browser.get("/segments").text
        assert 'data-segment="all-customers"' in segments and "lists customers" in segments

        for asset in (
            "/static/gatecast.css",
            "/static/gatecast.js",
            "/static/vendor/swagger-ui-bundle.js",
        ):
            assert browser.get(asset).status_code == 200, asset
        docs = browser.get("/docs").text
        assert "/static/vendor/swagger-ui-bundle.js" in docs and "cdn" not in docs.lower()


def test_html_escapes_user_data(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api, _signed_in(live_sqlite) as browser:
        _with_contacts(api)
        evil = {**CAMPAIGN, "name": "<script>alert(1)</script>"}
        assert api.post("/api/v1/campaigns", json=evil).status_code == 201
        page = browser.get("/campaigns").text
        assert "<script>alert(1)</script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
