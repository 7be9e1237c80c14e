"""Recipient time and the contact cooldown as a user meets them (issue 19, item 3).

Through the public faces only: contacts imported by ``gatecast contacts import``, campaigns
created by ``gatecast campaign create``, sent by ``gatecast serve`` or ``campaign run``
to the sandbox gateway over HTTP, read back with ``gatecast report``. The process clock is
injected (``ws.clock_start``); each ``serve`` below starts at the moment a recipient's
window opens, so a day of windows is crossed in seconds.
"""

from __future__ import annotations

import csv
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.journeys.harness import Server, Workspace, campaign_over_api, table_value, wait_for

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
TOKYO = ZoneInfo("Asia/Tokyo")

#: one recipient per zone: Berlin and New York by their numbers' regions (+49, a 212 area
#: code), Tokyo by the ``timezone`` column (its number is a London one)
BERLIN_PHONE = "+4915123456789"
NEW_YORK_PHONE = "+12125550143"
TOKYO_PHONE = "+447911123456"
ZONES = {BERLIN_PHONE: BERLIN, NEW_YORK_PHONE: NEW_YORK, TOKYO_PHONE: TOKYO}

SENT_STATES = ("sent", "delivered", "read")

FAST_PACE = """
[pace]
per_minute = 0
delay_seconds = [0, 0]
"""


def _write(ws: Workspace, name: str, text: str) -> Path:
    path = ws.path / name
    path.write_text(text, encoding="utf-8")
    return path


def _campaign(name: str, list_name: str, schedule: str = "", safety: str = "") -> str:
    return (
        f'name = "{name}"\nlist = "{list_name}"\n\n'
        '[message]\ntype = "text"\ntext = "Hi {{ name }}"\n\n'
        f"[schedule]\n{schedule}\n{FAST_PACE}\n" + (f"[safety]\n{safety}\n" if safety else "")
    )


def _report(ws: Workspace, campaign_id: int) -> dict[str, dict[str, str]]:
    """The campaign's report, read as a user would: its CSV rows by target."""
    path = ws.path / f"report-{campaign_id}.csv"
    ws.run("report", str(campaign_id), "--output", str(path))
    with path.open(encoding="utf-8-sig") as fh:
        return {row["target"]: row for row in csv.DictReader(fh)}


def _sent(counts: dict[str, int]) -> int:
    return sum(counts.get(s, 0) for s in SENT_STATES)


def _serve_until_sent(
    ws: Workspace, at: datetime, campaign_id: int, sent: int, *, state: str = "running"
) -> Server:
    """``gatecast serve`` with its clock at ``at`` until ``sent`` rows were sent and the
    campaign is in ``state`` (it completes on the sweeper's pass after the last send, a
    moment later); stopped."""
    ws.clock_start = at
    server = ws.serve()

    def reached() -> bool:
        shown = campaign_over_api(server, campaign_id)
        return _sent(shown["counts"]) >= sent and shown["state"] == state

    wait_for(reached, timeout=60, what=f"{sent} recipient(s) sent, the campaign {state}")
    server.stop()
    log = server.process.output()
    assert "Traceback" not in log and "ERROR" not in log, log
    return server


@pytest.mark.slow
def test_recipient_time_window_sends_each_contact_inside_its_own_window(
    ws: Workspace,
) -> None:
    """A 09:00-17:00 window in recipient time, three zones: each contact is sent only once
    its own local window is open (Berlin first, New York at 14:00 UTC, Tokyo at
    midnight UTC), whatever the campaign's own zone (UTC)."""
    berlin_opens = datetime(2026, 11, 20, 9, 0, 5, tzinfo=BERLIN)
    ws.clock_start = berlin_opens
    ws.link_sender()
    contacts = _write(
        ws,
        "world.csv",
        "Name,Phone,timezone\n"
        f"Berlin,{BERLIN_PHONE},\n"
        f"New York,{NEW_YORK_PHONE},\n"
        f"Tokyo,{TOKYO_PHONE},Asia/Tokyo\n",
    )
    out = ws.run("contacts", "import", str(contacts), "--list", "world")
    assert table_value(out.output, "imported (new)") == "3", out.output
    path = _write(
        ws,
        "local.toml",
        _campaign(
            "Local hours",
            "world",
            'timezone = "UTC"\nwindow = ["09:00", "17:00"]\nrecipient_timezone = true',
        ),
    )
    campaign_id = int(ws.run("campaign", "create", str(path), "--json").json()["id"])
    shown = ws.run("campaign", "show", str(campaign_id), "--json").json()
    assert shown["spec"]["schedule"]["recipient_timezone"] is True, shown
    text = ws.run("campaign", "show", str(campaign_id)).output
    assert "09:00-17:00 in each recipient's zone" in text, text

    # 08:00 UTC: only Berlin's window is open (New York 03:00, Tokyo 17:00: closed)
    _serve_until_sent(ws, berlin_opens, campaign_id, 1)
    rows = _report(ws, campaign_id)
    assert rows[BERLIN_PHONE]["state"] in SENT_STATES, rows
    assert rows[NEW_YORK_PHONE]["state"] == "queued", rows
    assert rows[TOKYO_PHONE]["state"] == "queued", rows

    # 14:00 UTC: New York's opens (Tokyo 23:00: still closed)
    _serve_until_sent(ws, datetime(2026, 11, 20, 9, 0, 5, tzinfo=NEW_YORK), campaign_id, 2)
    rows = _report(ws, campaign_id)
    assert rows[NEW_YORK_PHONE]["state"] in SENT_STATES, rows
    assert rows[TOKYO_PHONE]["state"] == "queued", rows

    # 00:00 UTC the next day: Tokyo's opens, and the campaign completes
    _serve_until_sent(
        ws, datetime(2026, 11, 21, 9, 0, 5, tzinfo=TOKYO), campaign_id, 3, state="completed"
    )
    rows = _report(ws, campaign_id)
    for phone, zone in ZONES.items():
        sent_at = datetime.fromisoformat(rows[phone]["sent_at"]).astimezone(zone)
        assert time(9, 0) <= sent_at.time() < time(17, 0), (phone, sent_at)
    state = ws.run("campaign", "show", str(campaign_id), "--json").json()["state"]
    assert state == "completed", state


def test_cooldown_skips_a_contact_another_campaign_messaged_an_hour_before(
    ws: Workspace,
) -> None:
    """``GATECAST_CONTACT_COOLDOWN_HOURS=24``: a contact messaged an hour ago by another
    campaign is counted at create, skipped at the start, and its report row says why."""
    first_at = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    ws.clock_start = first_at
    ws.link_sender()
    both = _write(ws, "both.csv", f"Name,Phone\nAda,{BERLIN_PHONE}\nBen,{NEW_YORK_PHONE}\n")
    ws.run("contacts", "import", str(both), "--list", "both")
    ada = _write(ws, "ada.csv", f"Name,Phone\nAda,{BERLIN_PHONE}\n")
    ws.run("contacts", "import", str(ada), "--list", "ada")
    earlier = _write(ws, "earlier.toml", _campaign("Earlier", "ada"))
    earlier_id = int(ws.run("campaign", "create", str(earlier), "--json").json()["id"])
    ws.run("campaign", "run", str(earlier_id), "--settle", "0", timeout=300)
    assert _report(ws, earlier_id)[BERLIN_PHONE]["state"] in SENT_STATES

    ws.clock_start = first_at + timedelta(hours=1)
    ws.settings["GATECAST_CONTACT_COOLDOWN_HOURS"] = "24"
    later = _write(ws, "later.toml", _campaign("Later", "both"))
    created = ws.run("campaign", "create", str(later))
    assert "1 excluded by cooldown" in created.output, created.output
    later_id = int(ws.run("campaign", "list", "--json").json()[0]["id"])
    shown = ws.run("campaign", "show", str(later_id), "--json").json()
    assert shown["spec"]["safety"]["contact_cooldown_hours"] == 24, shown["spec"]
    ws.run("campaign", "run", str(later_id), "--settle", "0", timeout=300)

    rows = _report(ws, later_id)
    assert rows[NEW_YORK_PHONE]["state"] in SENT_STATES, rows
    skipped = rows[BERLIN_PHONE]
    assert skipped["state"] == "skipped", skipped
    assert skipped["sent_at"] == "", skipped
    assert "cooldown" in skipped["error"] and "24 h" in skipped["error"], skipped


def test_a_negative_cooldown_is_refused_at_create_naming_the_field(ws: Workspace) -> None:
    ws.run(
        "contacts",
        "import",
        str(_write(ws, "c.csv", f"Name,Phone\nAda,{BERLIN_PHONE}\n")),
        "--list",
        "c",
    )
    path = _write(ws, "bad.toml", _campaign("Bad", "c", safety="contact_cooldown_hours = -1"))
    refused = ws.run("campaign", "create", str(path), ok=False)
    assert refused.code != 0, refused.output
    assert "contact_cooldown_hours" in refused.output, refused.output
    assert "negative" in refused.output, refused.output
    assert ws.run("campaign", "list", "--json").json() == []
    with ws.serve().api() as api:
        answer = api.post(
            "/api/v1/campaigns",
            json={
                "name": "Bad",
                "list": "c",
                "message": {"type": "text", "text": "Hi"},
                "safety": {"contact_cooldown_hours": -2},
            },
        )
    assert answer.status_code == 422, answer.text
    assert "safety.contact_cooldown_hours" in answer.text, answer.text
    assert ws.run("campaign", "list", "--json").json() == []


def test_an_unknown_zone_in_a_timezone_column_is_refused_at_import(ws: Workspace) -> None:
    path = _write(ws, "zones.csv", f"Name,Phone,timezone\nAda,{BERLIN_PHONE},Mars/Olympus\n")
    out = ws.run("contacts", "import", str(path), "--list", "z", ok=False)
    assert table_value(out.output, "invalid (rejected)") == "1", out.output
    assert table_value(out.output, "imported (new)") == "0", out.output
    assert "unknown timezone 'Mars/Olympus'" in out.output, out.output
