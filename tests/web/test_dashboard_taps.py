"""The campaign page shows the taps per button (issue 32, item 1)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from campaigns import gateway_events, lifecycle
from campaigns.delivery_rows import materialise
from gatecast.settings import DEFAULT_OPT_OUT_KEYWORDS
from gateway.events import IncomingMessage
from storage import tables
from tests.campaigns.campaign_fixtures import NOW
from tests.web.api.test_campaigns import CAMPAIGN, _with_contacts
from tests.web.conftest import LiveApp
from tests.web.test_dashboard import _signed_in

BUTTONS_CAMPAIGN: dict[str, Any] = {
    **CAMPAIGN,
    "name": "Invite",
    "message": {
        "type": "interactive",
        "text": "Coming, {{ name }}?",
        "buttons": [
            {"kind": "quick_reply", "display_text": "Yes", "id": "yes"},
            {"kind": "quick_reply", "display_text": "No", "id": "no"},
        ],
    },
}


def tapped_campaign(live: LiveApp, api: Any) -> tuple[int, str]:
    """A campaign with two quick-reply buttons whose first two rows were sent, the first
    one's recipient tapping "Yes" (quoting the message) as the webhook records it; its id
    and that recipient's number."""
    engine = live.ctx.engine
    d = tables.deliveries
    _with_contacts(api)
    created = api.post("/api/v1/campaigns", json=BUTTONS_CAMPAIGN)
    assert created.status_code == 201, created.text
    cid = int(created.json()["id"])
    with engine.begin() as conn:  # it runs, its first two rows leave (as dispatched)
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A"])
        rows = conn.execute(
            select(d.c.id, d.c.target).where(d.c.campaign_id == cid).order_by(d.c.id).limit(2)
        ).all()
        for did, _target in rows:
            conn.execute(
                update(d)
                .where(d.c.id == did)
                .values(state="sent", message_id=f"m{did}", sent_at=NOW, attempts=1)
            )
    did, target = rows[0]
    digits = str(target).lstrip("+")
    tap = IncomingMessage(
        None,
        "in1",
        f"{digits}@s.whatsapp.net",
        "Yes",
        digits,
        at=NOW,
        button_id="yes",
        quoted_id=f"m{did}",
    )
    gateway_events.record_events(engine, [tap], opt_out_keywords=DEFAULT_OPT_OUT_KEYWORDS, now=NOW)
    return cid, str(target)


def test_the_campaign_page_shows_taps_per_button(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api, _signed_in(live_sqlite) as browser:
        cid, _target = tapped_campaign(live_sqlite, api)
        page = browser.get(f"/campaigns/{cid}").text
        assert 'data-tap="button:no"' in page, page
        yes = page.split('data-tap="button:yes"', 1)[1].split("</tr>", 1)[0]
        assert '<td class="num">1</td><td class="num">50.0%</td>' in yes, yes
        no = page.split('data-tap="button:no"', 1)[1].split("</tr>", 1)[0]
        assert '<td class="num">0</td><td class="num">0.0%</td>' in no, no
        listing = api.get(f"/api/v1/campaigns/{cid}/deliveries", params={"replied": "true"})
        [row] = listing.json()["items"]
        assert (row["tapped_button_id"], row["tapped_title"]) == ("yes", "Yes")
