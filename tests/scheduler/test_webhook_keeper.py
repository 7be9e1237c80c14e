"""The leader's webhook check: the deployment's URL registered again, over real HTTP."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, update

from campaigns.instances import set_webhook
from gateway.client import GatewayClient
from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from scheduler.webhook_keeper import ProvenLinks, WebhookKeeper
from storage import tables
from storage.queries import instances as iq
from tests.scheduler.helpers import add_instances

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
URL = "https://hooks.example/webhooks/gateway/s3cr3t"
_i = tables.instances


def _keeper(engine: Engine, sb: Sandbox, clock: list[float]) -> WebhookKeeper:
    """A keeper for ``sb``'s instances, a full pass every 60 s of ``clock[0]``."""
    return WebhookKeeper(
        engine,
        lambda: GatewayClient(sb.url, sb.access_token, timeout=10),
        URL,
        every_seconds=60,
        monotonic=lambda: clock[0],
    )


def test_connected_webhooks_are_put_back_on_schedule_and_on_connection(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [0.0]
    with run_sandbox_in_thread(SandboxConfig(auto_link=True)) as sb:
        first, later = sb.create_linked_instance(), sb.create_linked_instance()
        add_instances(engine, [first], T0)
        keeper = _keeper(engine, sb, clock)
        assert keeper.run_once(T0) == [first]  # the first run registers every one
        assert sb.state.instances[first].webhook_url == URL
        assert f"webhook of instance {first} was not the deployment's" in caplog.text
        assert "s3cr3t" not in caplog.text

        # changed behind gatecast's back: put back at the next full check, not before
        with GatewayClient(sb.url, sb.access_token, timeout=10) as gw:
            gw.set_webhook(first, "http://elsewhere.example/hook")
        clock[0] = 30
        assert keeper.run_once(T0) == []
        add_instances(engine, [later], T0)  # a newly connected one: registered at once
        assert keeper.run_once(T0) == [later]
        assert sb.state.instances[first].webhook_url == "http://elsewhere.example/hook"
        clock[0] = 61
        caplog.clear()
        assert sorted(keeper.run_once(T0)) == sorted([first, later])
        assert sb.state.instances[first].webhook_url == URL
        assert "was not the deployment's" not in caplog.text  # what gatecast knows matched

        # registered elsewhere through gatecast (by hand): named in a warning when put back
        with GatewayClient(sb.url, sb.access_token, timeout=10) as gw:
            set_webhook(engine, gw, first, "http://by-hand.example/hook", now=T0)
        clock[0] = 200
        keeper.run_once(T0)
        assert f"webhook of instance {first} was not the deployment's" in caplog.text
        assert sb.state.instances[first].webhook_url == URL

        # a reconnect (disconnected, then connected again) registers it at once
        with engine.begin() as conn:
            conn.execute(update(_i).where(_i.c.instance_id == later).values(state="disconnected"))
        assert keeper.run_once(T0) == []
        with engine.begin() as conn:
            conn.execute(update(_i).where(_i.c.instance_id == later).values(state="connected"))
        assert keeper.run_once(T0) == [later]


def test_an_unconfirmed_sender_refused_before_its_scan_waits_for_its_confirmation(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [0.0]
    # the reference gateway refuses a webhook before the scan
    with run_sandbox_in_thread(SandboxConfig(dialect="reference", strict=True)) as sb:
        with GatewayClient(sb.url, sb.access_token, timeout=10) as gw:
            instance = gw.create_instance()
        add_instances(engine, [instance], T0)
        with engine.begin() as conn:  # its QR code was shown: linked, unconfirmed
            conn.execute(update(_i).where(_i.c.instance_id == instance).values(state="unconfirmed"))
        keeper = _keeper(engine, sb, clock)
        assert keeper.run_once(T0) == []
        assert caplog.text.count(f"webhook of instance {instance} not registered") == 1
        clock[0] = 1
        assert keeper.run_once(T0) == []  # not asked again every tick
        assert caplog.text.count(f"webhook of instance {instance} not registered") == 1
        sb.state.instances[instance].state = "connected"  # scanned; a send confirms it
        with engine.begin() as conn:
            conn.execute(update(_i).where(_i.c.instance_id == instance).values(state="connected"))
        assert keeper.run_once(T0) == [instance]
        assert sb.state.instances[instance].webhook_url == URL


def test_the_start_pass_registers_concurrently_and_keeps_each_failure_apart(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The pass at start registers every linked sender, at most ``concurrency`` at once;
    one the gateway refuses is kept with its reason (not logged: the process prints it)
    and never stops the others; the leader's next check does not register them again."""
    clock = [0.0]
    config = SandboxConfig(auto_link=True, webhook_latency_ms=(300, 300))
    with run_sandbox_in_thread(config) as sb:
        ids = [sb.create_linked_instance() for _ in range(6)]
        add_instances(engine, [*ids, "UNKNOWN0000001"], T0)
        keeper = WebhookKeeper(
            engine,
            lambda: GatewayClient(sb.url, sb.access_token, timeout=10),
            URL,
            every_seconds=60,
            monotonic=lambda: clock[0],
            concurrency=3,
        )
        done = keeper.start_pass(T0)
        assert done.registered == ids
        assert list(done.failed) == ["UNKNOWN0000001"] and done.failed["UNKNOWN0000001"]
        assert all(sb.state.instances[i].webhook_url == URL for i in ids)
        assert "not registered" not in caplog.text and "was not the deployment's" not in caplog.text
        clock[0] = 1
        assert keeper.run_once(T0) == []  # only the failed connected one is tried again
        assert sb.state.stats_view()["requests"]["set_webhook"] == len(ids) + 2


class _Holds:
    """What the dispatcher does with holds: the senders held now, and each release."""

    def __init__(self) -> None:
        self.held: set[str] = set()
        self.released: list[str] = []
        self.all_released = threading.Event()

    def hold_unregistered(self, instance_ids: Iterable[str]) -> None:
        self.held.update(instance_ids)

    def registered(self, instance_id: str) -> None:
        self.held.discard(instance_id)
        self.released.append(instance_id)
        if not self.held:
            self.all_released.set()


def test_a_sender_a_send_proves_linked_is_held_until_its_webhook_is_registered(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Linked at the gateway behind gatecast's back (its row ``created``): held, and
    registered in the background; one the gateway refuses is held and released too, and
    one already registered at this URL is not held (one read, no gateway call)."""
    caplog.set_level(logging.INFO, "gatecast.webhooks")
    config = SandboxConfig(auto_link=True, webhook_latency_ms=(200, 200))
    with run_sandbox_in_thread(config) as sb:
        linked = sb.create_linked_instance()
        with engine.begin() as conn:
            iq.ensure(conn, [linked, "UNKNOWN0000001"], now=T0)  # recorded created
        proofs = ProvenLinks(
            engine, lambda: GatewayClient(sb.url, sb.access_token, timeout=10), URL
        )
        holds = _Holds()
        try:
            held = proofs.proven([linked, "UNKNOWN0000001"], holds, T0)
            assert held == [linked, "UNKNOWN0000001"]
            assert holds.held == {linked, "UNKNOWN0000001"}  # before any registration ends
            assert holds.all_released.wait(10)
            assert sorted(holds.released) == sorted(held)
            assert sb.state.instances[linked].webhook_url == URL
            assert proofs.proven([linked], holds, T0) == []  # registered at this URL
        finally:
            proofs.close()  # the pass under way ends (its lines are logged)
        assert "webhook of instance UNKNOWN0000001 not registered" in caplog.text
        assert f"webhook registered for {linked} (a send proved it linked)" in caplog.text
        assert sb.state.stats_view()["requests"]["set_webhook"] == 2


def test_a_pass_prints_one_line_for_hundreds_and_one_per_failure() -> None:
    from rich.console import Console

    from gatecast.runtime.webhooks import report_registrations
    from scheduler.webhook_keeper import Registrations

    console = Console(record=True, width=200)
    ids = [f"S{i:04d}" for i in range(500)]
    report_registrations(URL, Registrations(ids, {"BAD1": "Instance ID Invalidated"}), console)
    lines = console.export_text().splitlines()
    assert lines == [
        "webhook not registered for BAD1: Instance ID Invalidated",
        "webhook https://hooks.example/webhooks/gateway/*** registered for 500 senders "
        f"({', '.join(ids[:10])} and 490 more)",
    ]
