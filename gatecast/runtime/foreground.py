"""Run one campaign in the foreground to its end (``gatecast campaign run``, the demo).

Starts the campaign now if it is still scheduled, then dispatches only its rows until
nothing is left to send (or it is paused). With :func:`receive_webhooks` the HTTP app runs
in this process and the campaign's senders post their statuses to it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from campaigns import delivery_lifecycle, lifecycle
from campaigns.instances import linked_ids, webhook_registered
from campaigns.service import campaign_counts, campaign_instances, campaign_state
from gatecast.runtime import make_gateway_client
from gatecast.runtime.holds_view import progress_text
from gatecast.runtime.webhooks import (
    register_webhooks,
    shown_webhook_url,
    stored_webhook_secret,
    webhook_url,
    with_webhook_secret,
)
from gatecast.settings import Settings
from scheduler import holds
from scheduler.defaults import DEFAULT_SEND_CONCURRENCY, DEFAULT_SENDER_GRACE_SECONDS
from scheduler.dispatcher import Dispatcher, SupportsSend, TickResult
from scheduler.holds import CampaignHold
from scheduler.starts import start_campaign
from scheduler.webhook_keeper import ProvenLinks, register_concurrently
from storage.engine import Engine
from storage.types import utcnow

#: Delivery states that still need the dispatcher.
_PENDING = delivery_lifecycle.OPEN


@dataclass(frozen=True)
class RunOptions:
    """Tuning of a foreground run."""

    workers: int = 4
    batch_size: int = 256
    lease_seconds: float = 120.0
    progress: bool = True
    webhook: bool = False
    settle_seconds: float = 15.0
    sender_grace_seconds: float = DEFAULT_SENDER_GRACE_SECONDS
    send_concurrency: int = DEFAULT_SEND_CONCURRENCY


class NoSenderCanSend(RuntimeError):
    """The campaign's queued recipients wait for senders that cannot send, and no healthy
    sender can take them: a foreground run ends instead of waiting forever."""

    def __init__(self, campaign_id: int, why: str) -> None:
        self.campaign_id = campaign_id
        self.why = why
        super().__init__(f"campaign {campaign_id}: no sender can send: {why}")


class HeldUntilLater(RuntimeError):
    """Every queued recipient waits for a later day (the warm-up allowance or the daily
    cap): a foreground run ends and says why instead of waiting until then."""

    def __init__(self, campaign_id: int, hold: CampaignHold) -> None:
        self.campaign_id = campaign_id
        self.hold = hold
        super().__init__(f"campaign {campaign_id} waits: {hold.line()}")


#: holds that end a foreground run: they lift on a later day
_DAY_HOLDS = frozenset({holds.WARMUP, holds.DAILY_CAP})
#: how often a run reads its campaign's hold
_HOLD_EVERY = 1.0


class _HoldWatch:
    """Reads the campaign's hold now and then (for the progress line), and stops the run
    when it waits for a later day."""

    def __init__(self, engine: Engine, campaign_id: int) -> None:
        self.engine = engine
        self.campaign_id = campaign_id
        self.stop = threading.Event()
        self.hold = holds.CampaignHold(None)
        self._read_at = 0.0

    def tick(self, result: TickResult) -> None:
        now = time.monotonic()
        if now - self._read_at < _HOLD_EVERY:
            return
        self._read_at = now
        self.hold = holds.campaign_hold(self.engine, self.campaign_id, utcnow())
        primary = self.hold.primary
        if primary is not None and primary.kind in _DAY_HOLDS and not result.waiting:
            self.stop.set()

    @property
    def held(self) -> bool:
        return self.stop.is_set()


class StartRefused(RuntimeError):
    """The campaign's start failed (no sender, a missed start...); the message says why."""


def run_campaign(
    engine: Engine,
    campaign_id: int,
    client_factory: Callable[[], SupportsSend],
    *,
    options: RunOptions | None = None,
    console: Console | None = None,
    on_tick: Callable[[TickResult], None] | None = None,
    proven_links: ProvenLinks | None = None,
) -> dict[str, int]:
    """Start (if scheduled) and dispatch one campaign until nothing is left to send;
    with ``proven_links``, a sender its sends prove linked that was never registered at
    that URL is held while its webhook is registered (:func:`proof_webhook_url`).

    Returns the final counts per delivery state. Raises ``LookupError`` for an unknown
    campaign, ``lifecycle.InvalidTransition`` when it cannot run (cancelled...),
    :class:`StartRefused` when its start fails (the reason is recorded on it) and
    :class:`NoSenderCanSend` when it stalls and :class:`HeldUntilLater` when what is left
    waits for a later day (the campaign stays ``running`` for ``serve``).
    """
    options = options or RunOptions()
    console = console or Console(stderr=True)
    found = campaign_state(engine, campaign_id)
    if found is None:
        raise LookupError(f"campaign {campaign_id} does not exist")
    state, _ = found
    if state in (lifecycle.SCHEDULED, lifecycle.DRAFT):
        if state == lifecycle.DRAFT:
            with engine.begin() as conn:
                lifecycle.transition(conn, campaign_id, lifecycle.SCHEDULED, now=utcnow())
        result = start_campaign(engine, campaign_id, now=utcnow(), enforce_grace=False)
        if result.outcome != "started":
            raise StartRefused(f"campaign {campaign_id} did not start: {result.detail}")
        console.print(
            f"campaign {campaign_id} started: {result.queued} queued, {result.skipped} skipped"
        )
    elif state != lifecycle.RUNNING:
        raise lifecycle.InvalidTransition(campaign_id, state, lifecycle.RUNNING)

    def linked(instance_ids: list[str]) -> None:  # held until registered, then sends
        if proven_links is not None:
            proven_links.proven(instance_ids, dispatcher, utcnow())

    with Dispatcher(
        engine,
        client_factory,
        workers=options.workers,
        batch_size=options.batch_size,
        lease_seconds=options.lease_seconds,
        campaign_ids=[campaign_id],
        poll_seconds=0.5,
        sender_grace_seconds=options.sender_grace_seconds,
        send_concurrency=options.send_concurrency,
        on_linked=None if proven_links is None else linked,
    ) as dispatcher:
        watch = _HoldWatch(engine, campaign_id)

        def ticked(result: TickResult) -> None:
            watch.tick(result)
            if on_tick is not None:
                on_tick(result)

        if not options.progress:
            dispatcher.run(watch.stop, until_done=True, on_tick=ticked, stop_when_stalled=True)
        else:
            _run_with_progress(engine, campaign_id, dispatcher, console, ticked, watch)
        why = dispatcher.stalled.get(campaign_id)
    found = campaign_state(engine, campaign_id)
    if why is not None and found is not None and found[0] == lifecycle.RUNNING:
        raise NoSenderCanSend(campaign_id, why)
    if watch.held and found is not None and found[0] == lifecycle.RUNNING:
        raise HeldUntilLater(campaign_id, watch.hold)
    return campaign_counts(engine, campaign_id)


def _run_with_progress(
    engine: Engine,
    campaign_id: int,
    dispatcher: Dispatcher,
    console: Console,
    on_tick: Callable[[TickResult], None] | None,
    watch: _HoldWatch,
) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    counts = campaign_counts(engine, campaign_id)
    total = sum(counts.values())
    columns = (
        TextColumn("[bold]campaign {task.fields[cid]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    last = 0.0
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("send", total=total, cid=campaign_id, detail="")

        def update(result: TickResult) -> None:
            nonlocal last
            if on_tick is not None:
                on_tick(result)
            now = time.monotonic()
            if now - last < 0.25 and not result.completed:
                return
            last = now
            c = campaign_counts(engine, campaign_id)
            done = sum(v for k, v in c.items() if k not in _PENDING)
            detail = ", ".join(f"{k} {v}" for k, v in c.items() if v and k not in _PENDING)
            if dispatcher.paused_senders:
                detail += " | paused senders: " + ", ".join(
                    f"{k} ({v})" for k, v in dispatcher.paused_senders.items()
                )
            detail += progress_text(watch.hold)
            bar.update(task, completed=done, detail=detail)

        dispatcher.run(watch.stop, until_done=True, on_tick=update, stop_when_stalled=True)
        c = campaign_counts(engine, campaign_id)
        bar.update(task, completed=sum(v for k, v in c.items() if k not in _PENDING))


def receive_webhooks(
    stack: contextlib.ExitStack,
    engine: Engine,
    campaign_id: int,
    settings: Settings,
    console: Console,
) -> Settings:
    """Serve the HTTP app in this process and register its webhook for the senders."""
    from gatecast.runtime.http_server import AsgiServer  # the web stack only when receiving
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gatecast.web.webhook import install_log_redaction

    settings, _ = with_webhook_secret(settings)
    install_log_redaction()
    port = settings.port if settings.public_url else 0
    app = create_app(AppContext(settings=settings, engine=engine))
    server = stack.enter_context(
        AsgiServer(app, host=settings.host, port=port, forwarded_allow_ips=settings.trusted_proxies)
    )
    ids = campaign_instances(engine, campaign_id) or linked_ids(engine)
    before = webhook_registered(engine, ids)  # what serve (or a user) registered
    url = webhook_url(settings, server.url)
    with make_gateway_client(settings) as client:
        done = register_webhooks(
            engine, client, url, ids, out=console, concurrency=settings.webhook_register_concurrency
        )
    if not settings.public_url:  # an address of this process: give it back at the end
        stack.callback(_restore_webhooks, engine, settings, done, before, console)
    return settings


def proof_webhook_url(settings: Settings, engine: Engine) -> str | None:
    """The deployment's webhook URL, for a run without ``--webhook`` to register for a
    sender its sends prove linked: ``GATECAST_PUBLIC_URL``, else the address of the
    ``gatecast serve`` running for this state folder; None when neither, or when no
    webhook secret is configured or stored (none is generated here)."""
    secret = stored_webhook_secret(settings)
    if secret is None:
        return None
    address = "" if settings.public_url.strip() else running_serve_address(settings, engine)
    if address is None:
        return None
    return webhook_url(settings.model_copy(update={"webhook_secret": secret}), address)


def running_serve_address(settings: Settings, engine: Engine) -> str | None:
    """The address of the ``gatecast serve`` running for this state folder (its intake's,
    else its receiver's), or None when none runs."""
    from gatecast.intake.supervisor import running_intake
    from gatecast.runtime.receiver_control import running_receiver, state_folder

    folder = state_folder(settings, engine)
    intake = running_intake(folder)
    if intake is not None and intake.get("url"):
        return str(intake["url"])
    receiver = running_receiver(folder)
    return receiver.url if receiver is not None else None


def _restore_webhooks(
    engine: Engine,
    settings: Settings,
    borrowed: list[str],
    before: dict[str, bool],
    console: Console,
) -> None:
    """After a ``--webhook`` run: point each sender's webhook back at the running
    ``gatecast serve`` when it was registered before the run; turn it off (with a warning
    that replies are not received) when it was not, or when no ``serve`` runs now."""
    address = running_serve_address(settings, engine)
    serve_url = webhook_url(settings, address) if address else None
    restore = [i for i in borrowed if before.get(i)] if serve_url else []
    disable = [i for i in borrowed if i not in restore]
    with make_gateway_client(settings) as client:
        if restore and serve_url:
            done = register_webhooks(
                engine,
                client,
                serve_url,
                restore,
                out=Console(quiet=True),
                concurrency=settings.webhook_register_concurrency,
            )
            shown = shown_webhook_url(serve_url)
            for iid in done:
                console.print(f"webhook of {iid} restored to {shown} (gatecast serve)")
        turned = register_concurrently(
            engine,
            client,
            "",
            disable,
            now=utcnow(),
            concurrency=settings.webhook_register_concurrency,
            enable=False,
        )
    for iid, why in turned.failed.items():
        console.print(f"[yellow]webhook of {iid} not turned off:[/] {escape(why)}")
    off = turned.registered
    if off:
        console.print(
            f"[yellow]warning:[/] the webhook of {', '.join(off)} is turned off now that this "
            "run ends: replies and STOPs are not received until `gatecast serve` runs "
            "(it registers the webhook again)"
        )


def settle(
    engine: Engine, campaign_id: int, timeout: float, *, quiet_seconds: float = 2.0
) -> dict[str, int]:
    """The campaign's counts once they stop moving for ``quiet_seconds`` (or at ``timeout``)."""
    deadline = time.monotonic() + timeout
    last: dict[str, int] = {}
    stable_since = time.monotonic()
    while True:
        counts = campaign_counts(engine, campaign_id)
        if counts != last:
            last, stable_since = counts, time.monotonic()
        if time.monotonic() - stable_since >= quiet_seconds or time.monotonic() > deadline:
            return counts
        time.sleep(0.25)
