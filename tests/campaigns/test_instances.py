"""campaigns.instances: gateway operations against the sandbox over HTTP, rows in a real DB."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select

from campaigns import delivery_lifecycle
from campaigns import instances as domain
from gateway.client import GatewayClient
from gateway.errors import GatewayError
from gateway.sandbox import Sandbox
from storage import tables
from storage.queries import instances as iq
from tests.campaigns.campaign_fixtures import NOW

_i = tables.instances
_c = tables.campaigns
_d = tables.deliveries


@pytest.fixture
def client(sandbox: Sandbox) -> Iterator[GatewayClient]:
    with GatewayClient(sandbox.url, sandbox.access_token, timeout=10) as gw:
        yield gw


def _campaign(engine: Engine, state: str, instances: list[str] | None) -> int:
    spec: dict[str, Any] = {"name": f"c-{state}", "message": {"type": "text", "text": "hi"}}
    if instances is not None:
        spec["instances"] = instances
    with engine.begin() as conn:
        return int(
            conn.execute(
                insert(_c)
                .values(
                    name=f"c-{state}",
                    state=state,
                    spec=spec,
                    message_type="text",
                    timezone="UTC",
                    created_at=NOW,
                    updated_at=NOW,
                )
                .returning(_c.c.id)
            ).scalar_one()
        )


def _deliveries(engine: Engine, campaign_id: int, rows: list[tuple[str, str]]) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(_d),
            [
                {
                    "campaign_id": campaign_id,
                    "target": f"+1415555{n:04d}",
                    "sender": sender,
                    "state": state,
                    "content": {"type": "text", "text": "hi"},
                    "queued_at": NOW,
                }
                for n, (sender, state) in enumerate(rows)
            ],
        )


def _senders(engine: Engine, campaign_id: int) -> list[tuple[str | None, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(_d.c.sender, _d.c.state).where(_d.c.campaign_id == campaign_id).order_by(_d.c.id)
        )
        return [(r[0], r[1]) for r in rows]


def _spec_instances(engine: Engine, campaign_id: int) -> Any:
    with engine.connect() as conn:
        spec = conn.execute(select(_c.c.spec).where(_c.c.id == campaign_id)).scalar_one()
    return spec.get("instances")


def _row(engine: Engine, instance_id: str) -> domain.InstanceRecord | None:
    with engine.connect() as conn:
        return domain.get(conn, instance_id)


def test_reset_moves_waiting_deliveries_and_campaign_lists(
    engine: Engine, sandbox: Sandbox, client: GatewayClient
) -> None:
    old = sandbox.create_linked_instance()
    other = "OTHERSENDER1"
    domain.create(engine, client, now=NOW, label="shop")  # the same id: it is linked
    with engine.begin() as conn:
        iq.ensure(conn, [old, other], now=NOW)
        iq.pause(conn, old, "quota_exhausted", now=NOW)
    running = _campaign(engine, "running", [old, other])
    draft = _campaign(engine, "draft", [old])
    everyone = _campaign(engine, "scheduled", None)  # no list: every connected instance
    done = _campaign(engine, "completed", [old])
    _deliveries(
        engine,
        running,
        [(old, "queued"), (old, "sending"), (old, "sent"), (old, "failed"), (other, "queued")],
    )
    _deliveries(engine, done, [(old, "sent")])

    result = domain.reset(engine, client, old, now=NOW + timedelta(minutes=1))

    new = result.new_id
    assert new != old and new in sandbox.state.instances and old not in sandbox.state.instances
    assert (result.new_id_unknown, result.merged, result.deliveries_moved) == (False, False, 2)
    assert sorted(result.campaigns_updated) == sorted([running, draft])
    assert _row(engine, old) is None
    row = _row(engine, new)
    assert row is not None
    assert (row.state, row.paused_reason, row.webhook_url_registered) == ("created", None, False)
    # waiting rows follow the new id; rows already sent or failed keep their history
    assert _senders(engine, running) == [
        (new, "queued"),
        (new, "sending"),
        (old, "sent"),
        (old, "failed"),
        (other, "queued"),
    ]
    assert _senders(engine, done) == [(old, "sent")]
    assert _spec_instances(engine, running) == [new, other]
    assert _spec_instances(engine, draft) == [new]
    assert _spec_instances(engine, everyone) is None
    assert _spec_instances(engine, done) == [old]  # a finished campaign's record is history


def test_reset_onto_an_id_we_already_know_merges(engine: Engine, client: GatewayClient) -> None:
    """A gateway that hands back an id gatecast already has a row for: reset that row."""

    class Reuses:
        def reset_instance(self, instance_id: str) -> str:
            return "KNOWN2"

    with engine.begin() as conn:
        iq.ensure(conn, ["OLD1", "KNOWN2"], now=NOW)
        iq.mark_state(conn, "KNOWN2", "connected", now=NOW, phone="15550001111")
    cid = _campaign(engine, "running", ["OLD1", "KNOWN2"])
    _deliveries(engine, cid, [("OLD1", "queued")])
    result = domain.reset(engine, Reuses(), "OLD1", now=NOW)  # type: ignore[arg-type]
    assert (result.merged, result.deliveries_moved) == (True, 1)
    old, known = _row(engine, "OLD1"), _row(engine, "KNOWN2")
    assert old is not None and known is not None
    assert old.state == "logged_out"
    assert (known.state, known.phone) == ("created", None)
    assert _senders(engine, cid) == [("KNOWN2", "queued")]
    assert _spec_instances(engine, cid) == ["KNOWN2"]  # no duplicate


def test_reset_without_a_new_id_marks_the_old_one_gone(engine: Engine) -> None:
    class Keeps:
        def reset_instance(self, instance_id: str) -> str:
            return instance_id

    with engine.begin() as conn:
        iq.mark_state(conn, "SAME1", "connected", now=NOW, phone="15550001111")
    result = domain.reset(engine, Keeps(), "SAME1", now=NOW)  # type: ignore[arg-type]
    assert (result.new_id_unknown, result.deliveries_moved, result.campaigns_updated) == (
        True,
        0,
        [],
    )
    row = _row(engine, "SAME1")
    assert row is not None and row.state == "gone"
    assert row.paused_reason == domain.GONE_AFTER_RESET
    with pytest.raises(domain.InstanceGone):  # never used again
        domain.reset(engine, Keeps(), "SAME1", now=NOW)  # type: ignore[arg-type]


def test_a_refused_reset_changes_nothing(
    engine: Engine, sandbox: Sandbox, client: GatewayClient
) -> None:
    with engine.begin() as conn:
        iq.ensure(conn, ["NOSUCH1"], now=NOW)
    cid = _campaign(engine, "running", ["NOSUCH1"])
    _deliveries(engine, cid, [("NOSUCH1", "queued")])
    with pytest.raises(GatewayError):
        domain.reset(engine, client, "NOSUCH1", now=NOW)
    assert _row(engine, "NOSUCH1") is not None
    assert _senders(engine, cid) == [("NOSUCH1", "queued")]


def test_reconnect_lifts_only_a_connection_pause(
    engine: Engine, sandbox: Sandbox, client: GatewayClient
) -> None:
    iid = sandbox.create_linked_instance()
    with engine.begin() as conn:
        iq.mark_state(conn, iid, "connected", now=NOW)
        iq.pause(conn, iid, "relogin_required", now=NOW)
    out = domain.operate(engine, client, iid, "reconnect", now=NOW)
    assert (out.state, out.resumed_reason) == ("connected", "relogin_required")
    row = _row(engine, iid)
    assert row is not None and row.paused_reason is None

    with engine.begin() as conn:
        iq.pause(conn, iid, "quota_exhausted", now=NOW)
    out = domain.operate(engine, client, iid, "reconnect", now=NOW)
    assert out.resumed_reason is None
    row = _row(engine, iid)
    assert row is not None and row.paused_reason == "quota_exhausted"


def test_a_refused_reconnect_keeps_the_pause(
    engine: Engine, sandbox: Sandbox, client: GatewayClient
) -> None:
    iid = sandbox.create_linked_instance()
    client.logout(iid)  # a logged-out instance cannot reconnect
    with engine.begin() as conn:
        iq.ensure(conn, [iid], now=NOW)
        iq.pause(conn, iid, "relogin_required", now=NOW)
    with pytest.raises(GatewayError):
        domain.operate(engine, client, iid, "reconnect", now=NOW)
    row = _row(engine, iid)
    assert row is not None and row.paused_reason == "relogin_required"


def test_resume_clears_any_pause(engine: Engine) -> None:
    with engine.begin() as conn:
        iq.ensure(conn, ["P1"], now=NOW)
        iq.pause(conn, "P1", "burst of 5 consecutive failures", now=NOW)
    out = domain.resume(engine, "P1", now=NOW + timedelta(seconds=1))
    assert out.cleared_reason == "burst of 5 consecutive failures"
    with engine.connect() as conn:
        assert iq.pause_state(conn, ["P1"]) == {"P1": None}
    assert domain.resume(engine, "P1", now=NOW).cleared_reason is None  # not paused: no-op
    with pytest.raises(domain.UnknownInstance, match="NOPE"):
        domain.resume(engine, "NOPE", now=NOW)


def test_qr_and_operations_record_states(
    engine: Engine, sandbox: Sandbox, client: GatewayClient
) -> None:
    iid = domain.create(engine, client, now=NOW, label="front desk")
    row = _row(engine, iid)
    assert row is not None and (row.label, row.state) == ("front desk", "created")
    qr = domain.fetch_qr(engine, client, iid, now=NOW)
    assert qr.data_uri and not qr.already_linked
    # a QR code shown: linked once scanned, which only its first send may tell
    assert _row(engine, iid).state == "unconfirmed"  # type: ignore[union-attr]
    sandbox.scan(iid)
    qr = domain.fetch_qr(engine, client, iid, now=NOW)
    assert (qr.already_linked, qr.newly_connected, qr.state) == (True, True, "connected")
    assert domain.fetch_qr(engine, client, iid, now=NOW).newly_connected is False
    domain.set_webhook(engine, client, iid, "http://127.0.0.1:9/hook", now=NOW)
    assert _row(engine, iid).webhook_url_registered is True  # type: ignore[union-attr]
    assert domain.operate(engine, client, iid, "reboot", now=NOW).state == "waiting_scan"
    assert domain.operate(engine, client, iid, "logout", now=NOW).state == "logged_out"
    row = _row(engine, iid)
    assert row is not None and row.state == "logged_out"
    assert row.paused_reason == delivery_lifecycle.LOGGED_OUT_PAUSE  # until linked again
    domain.fetch_qr(engine, client, iid, now=NOW)  # a new QR code: the user links it again
    row = _row(engine, iid)
    assert row is not None and (row.state, row.paused_reason) == ("unconfirmed", None)
    with pytest.raises(ValueError, match="unknown instance operation"):
        domain.operate(engine, client, iid, "explode", now=NOW)


def test_after_resume_and_after_reset_the_dispatcher_sends_the_waiting_rows(
    sqlite_engine: Engine,
) -> None:
    """The point of both: rows stuck behind a paused or reset sender really go out."""
    import random

    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread
    from scheduler.clock import FakeClock
    from scheduler.dispatcher import Dispatcher
    from tests.scheduler.helpers import add_instances, add_running_campaign, spec, states_of

    cfg = SandboxConfig(dialect="spec", auto_link=True, status_delays=(0, 0, 0))
    with run_sandbox_in_thread(cfg) as sb, GatewayClient(sb.url, sb.access_token) as gw:
        old = sb.create_linked_instance()
        clock = FakeClock(NOW)
        add_instances(sqlite_engine, [old], NOW)
        cid = add_running_campaign(sqlite_engine, spec(), recipients=6, senders=[old], now=NOW)
        with sqlite_engine.begin() as conn:
            iq.pause(conn, old, "burst of 5 consecutive failures", now=NOW)
        d = Dispatcher(
            sqlite_engine,
            lambda: GatewayClient(sb.url, sb.access_token, timeout=30.0),
            clock=clock,
            workers=2,
            batch_size=2,
            rng=random.Random(1),
            apply_pending=lambda conn, ids, now: 0,
        )
        with d:
            d.tick()
            d.flush()
            assert sb.messages() == []  # paused: nothing leaves
            domain.resume(sqlite_engine, old, now=clock.now())
            d.tick()
            d.flush()  # record the batch in flight: nothing is mid-send at the reset
            sent_by_old = len(sb.messages())
            assert sent_by_old > 0 and {m["instance_id"] for m in sb.messages()} == {old}

            with sqlite_engine.begin() as conn:
                iq.pause(conn, old, "relogin_required", now=clock.now())
            new = domain.reset(sqlite_engine, gw, old, now=clock.now()).new_id
            assert new != old
            clock.advance(10)  # past the dispatcher's sender cache
            d.run(until_done=True, max_ticks=50)
        assert set(states_of(sqlite_engine, cid).values()) == {"sent"}
        by_sender = [m["instance_id"] for m in sb.messages()]
        assert len(by_sender) == 6 and by_sender.count(new) == 6 - sent_by_old


def test_forget_releases_queued_rows_and_keeps_history(engine: Engine) -> None:
    with engine.begin() as conn:
        iq.mark_state(conn, "OLD1", "connected", now=NOW)
    cid = _campaign(engine, "running", None)
    _deliveries(engine, cid, [("OLD1", "sent"), ("OLD1", "queued"), ("OLD1", "sending")])
    assert domain.forget(engine, "OLD1") == domain.ForgetOutcome("OLD1", released=1)
    assert _row(engine, "OLD1") is None
    assert _senders(engine, cid) == [("OLD1", "sent"), (None, "queued"), ("OLD1", "sending")]
    with pytest.raises(domain.UnknownInstance):
        domain.forget(engine, "OLD1")


def test_confirm_scans_finds_scanned_instances_without_connection_events(
    engine: Engine, sandbox: Sandbox, client: GatewayClient
) -> None:
    scanned = []
    for _ in range(2):
        scanned.append(domain.create(engine, client, now=NOW))
        domain.fetch_qr(engine, client, scanned[-1], now=NOW)
        sandbox.scan(scanned[-1])
    waiting = domain.create(engine, client, now=NOW)
    domain.fetch_qr(engine, client, waiting, now=NOW)
    with engine.begin() as conn:  # the connection events never arrived
        for instance_id in scanned:
            iq.mark_state(conn, instance_id, "waiting_scan", now=NOW)
    # asked two at a time (threads sharing the client), named in id order
    assert domain.confirm_scans(engine, client, now=NOW, concurrency=2) == scanned
    states = {r.instance_id: r.state for r in _all(engine)}
    # an unconfirmed one is not asked (a QR request may end a linked session)
    assert states == {**dict.fromkeys(scanned, "connected"), waiting: "unconfirmed"}


def test_a_gone_instance_is_refused_before_the_gateway_is_asked(
    engine: Engine, client: GatewayClient
) -> None:
    iid = domain.create(engine, client, now=NOW)
    domain.mark_gone(engine, iid, "gone: test", now=NOW)
    for call in (
        lambda: domain.operate(engine, client, iid, "reboot", now=NOW),
        lambda: domain.fetch_qr(engine, client, iid, now=NOW),
        lambda: domain.set_webhook(engine, client, iid, "http://x.test/h", now=NOW),
    ):
        with pytest.raises(domain.InstanceGone, match="no longer exists at the gateway"):
            call()
    domain.set_webhook(engine, client, iid, "", now=NOW, enable=False)  # turning off is fine
    with engine.connect() as conn:
        assert iid not in iq.linked_ids(conn)


def _all(engine: Engine) -> list[domain.InstanceRecord]:
    with engine.connect() as conn:
        return domain.list_all(conn)


def test_status_follows_what_sends_prove(engine: Engine) -> None:
    later = NOW + timedelta(seconds=2)
    with engine.begin() as conn:
        for iid, state in (("OUT1", "logged_out"), ("UNC1", "unconfirmed"), ("GONE1", "gone")):
            iq.mark_state(conn, iid, state, now=NOW)
        iq.pause(conn, "OUT1", delivery_lifecycle.LOGGED_OUT_PAUSE, now=NOW)
        iq.mark_state(conn, "OUT2", "logged_out", now=later)  # logged out after the send began
        iq.mark_state(conn, "UNC2", "unconfirmed", now=later)
        proofs = [(i, NOW + timedelta(seconds=1)) for i in ("OUT1", "OUT2", "UNC1", "UNC2")]
        newly = iq.mark_linked_by_send(
            conn, [*proofs, ("GONE1", later)], now=later, clears=("logged_out",)
        )
        refused = iq.mark_unlinked_by_send(
            conn,
            "UNC1",
            "waiting_scan",
            started=later,
            now=later,
            kept=delivery_lifecycle.KEPT_BY_REFUSAL,
        )
        # a refusal of a send that started before OUT1's proof is older news: nothing moves
        stale = iq.mark_unlinked_by_send(
            conn,
            "OUT1",
            "logged_out",
            started=NOW,
            now=later,
            kept=delivery_lifecycle.KEPT_BY_REFUSAL,
        )
    assert refused == "connected"  # the state the proof just before recorded
    assert stale is None
    assert newly == ["OUT1", "UNC1", "UNC2"]  # not OUT2 (its logout is newer), nor gone
    rows = {r.instance_id: (r.state, r.paused_reason) for r in _all(engine)}
    assert rows == {
        "OUT1": ("connected", None),  # its send was accepted: linked again, pause lifted
        "UNC1": ("waiting_scan", None),
        "GONE1": ("gone", None),
        "OUT2": ("logged_out", None),  # the logout is newer than the send's proof
        "UNC2": ("connected", None),
    }
