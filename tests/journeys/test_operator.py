"""An operator's work around a campaign, over the API and the CLI: a test send to one's own
number followed to read (outside the campaign's counts), the replies inbox, recipients
searched by name with failures in plain words, archive and delete (refused while
running, reports kept). The gateway is a ``gatecast sandbox`` process where everyone
replies and one number is not on the app.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.journeys.harness import (
    QUICK_STATUSES,
    SAMPLES,
    Server,
    Workspace,
    assert_problem,
    import_over_api,
    link_sender_over_api,
    ok,
    wait_for,
)

NOT_ON_APP = "12125550115"  # Noah Brown in samples/contacts.csv
OWN_NUMBER = "+12025550143"  # Olivia Johnson's number: the operator tests on it
#: each journey runs past 20 s (a CLI command takes 1.5-3 s on a shared machine)
pytestmark = pytest.mark.slow
FUTURE = {"start": "2030-04-01T09:00:00", "timezone": "Europe/Berlin"}


SANDBOX_ARGS = (*QUICK_STATUSES, "--not-on-app", NOT_ON_APP, "--reply-rate", "1")


def _campaign(api: httpx.Client, name: str, **extra: Any) -> int:
    body = {
        "name": name,
        "list": "customers",
        "message": {"type": "text", "text": "Hi {{ name }} from {{ city }}"},
        **extra,
    }
    return int(ok(api.post("/api/v1/campaigns", json=body), 201)["id"])


def test_operator_over_the_api(ws: Workspace) -> None:
    server: Server = ws.serve()
    api = server.api()
    iid = link_sender_over_api(api)
    import_over_api(api, SAMPLES / "contacts.csv", "customers")
    scheduled = _campaign(api, "Berlin launch", schedule=FUTURE)

    # a test send to one's own number, followed to read; the campaign sees nothing
    once = {"Idempotency-Key": "test-send-1"}  # a double click sends one test
    path = f"/api/v1/campaigns/{scheduled}/test-sends"
    first = api.post(path, json={"to": OWN_NUMBER}, headers=once)
    test = ok(first, 201)
    again = api.post(path, json={"to": OWN_NUMBER}, headers=once)
    assert again.headers.get("Idempotent-Replayed") == "true", again.headers
    assert ok(again, 201)["id"] == test["id"]
    url = f"/api/v1/campaigns/{scheduled}/test-sends/{test['id']}"
    assert first.headers["location"] == again.headers["location"] == url
    assert (test["target"], test["sender"], test["state"]) == (OWN_NUMBER, iid, "sent"), test
    assert test["content"]["text"] == "Hi Olivia Johnson from Washington DC", test
    read = wait_for(lambda: (t := ok(api.get(url)))["state"] == "read" and t, what="read")
    assert read["sent_at"] <= read["delivered_at"] <= read["read_at"], read
    listed = ok(api.get(f"/api/v1/campaigns/{scheduled}/test-sends"))
    assert listed["total"] == 1 and listed["items"][0]["state"] == "read", listed
    detail = ok(api.get(f"/api/v1/campaigns/{scheduled}"))
    assert detail["total"] == 0 and detail["state"] == "scheduled", detail
    assert ok(api.get(f"/api/v1/campaigns/{scheduled}/deliveries"))["total"] == 0

    # for another contact, to a number not on the app: failed, said plainly
    other = ok(
        api.post(
            f"/api/v1/campaigns/{scheduled}/test-sends",
            json={"to": "+1 212 555 0115", "contact_id": 2},
        ),
        201,
    )
    failed_url = f"/api/v1/campaigns/{scheduled}/test-sends/{other['id']}"
    failed = wait_for(lambda: (t := ok(api.get(failed_url)))["state"] == "failed" and t)
    assert failed["reason"] == "not on WhatsApp", failed

    # refusals name the field; an opted-out number needs the override
    bad = api.post(f"/api/v1/campaigns/{scheduled}/test-sends", json={"to": "12"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "to"], bad.text
    ok(api.post("/api/v1/contacts/1/opt-out"))
    refused = api.post(f"/api/v1/campaigns/{scheduled}/test-sends", json={"to": OWN_NUMBER})
    assert_problem(refused, 409, "test_send_conflict")
    forced = api.post(
        f"/api/v1/campaigns/{scheduled}/test-sends",
        json={"to": OWN_NUMBER, "allow_opted_out": True},
    )
    assert ok(forced, 201)["opt_out_overridden"] is True
    ok(api.post("/api/v1/contacts/1/opt-in"))
    assert_problem(
        api.post(
            f"/api/v1/campaigns/{scheduled}/test-sends", json={"to": OWN_NUMBER, "sender": "NOPE"}
        ),
        409,
        "test_send_conflict",
    )

    # a campaign sent now: everyone replies; the inbox and the recipients show it
    sent = _campaign(api, "Now", pace={"per_minute": 600, "delay_seconds": [0, 0]})
    wait_for(
        lambda: ok(api.get(f"/api/v1/campaigns/{sent}/progress"))["done"],
        timeout=120,
        what="the campaign to finish",
    )
    replies = wait_for(
        lambda: (
            (p := ok(api.get(f"/api/v1/replies?campaign_id={sent}&limit=5")))["total"] >= 40 and p
        ),
        what="the replies",
    )
    assert set(replies) == {"items", "total", "limit", "offset"}, replies
    first = replies["items"][0]
    assert first["campaign_id"] == sent and first["campaign_name"] == "Now", first
    assert first["sender"] == iid and first["text"], first
    times = [r["received_at"] for r in replies["items"]]
    assert times == sorted(times, reverse=True), times
    assert ok(api.get("/api/v1/replies?opt_out=true"))["total"] == 0
    assert ok(api.get(f"/api/v1/replies?sender={iid}"))["total"] >= 40
    assert ok(api.get("/api/v1/replies?sender=OTHER"))["total"] == 0

    rows = ok(api.get(f"/api/v1/campaigns/{sent}/deliveries?q=olivia"))
    assert rows["total"] == 1 and rows["items"][0]["name"] == "Olivia Johnson", rows
    assert rows["items"][0]["reply_text"], rows
    noah = ok(api.get(f"/api/v1/campaigns/{sent}/deliveries?q=555-0115"))["items"][0]
    assert (noah["state"], noah["reason"]) == ("failed", "not on WhatsApp"), noah
    replied = ok(api.get(f"/api/v1/campaigns/{sent}/deliveries?replied=true"))
    assert replied["total"] >= 40 and all(r["reply_text"] for r in replied["items"]), replied

    # archive: out of the default list, back with the filter; reversible
    ok(api.post(f"/api/v1/campaigns/{scheduled}/archive"))

    def ids(query: str) -> list[int]:
        return [c["id"] for c in ok(api.get(f"/api/v1/campaigns{query}"))["items"]]

    assert scheduled not in ids("") and scheduled in ids("?archived=only"), ids("?archived=any")
    assert ok(api.get(f"/api/v1/campaigns/{scheduled}"))["archived_at"]
    ok(api.post(f"/api/v1/campaigns/{scheduled}/unarchive"))
    assert scheduled in ids("")
    assert_problem(api.get("/api/v1/campaigns?archived=maybe"), 422, "invalid_request")

    # delete: refused while running; a scheduled one is cancelled; reports stay
    slow = _campaign(api, "Slow", pace={"per_minute": 1})
    wait_for(lambda: ok(api.get(f"/api/v1/campaigns/{slow}"))["state"] == "running")
    assert_problem(api.delete(f"/api/v1/campaigns/{slow}"), 409, "delete_refused")
    ok(api.post(f"/api/v1/campaigns/{slow}/cancel"))
    ok(api.delete(f"/api/v1/campaigns/{slow}"))
    gone = ok(api.delete(f"/api/v1/campaigns/{scheduled}"))
    assert gone["state"] == "cancelled", gone
    ok(api.delete(f"/api/v1/campaigns/{sent}"))
    assert not {slow, scheduled, sent} & set(ids("?archived=any"))
    assert ok(api.get(f"/api/v1/campaigns/{sent}"))["deleted_at"]
    report = api.get(f"/api/v1/campaigns/{sent}/report.csv")
    assert report.status_code == 200 and report.text.count("\n") >= 44, report.text[:300]
    assert_problem(api.post(f"/api/v1/campaigns/{sent}/retry"), 409, "campaign_deleted")
    assert_problem(api.delete(f"/api/v1/campaigns/{sent}"), 409, "campaign_deleted")
    assert_problem(
        api.post(f"/api/v1/campaigns/{sent}/test-sends", json={"to": OWN_NUMBER}),
        409,
        "test_send_conflict",
    )


def test_operator_on_the_command_line(ws: Workspace) -> None:
    ws.serve()  # takes the gateway's events (the test send's states, the replies)
    ws.link_sender()
    ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    path = ws.path / "campaign.toml"
    text = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
    path.write_text(
        text.replace(
            'timezone = "UTC"', 'start = "2030-04-01T09:00:00"\ntimezone = "Europe/Berlin"'
        ),
        encoding="utf-8",
    )
    campaign = str(ws.run("campaign", "create", str(path), "--json").json()["id"])

    test = ws.run("campaign", "test", campaign, "--to", OWN_NUMBER, "--wait", "30", "--json").json()
    assert test["state"] == "read" and test["target"] == OWN_NUMBER, test
    shown = ws.run("campaign", "test", campaign, "--to", "2125550115", "--wait", "30").output
    assert "failed (not on WhatsApp)" in shown, shown
    tests = ws.run("campaign", "tests", campaign, "--json").json()
    assert tests["total"] == 2, tests
    assert ws.run("campaign", "show", campaign, "--json").json()["total"] == 0
    refused = ws.run("campaign", "test", campaign, "--to", "12", ok=False)
    assert refused.code == 1 and "to: not a phone number" in refused.output, refused.output

    # the replies to the test sends belong to no campaign: the inbox shows them all the same
    inbox = wait_for(lambda: (r := ws.run("replies", "--json").json())["total"] >= 1 and r)
    assert inbox["items"][0]["campaign_id"] is None, inbox
    assert ws.run("replies", "--campaign", campaign, "--json").json()["total"] == 0
    assert "Replies" in ws.run("replies").output

    assert "archived" in ws.run("campaign", "archive", campaign).output
    assert campaign not in [str(c["id"]) for c in ws.run("campaign", "list", "--json").json()]
    only = ws.run("campaign", "list", "--archived", "only", "--json").json()
    assert [str(c["id"]) for c in only] == [campaign], only
    ws.run("campaign", "unarchive", campaign)
    deleted = ws.run("campaign", "delete", campaign).output
    assert f"campaign {campaign} deleted" in deleted, deleted
    again = ws.run("campaign", "delete", campaign, ok=False)
    assert again.code == 1 and "is deleted" in again.output, again.output
    assert ws.run("campaign", "list", "--archived", "any", "--json").json() == []
