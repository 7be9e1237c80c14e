"""The dashboard and the API show A/B variants and the create's variety warning."""

from __future__ import annotations

from typing import Any

from campaigns import variants
from tests.campaigns.campaign_fixtures import NOW
from tests.web.api.test_campaigns import CAMPAIGN, _with_contacts
from tests.web.conftest import LiveApp
from tests.web.test_dashboard import _signed_in

AB_CAMPAIGN: dict[str, Any] = {
    **CAMPAIGN,
    "name": "Two texts",
    "message": {
        "type": "text",
        "variants": [
            {"name": "short", "weight": 1, "text": "Hi {{ name }}"},
            {"name": "long", "weight": 2, "text": "Hello {{ name }}, see you in {{ city }}"},
        ],
    },
    "ab": {"test_share": 0.3, "pick_by": "reply_rate", "after": "2h"},
}


def test_the_campaign_page_compares_variants(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api, _signed_in(live_sqlite) as browser:
        _with_contacts(api)
        created = api.post("/api/v1/campaigns", json=AB_CAMPAIGN)
        assert created.status_code == 201, created.text
        body = created.json()
        assert {p["variant"] for p in body["preview"]} <= {"short", "long"}, body["preview"]
        cid = body["id"]
        detail = api.get(f"/api/v1/campaigns/{cid}").json()
        compared = detail["variants"]
        assert [v["name"] for v in compared["variants"]] == ["short", "long"], compared
        assert compared["compared_by"] == "reply_rate" and compared["ab"]["pick"] is None
        assert compared["note"] == "nothing sent yet: no comparison"
        page = browser.get(f"/campaigns/{cid}").text
        assert 'id="variants-table"' in page and 'data-variant="long"' in page, page
        assert "winner by reply rate after 2h" in page and "Not picked yet." in page
        # the pick as the dispatcher makes it (nothing of the test sent: the first variant)
        pick = variants.pick_and_release(live_sqlite.ctx.engine, cid, now=NOW)
        assert pick is not None and pick["winner"] == "short", pick
        page = browser.get(f"/campaigns/{cid}").text
        assert 'id="ab-pick">Picked short</b>' in page, page
        assert "Based on short: - of 0 sent; long: - of 0 sent." in page, page


def test_a_bad_ab_section_is_refused_naming_each_field(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        _with_contacts(api)
        bad = {**AB_CAMPAIGN, "ab": {"test_share": 1.5, "pick_by": "clicks", "after": "later"}}
        answer = api.post("/api/v1/campaigns", json=bad)
        assert answer.status_code == 422, answer.text
        text = answer.text
        for field in ("ab.test_share", "ab.pick_by", "ab.after"):
            assert field in text, text
        one = {**AB_CAMPAIGN, "message": {"type": "text", "variants": [{"text": "alone"}]}}
        answer = api.post("/api/v1/campaigns", json=one)
        assert answer.status_code == 422 and "message.variants" in answer.text, answer.text
        assert api.get("/api/v1/campaigns").json()["total"] == 0
