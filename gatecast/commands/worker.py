"""``gatecast worker``: the scheduler and the dispatcher, no HTTP.

A worker sends; the webhook receiver (``gatecast receive``) receives. At start, every
instance waiting for a scan is checked with the gateway, concurrently like the webhooks
below (a scanned one answers "already logged in" and becomes connected: gateways without
connection events), and the webhook is
registered for every connected (usable) instance, concurrently
(``GATECAST_WEBHOOK_REGISTER_CONCURRENCY``) and while the dispatcher already sends, at the
deployment's URL
(:func:`campaigns.instances.webhook_address`: ``GATECAST_PUBLIC_URL``, else the address of
the receiver running in this folder, else ``http://GATECAST_HOST:GATECAST_PORT``). The
leader registers it again every ``GATECAST_WEBHOOK_CHECK_SECONDS`` and when an instance
becomes connected (:mod:`scheduler.webhook_keeper`).

Several workers share the senders with queued work: each leases its fair share
(``GATECAST_SENDER_LEASE_SECONDS``: :mod:`scheduler.sender_leases`) and claims only for
those; on PostgreSQL they wake on new work (``LISTEN``) instead of at their next poll.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from gatecast.commands.common import log_to_stderr

if TYPE_CHECKING:
    from gatecast.settings import Settings
    from scheduler.recording import SendObserved
    from scheduler.service import Service
    from storage.engine import Engine

log = logging.getLogger("gatecast.worker")
console = Console()


def start_worker(
    stack: contextlib.ExitStack,
    settings: Settings,
    engine: Engine,
    own_address: str,
    *,
    on_outcome: Callable[[SendObserved], None] | None = None,
) -> Service:
    """Confirm scans and start the scheduler and dispatcher (stopped when ``stack``
    closes), which register the webhook for every linked sender as they start, without
    holding dispatch back. ``settings`` hold the webhook secret; ``own_address``
    is the receiver's ``http://host:port``, used when ``GATECAST_PUBLIC_URL`` is unset."""
    from campaigns.instances import confirm_scans
    from gatecast.runtime import make_gateway_client
    from gatecast.runtime.webhooks import report_registrations, webhook_url
    from scheduler.service import Service, ServiceOptions
    from storage.types import utcnow

    url = webhook_url(settings, own_address)
    if not settings.public_url.strip():
        console.print(
            f"[yellow]warning:[/] GATECAST_PUBLIC_URL is not set: the webhook is registered "
            f"at the receiver's own address {own_address}; when several processes serve, "
            "set GATECAST_PUBLIC_URL to the one address that reaches them",
            highlight=False,
            soft_wrap=True,
        )
    with make_gateway_client(settings) as client:
        # gateways that post no connection event: a scanned QR shows as "already
        # logged in"; those instances are usable from now on
        linked = confirm_scans(
            engine, client, now=utcnow(), concurrency=settings.webhook_register_concurrency
        )
        if linked:
            console.print(f"linked (QR code scanned): {', '.join(linked)}")
    # the webhook of every linked sender is registered by the service as it starts,
    # beside the dispatcher (docs/architecture.md: "start-up registers the webhooks
    # beside dispatch"): a summary line, and each failure by sender, when done
    return stack.enter_context(
        Service(
            engine,
            lambda: make_gateway_client(settings),
            options=ServiceOptions(
                sender_grace_seconds=settings.sender_grace_seconds,
                webhook_check_seconds=settings.webhook_check_seconds,
                event_retention_days=settings.event_retention_days,
                send_concurrency=settings.send_concurrency,
                lease_seconds=settings.dispatch_lease_seconds,
                sender_lease_seconds=settings.sender_lease_seconds,
                webhook_register_concurrency=settings.webhook_register_concurrency,
                register_webhooks_at_start=True,
            ),
            on_outcome=on_outcome,
            instance_client=lambda: make_gateway_client(settings),
            webhook_url=url,
            on_webhooks_registered=lambda done: report_registrations(url, done, console),
        )
    )


def prepare_worker(settings: Settings) -> tuple[Settings, Engine] | int:
    """The settings with the webhook secret and the engine a worker runs on, or the exit
    code when it cannot run (no gateway configured)."""
    from campaigns.import_runs import mark_interrupted_imports
    from gatecast.runtime import GatewayNotConfigured, make_gateway_client, open_engine
    from gatecast.runtime.webhooks import hint, secret_file_path, with_webhook_secret
    from storage.types import utcnow

    settings, created = with_webhook_secret(settings)
    if created:
        console.print(
            f"generated a webhook secret ({hint(settings.webhook_secret)}) in "
            f"{secret_file_path(settings)}"
        )
    engine = open_engine(settings)
    mark_interrupted_imports(engine, now=utcnow())  # imports killed with a past process
    try:
        make_gateway_client(settings).close()
    except GatewayNotConfigured as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    return settings, engine


def work(
    settings: Settings, *, stop: threading.Event | None = None, parent_pid: int | None = None
) -> int:
    """Run the scheduler and dispatcher until ``stop`` is set (or SIGINT/SIGTERM; with
    ``parent_pid``, also when this process's parent is no longer that process)."""
    from gatecast.runtime.receiver_control import running_receiver, state_folder
    from gatecast.runtime.stopping import stop_on_signals

    stop = stop or threading.Event()
    stop_on_signals(stop)  # first: a signal during start-up stops cleanly too
    prepared = prepare_worker(settings)
    if isinstance(prepared, int):
        return prepared
    settings, engine = prepared
    from gatecast.web.metrics import observe_send, share_in

    folder = state_folder(settings, engine)
    share_in(folder)  # the receiver's /metrics shows this worker's sends too
    receiver = running_receiver(folder)
    shown = f"[{settings.host}]" if ":" in settings.host else settings.host
    own_address = receiver.url if receiver else f"http://{shown}:{settings.port}"
    with contextlib.ExitStack() as stack:
        start_worker(stack, settings, engine, own_address, on_outcome=observe_send)
        console.print("gatecast worker running (scheduler and dispatcher; no HTTP)")
        while not stop.wait(1.0):
            if parent_pid is not None and os.getppid() != parent_pid:
                console.print("the parent process is gone")
                break
        console.print("stopping…")
    return 0


def register(app: typer.Typer) -> None:
    """Add ``gatecast worker`` to the root app."""

    @app.command("worker")
    def worker_cmd(
        parent_pid: int | None = typer.Option(
            None, "--parent-pid", hidden=True, help="Stop when this parent process is gone."
        ),
    ) -> None:
        """Run the scheduler and dispatcher only (no HTTP: `gatecast receive` receives).
        Several workers share the senders with queued work between them."""
        from gatecast.settings import get_settings

        settings = get_settings()
        log_to_stderr(settings.log_level)
        raise typer.Exit(work(settings, parent_pid=parent_pid))
