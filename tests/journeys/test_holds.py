"""Why is it waiting? Each hold read from the CLI, the API and the dashboard in the same
words (scheduler/holds.py), and the README walk-through with the default warm-up.

Over the sandbox (CLI subprocesses, ``gatecast serve``, real HTTP, SQLite files): the
README's walk-through on a fresh database (warm-up used), a daily cap then a logged-out
sender (daily cap reached, no usable sender), and a sandbox that refuses every send
(retry backoff, then sender paused after a burst) beside a campaign outside its window.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from tests.journeys.harness import (
    API_KEY,
    SAMPLES,
    Server,
    Workspace,
    table_value,
    wait_for,
    workspace,
)
from tests.journeys.test_senders import _own_sandbox
from tests.webhook_receiver import Receiver

FAST = {"per_minute = 20": "per_minute = 600", "delay_seconds = [5, 15]": "delay_seconds = [0, 0]"}


def _import_customers(ws: Workspace) -> None:
    """README step 2."""
    out = ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers").output
    assert table_value(out, "imported (new)") == "44", out


def _create(ws: Workspace, name: str, **replace: str) -> int:
    """README step 3 with ``samples/campaign.toml`` (fields replaced: a quicker pace)."""
    text = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = ws.path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return int(ws.run("campaign", "create", str(path), "--json").json()["id"])


def _shown(ws: Workspace, cid: int) -> tuple[str, dict[str, Any]]:
    """``campaign show`` as a person reads it, and its JSON."""
    text = ws.run("campaign", "show", str(cid)).output
    return text, ws.run("campaign", "show", str(cid), "--json").json()


def _dashboard(server: Server, cid: int) -> tuple[str, str]:
    """The campaign's dashboard page and the campaign list, signed in."""
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        signed = browser.post("/login", data={"api_key": API_KEY, "next": "/campaigns"})
        assert signed.status_code == 303, signed.text
        return browser.get(f"/campaigns/{cid}").text, browser.get("/campaigns").text


def _every_face_says(ws: Workspace, server: Server, cid: int, kind: str) -> dict[str, Any]:
    """The CLI, the API (one campaign and the list) and the dashboard (the campaign's
    page and the list) name the same hold in the same words; returns the API's hold."""
    with server.api() as api:
        hold = wait_for(
            lambda: (
                (h := api.get(f"/api/v1/campaigns/{cid}").json()["hold"])
                and h["kind"] == kind
                and h
            ),
            timeout=60,
            what=f"campaign {cid}'s hold to be {kind}",
        )
        listed = api.get("/api/v1/campaigns").json()["items"]
    text = ws.run("campaign", "show", str(cid)).output
    words = hold["words"]
    assert f"Waiting: {words}" in text, text
    assert "--" not in (hold["action"] or ""), hold  # no CLI flags on the web
    assert "command" not in hold, hold
    assert [c["hold"]["words"] for c in listed if c["id"] == cid] == [words], listed
    page, listing = _dashboard(server, cid)
    assert words in html.unescape(page), page
    assert f"waiting: {words}" in html.unescape(listing), listing
    return dict(hold)


def _served_hold(
    ws: Workspace, cid: int, kind: str, receiver: Receiver | None = None
) -> dict[str, Any]:
    """Start ``serve``, check every face names the hold ``kind`` (and, with a
    ``receiver``, that its ``campaign.held`` event says it once), stop it."""
    server = ws.serve()
    try:
        hold = _every_face_says(ws, server, cid, kind)
        if receiver is not None:
            held = wait_for(
                lambda: receiver.of_type("campaign.held"), timeout=60, what="campaign.held"
            )
            assert [e["data"]["kind"] for e in held] == [kind], held
            data = held[0]["data"]
            assert (data["campaign_id"], data["words"]) == (cid, hold["words"]), data
        return hold
    finally:
        server.stop()


@contextmanager
def _receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.stop()


def _sent(shown: dict[str, Any]) -> int:
    counts = shown["counts"]
    return int(counts["sent"] + counts["delivered"] + counts["read"])


def test_the_readme_walkthrough_names_the_warm_up_hold(ws: Workspace) -> None:
    """README steps 1-4 with the defaults (the warm-up on): the run sends the new sender's
    day-1 allowance, ends with exit code 4 and says why the rest waits and until when;
    ``campaign show``, the API and the dashboard say the same; turning the warm-up off
    (the README's way to lift it for a try) sends the rest."""
    ws.settings["GATECAST_WARMUP_ENABLED"] = "true"  # the default a user has
    instance_id = ws.link_sender()
    _import_customers(ws)
    cid = _create(ws, "walkthrough", **FAST)
    run = ws.run("campaign", "run", str(cid), "--webhook", "--settle", "1", ok=False)
    assert run.code == 4, run.output
    assert "Waiting: warm-up allowance used today" in run.output, run.output
    assert f"gatecast instance warmup {instance_id} --off" in run.output, run.output
    text, shown = _shown(ws, cid)
    hold = shown["hold"]
    assert hold["kind"] == "warmup_used", hold
    sent = _sent(shown)
    assert 12 <= sent <= 18, shown["counts"]  # day 1: 15 +/- 20 %
    assert f"warm-up allowance used today ({sent} of {sent})" in hold["words"], hold
    assert f"Waiting: {hold['words']}" in text, text
    local = datetime.now(UTC) + timedelta(days=1)
    midnight = datetime(local.year, local.month, local.day, tzinfo=UTC)
    assert hold["until"] == midnight.isoformat(), hold
    _served_hold(ws, cid, "warmup_used")
    ws.run("instance", "warmup", instance_id, "--off")
    done = ws.run("campaign", "run", str(cid), "--webhook", "--settle", "1").output
    assert f"campaign {cid} is completed" in done and "waiting:" not in done, done
    assert ws.run("campaign", "show", str(cid), "--json").json()["hold"] is None


def test_a_daily_cap_then_a_logged_out_sender(ws: Workspace) -> None:
    """The run stops at the cap and says when it resets; once the only sender is logged
    out, the hold says no sender can send and what to do."""
    instance_id = ws.link_sender()
    _import_customers(ws)
    cid = _create(ws, "capped", **FAST, **{"daily_cap = 500": "daily_cap = 3"})
    run = ws.run("campaign", "run", str(cid), ok=False)
    assert run.code == 4, run.output
    assert "Waiting: daily cap reached (3 of 3 today); resets at 00:00" in run.output, run.output
    shown = ws.run("campaign", "show", str(cid), "--json").json()
    assert _sent(shown) == 3, shown["counts"]
    assert shown["hold"]["kind"] == "daily_cap", shown["hold"]
    ws.run("instance", "logout", instance_id)
    hold = _served_hold(ws, cid, "no_usable_sender")
    assert f"sender {instance_id} is logged out" in hold["words"], hold
    assert "scan its QR code" in (hold["action"] or ""), hold


def _people(ws: Workspace, name: str, count: int, offset: int) -> None:
    path = ws.path / f"{name}.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Name", "Phone"])
        for n in range(count):
            writer.writerow([f"{name} {n}", f"+1415555{offset + n:04d}"])
    ws.run("contacts", "import", str(path), "--list", name)


def _campaign(ws: Workspace, name: str, extra: str) -> int:
    path = ws.path / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nlist = "{name}"\n\n[message]\ntype = "text"\ntext = "Hello"\n\n'
        f'[schedule]\ntimezone = "UTC"\n{extra}\n[pace]\nper_minute = 600\n'
        "delay_seconds = [0, 0]\n\n[retry]\nmax_attempts = 4\nbackoff_seconds = 3600\n",
        encoding="utf-8",
    )
    return int(ws.run("campaign", "create", str(path), "--json").json()["id"])


def test_outside_the_window_and_a_retry_backoff(tmp_path: Path) -> None:
    """A gateway that answers every send 429: the recipients wait for their retry. A
    campaign outside its window says when it opens (the clock set to 10:00 UTC)."""
    with (
        _own_sandbox(tmp_path / "sandbox", "--rate-429", "1.0") as sandbox,
        workspace(tmp_path / "work", sandbox.url) as ws,
    ):
        ws.clock_start = datetime.now(UTC).replace(hour=10, minute=0, second=0, microsecond=0)
        ws.link_sender()
        _people(ws, "evening", 2, 0)
        _people(ws, "retried", 2, 100)
        windowed = _campaign(ws, "evening", 'window = ["18:00", "20:00"]\n')
        retried = _campaign(ws, "retried", "")
        server = ws.serve()
        try:
            hold = _every_face_says(ws, server, windowed, "outside_window")
            assert "opens at 18:00" in hold["words"], hold
            hold = _every_face_says(ws, server, retried, "retry_backoff")
            assert "next try at" in hold["words"], hold
            # on request, each queued recipient's own hold
            with server.api() as api:
                each = api.get(f"/api/v1/campaigns/{retried}?recipients=true").json()
            kinds = [r["hold"]["kind"] for r in each["recipient_holds"]]
            assert kinds == ["retry_backoff", "retry_backoff"], each["recipient_holds"]
            listed = ws.run("campaign", "show", str(retried), "--recipients").output
            assert listed.count("retry backoff after a failed attempt") >= 3, listed
        finally:
            server.stop()


def test_a_sender_paused_by_the_gateway(tmp_path: Path) -> None:
    """The gateway's quota pauses the only sender after two sends: the run ends (no
    sender can send) and every face says the sender is paused, why, since when, and
    what to do; an endpoint subscribed to ``campaign.held`` gets the same words."""
    with (
        _own_sandbox(tmp_path / "sandbox", "--monthly-quota", "2") as sandbox,
        workspace(tmp_path / "work", sandbox.url) as ws,
        _receiver() as receiver,
    ):
        instance_id = ws.link_sender()
        added = ws.run(
            "webhook-endpoints", "add", receiver.url, "--events", "campaign.held", "--json"
        )
        receiver.secret = added.json()["secret"]
        _people(ws, "quota", 4, 300)
        cid = _campaign(ws, "quota", "")
        run = ws.run("campaign", "run", str(cid), ok=False)
        assert run.code == 3, run.output
        hold = _served_hold(ws, cid, "sender_paused", receiver)
        assert f"sender {instance_id} is paused since" in hold["words"], hold
        assert "quota" in hold["words"], hold
        assert "resume the sender" in (hold["action"] or ""), hold
