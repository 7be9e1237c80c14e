"""``gatecast campaign run ID``: run one campaign in the foreground to its end.

Starts the campaign now if it is still scheduled, then dispatches only its rows with a
live progress bar until nothing is left to send (or it is paused). Statuses (delivered,
read) arrive through the webhook: run ``gatecast serve`` beside it, or pass
``--webhook`` to receive them in this process (the gateway must reach this machine).
Killing it at any moment is safe: see docs/scheduling-and-pacing.md, "Crash semantics".
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
from rich.console import Console

if TYPE_CHECKING:
    from gatecast.settings import Settings
    from scheduler.dispatcher import Dispatcher, SupportsSend, TickResult
    from storage.engine import Engine

#: Delivery states that still need the dispatcher.
_PENDING = ("queued", "sending")

#: ``--sender-grace`` default: ``scheduler.dispatcher.DEFAULT_SENDER_GRACE_SECONDS``, written
#: out so that ``--help`` needs no scheduler import (tests/gatecast/test_cli_startup.py
#: checks that the two agree).
DEFAULT_SENDER_GRACE_SECONDS = 300.0


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


class NoSenderCanSend(RuntimeError):
    """The campaign's queued recipients wait for senders that cannot send, and no healthy
    sender can take them: a foreground run ends instead of waiting forever."""

    def __init__(self, campaign_id: int, why: str) -> None:
        self.campaign_id = campaign_id
        self.why = why
        super().__init__(f"campaign {campaign_id}: no sender can send: {why}")


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
) -> dict[str, int]:
    """Start (if scheduled) and dispatch one campaign until nothing is left to send.

    Returns the final counts per delivery state. Raises ``LookupError`` for an unknown
    campaign, ``lifecycle.InvalidTransition`` when it cannot run (cancelled...),
    :class:`StartRefused` when its start fails (the reason is recorded on it) and
    :class:`NoSenderCanSend` when it stalls (the campaign stays ``running``).
    """
    from campaigns import lifecycle
    from campaigns.service import campaign_counts, campaign_state
    from scheduler.dispatcher import Dispatcher
    from scheduler.starts import start_campaign
    from storage.types import utcnow

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

    with Dispatcher(
        engine,
        client_factory,
        workers=options.workers,
        batch_size=options.batch_size,
        lease_seconds=options.lease_seconds,
        campaign_ids=[campaign_id],
        poll_seconds=0.5,
        sender_grace_seconds=options.sender_grace_seconds,
    ) as dispatcher:
        if not options.progress:
            dispatcher.run(until_done=True, on_tick=on_tick, stop_when_stalled=True)
        else:
            _run_with_progress(engine, campaign_id, dispatcher, console, on_tick)
        why = dispatcher.stalled.get(campaign_id)
    found = campaign_state(engine, campaign_id)
    if why is not None and found is not None and found[0] == lifecycle.RUNNING:
        raise NoSenderCanSend(campaign_id, why)
    return campaign_counts(engine, campaign_id)


def _run_with_progress(
    engine: Engine,
    campaign_id: int,
    dispatcher: Dispatcher,
    console: Console,
    on_tick: Callable[[TickResult], None] | None,
) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from campaigns.service import campaign_counts

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
            bar.update(task, completed=done, detail=detail)

        dispatcher.run(until_done=True, on_tick=update, stop_when_stalled=True)
        c = campaign_counts(engine, campaign_id)
        bar.update(task, completed=sum(v for k, v in c.items() if k not in _PENDING))


def _receive_webhooks(
    stack: contextlib.ExitStack,
    engine: Engine,
    campaign_id: int,
    settings: Settings,
    console: Console,
) -> Settings:
    """Serve the HTTP app in this process and register its webhook for the senders."""
    from campaigns.instances import connected_ids, webhook_registered
    from campaigns.service import campaign_instances
    from gatecast.commands.serve import register_webhooks, with_webhook_secret
    from gatecast.runtime import make_gateway_client
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gatecast.web.webhook import install_log_redaction
    from scheduler.service import AsgiServer

    settings, _ = with_webhook_secret(settings)
    install_log_redaction()
    port = settings.port if settings.public_url else 0
    app = create_app(AppContext(settings=settings, engine=engine))
    server = stack.enter_context(AsgiServer(app, host=settings.host, port=port))
    ids = campaign_instances(engine, campaign_id) or connected_ids(engine)
    before = webhook_registered(engine, ids)  # what serve (or a user) registered
    base = settings.public_url or server.url
    with make_gateway_client(settings) as client:
        done = register_webhooks(engine, client, base, settings.webhook_secret, ids, out=console)
    serve_base = settings.public_url or f"http://{settings.host}:{settings.port}"
    if serve_base.rstrip("/") != base.rstrip("/"):  # a port of this process: give it back
        stack.callback(_restore_webhooks, engine, settings, serve_base, done, before, console)
    return settings


def _restore_webhooks(
    engine: Engine,
    settings: Settings,
    serve_base: str,
    borrowed: list[str],
    before: dict[str, bool],
    console: Console,
) -> None:
    """After a ``--webhook`` run: point each sender's webhook back at ``gatecast serve``
    (``GATECAST_PUBLIC_URL``, else ``http://GATECAST_HOST:GATECAST_PORT``) when it was
    registered before the run, else turn it off and warn that replies are not received."""
    from campaigns.instances import InstanceGone, set_webhook
    from gatecast.commands.serve import hint, register_webhooks
    from gatecast.runtime import make_gateway_client
    from gateway.errors import GatewayError
    from storage.types import utcnow

    restore = [i for i in borrowed if before.get(i)]
    disable = [i for i in borrowed if not before.get(i)]
    with make_gateway_client(settings) as client:
        if restore:
            done = register_webhooks(
                engine,
                client,
                serve_base,
                settings.webhook_secret,
                restore,
                out=Console(quiet=True),
            )
            shown = serve_base.rstrip("/") + "/webhooks/gateway/" + hint(settings.webhook_secret)
            for iid in done:
                console.print(f"webhook of {iid} restored to {shown} (gatecast serve)")
        off: list[str] = []
        for iid in disable:
            try:
                set_webhook(engine, client, iid, "", now=utcnow(), enable=False)
            except (GatewayError, InstanceGone) as exc:
                console.print(f"[yellow]webhook of {iid} not turned off:[/] {exc}")
                continue
            off.append(iid)
    if off:
        console.print(
            f"[yellow]warning:[/] the webhook of {', '.join(off)} is turned off now that this "
            "run ends: replies and STOPs are not received until `gatecast serve` runs "
            "(it registers the webhook again)"
        )


def _settle(engine: Engine, campaign_id: int, timeout: float) -> dict[str, int]:
    """Wait until the campaign's counts stop moving for 2 s (or ``timeout``)."""
    from campaigns.service import campaign_counts

    deadline = time.monotonic() + timeout
    last: dict[str, int] = {}
    stable_since = time.monotonic()
    while True:
        counts = campaign_counts(engine, campaign_id)
        if counts != last:
            last, stable_since = counts, time.monotonic()
        if time.monotonic() - stable_since >= 2.0 or time.monotonic() > deadline:
            return counts
        time.sleep(0.25)


def run_command(
    campaign_id: int,
    *,
    settings: Settings,
    options: RunOptions,
    console: Console,
) -> int:
    """The CLI body: returns the process exit code (0 when the campaign completed)."""
    from campaigns import lifecycle
    from campaigns.service import campaign_state
    from gatecast.runtime import GatewayNotConfigured, make_gateway_client, open_engine

    try:
        engine = open_engine(settings)
        make_gateway_client(settings).close()  # fail fast, naming the missing variable
    except GatewayNotConfigured as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    with contextlib.ExitStack() as stack:
        if options.webhook:
            settings = _receive_webhooks(stack, engine, campaign_id, settings, console)
        try:
            counts = run_campaign(
                engine,
                campaign_id,
                lambda: make_gateway_client(settings),
                options=options,
                console=console,
            )
        except LookupError as exc:
            console.print(f"[red]error:[/] {exc}")
            return 1
        except (lifecycle.InvalidTransition, StartRefused) as exc:
            console.print(f"[red]error:[/] cannot run: {exc}")
            return 1
        except NoSenderCanSend as exc:
            console.print(
                f"[red]campaign {campaign_id} cannot go on: no sender can send:[/] {exc.why}. "
                "Link or resume a sender (`gatecast instance status`, `gatecast instance qr "
                f"ID`, `gatecast instance resume ID`), then `gatecast campaign run {campaign_id}` "
                "again, or let `gatecast serve` send it.",
                highlight=False,
            )
            return 3
        if options.webhook:
            console.print("waiting for delivery statuses…")
            counts = _settle(engine, campaign_id, options.settle_seconds)
    final = campaign_state(engine, campaign_id)
    state, reason = final if final else ("?", None)
    summary = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
    console.print(f"campaign {campaign_id} is {state}{f' ({reason})' if reason else ''}: {summary}")
    if counts.get("unknown"):
        console.print(
            f"[yellow]{counts['unknown']} recipient(s) are 'unknown'[/] (the gateway did not say "
            f"whether the message left); `gatecast campaign retry {campaign_id} --unknown` "
            "resends them"
        )
    return 0 if state == lifecycle.COMPLETED else 1


def register_run(campaign_app: typer.Typer) -> None:
    """Add ``run`` to the ``campaign`` command group."""

    @campaign_app.command("run")
    def run_cmd(
        campaign_id: int = typer.Argument(..., help="The campaign to run."),
        workers: int = typer.Option(4, min=1, max=64, help="Parallel sends (unpaced mode)."),
        batch_size: int = typer.Option(256, min=1, max=5000, help="Rows claimed per batch."),
        lease_seconds: float = typer.Option(
            120.0,
            min=1.0,
            envvar="GATECAST_DISPATCH_LEASE_SECONDS",
            help="How long a claimed row may stay 'sending' before it counts as lost "
            "(becomes 'unknown'). Keep it above the HTTP timeout.",
        ),
        progress: bool = typer.Option(True, help="Show a live progress bar."),
        webhook: bool = typer.Option(
            False,
            help="Receive delivery statuses in this process: serve the webhook on "
            "GATECAST_HOST (a free port, or GATECAST_PORT with GATECAST_PUBLIC_URL) and "
            "register it for the campaign's senders. Without it, run `gatecast serve`.",
        ),
        settle: float = typer.Option(
            15.0, min=0.0, help="With --webhook: how long to wait for statuses at the end."
        ),
        sender_grace: float = typer.Option(
            DEFAULT_SENDER_GRACE_SECONDS,
            min=0.0,
            envvar="GATECAST_SENDER_GRACE_SECONDS",
            help="Seconds a paused sender keeps its queued recipients before they go to "
            "the campaign's other senders.",
        ),
    ) -> None:
        """Run campaign ID in the foreground until nothing is left to send.

        Exit code 0 when it completed, 1 when it ended otherwise (paused, failed), 3 when
        no sender can send its waiting recipients (it stays running for `serve`).
        """
        from gatecast.settings import get_settings

        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        code = run_command(
            campaign_id,
            settings=get_settings(),
            options=RunOptions(
                workers=workers,
                batch_size=batch_size,
                lease_seconds=lease_seconds,
                progress=progress,
                webhook=webhook,
                settle_seconds=settle,
                sender_grace_seconds=sender_grace,
            ),
            console=Console(stderr=True),
        )
        raise typer.Exit(code)


def main() -> None:
    """``python -m gatecast.commands.campaign_run ID ...`` (same as ``gatecast campaign run``)."""
    app = typer.Typer(add_completion=False)

    @app.callback()
    def _root() -> None:
        """gatecast campaign"""

    register_run(app)
    app(args=["run", *sys.argv[1:]])


if __name__ == "__main__":
    main()
