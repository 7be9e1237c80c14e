"""``gatecast serve [--sandbox]``: webhook receiver, API, dashboard, scheduler and dispatcher
in one process.

At start, every instance waiting for a scan is checked with the gateway (a scanned one
answers "already logged in" and becomes connected: gateways without connection events).
The webhook is registered with ``set_webhook`` for every connected (usable) instance at
``{public_url or this process's http://host:port}/webhooks/gateway/<secret>``
(:func:`campaigns.instances.webhook_address`; :mod:`gatecast.runtime.webhooks` says where
the secret comes from). The leader registers it again every
``GATECAST_WEBHOOK_CHECK_SECONDS`` and when an instance becomes connected
(:mod:`scheduler.webhook_keeper`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from rich.console import Console

if TYPE_CHECKING:
    from gatecast.settings import Settings

log = logging.getLogger("gatecast.serve")
console = Console()


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    sandbox: bool,
    stop: threading.Event | None = None,
    ready: Callable[[str], None] | None = None,
) -> int:
    """Run everything until ``stop`` is set (or SIGINT/SIGTERM). Returns the exit code."""
    from pydantic import SecretStr
    from rich.markup import escape

    from campaigns.import_runs import mark_interrupted_imports
    from campaigns.instances import confirm_scans, connected_ids, mark_connected
    from gatecast.runtime import (
        GatewayNotConfigured,
        embedded_sandbox,
        make_gateway_client,
        open_engine,
    )
    from gatecast.runtime.http_server import AsgiServer
    from gatecast.runtime.webhooks import (
        hint,
        register_webhooks,
        secret_file_path,
        webhook_url,
        with_webhook_secret,
    )
    from gatecast.web import auth
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gatecast.web.metrics import observe_send
    from gatecast.web.webhook import install_log_redaction
    from scheduler.service import Service, ServiceOptions
    from storage.types import utcnow

    stop = stop or threading.Event()
    try:
        api_key = auth.ensure_api_key(settings)
    except auth.WeakApiKey as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    with contextlib.ExitStack() as stack:
        if sandbox:
            sb = stack.enter_context(embedded_sandbox(status_delays=(0.2, 1.0, 3.0)))
            settings = settings.model_copy(
                update={"gateway_url": sb.url, "access_token": SecretStr(sb.access_token)}
            )
            iid = sb.create_linked_instance()
            console.print(f"sandbox gateway at {sb.url}; linked instance [bold]{iid}[/]")
        settings, created = with_webhook_secret(settings)
        if created:
            console.print(
                f"generated a webhook secret ({hint(settings.webhook_secret)}) in "
                f"{secret_file_path(settings)}"
            )
        engine = open_engine(settings)
        mark_interrupted_imports(engine, now=utcnow())  # imports killed with a past process
        if sandbox:
            mark_connected(engine, iid, now=utcnow())
        try:
            make_gateway_client(settings).close()
        except GatewayNotConfigured as exc:
            console.print(f"[red]error:[/] {exc}")
            return 2
        install_log_redaction()
        if api_key.created:
            console.print(
                f"generated an API key for the dashboard and API in {api_key.path} "
                "(read it from there; it is not printed)"
            )
        ctx = AppContext(settings=settings, engine=engine, api_key=api_key.value)
        server = stack.enter_context(
            AsgiServer(
                create_app(ctx),
                host=host,
                port=port,
                forwarded_allow_ips=settings.trusted_proxies,
            )
        )
        url = webhook_url(settings, server.url)
        if not settings.public_url.strip():
            console.print(
                f"[yellow]warning:[/] GATECAST_PUBLIC_URL is not set: the webhook is registered "
                f"at this process's own address {server.url}; when several processes serve, "
                "set GATECAST_PUBLIC_URL to the one address that reaches them",
                highlight=False,
            )
        with make_gateway_client(settings) as client:
            # gateways that post no connection event: a scanned QR shows as "already
            # logged in"; those instances are usable from now on
            linked = confirm_scans(engine, client, now=utcnow())
            if linked:
                console.print(f"linked (QR code scanned): {', '.join(linked)}")
            register_webhooks(engine, client, url, connected_ids(engine), out=console)
        service = stack.enter_context(
            Service(
                engine,
                lambda: make_gateway_client(settings),
                options=ServiceOptions(
                    sender_grace_seconds=settings.sender_grace_seconds,
                    webhook_check_seconds=settings.webhook_check_seconds,
                ),
                on_outcome=observe_send,
                instance_client=lambda: make_gateway_client(settings),
                webhook_url=url,
            )
        )
        console.print(f"gatecast serving on {server.url} (dashboard, API, webhook)")
        if ready is not None:
            ready(server.url)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(1.0):
            pass
        console.print("stopping…")
        del service
    return 0


def register(app: typer.Typer) -> None:
    """Add ``gatecast serve`` to the root app."""

    @app.command("serve")
    def serve_cmd(
        sandbox: bool = typer.Option(
            False, "--sandbox", help="Run an embedded sandbox gateway and send through it."
        ),
        host: str | None = typer.Option(None, help="Bind address (default GATECAST_HOST)."),
        port: int | None = typer.Option(None, help="Port (default GATECAST_PORT)."),
    ) -> None:
        """Serve the webhook receiver, API and dashboard, and run scheduler and dispatcher."""
        from gatecast.settings import get_settings

        settings = get_settings()
        logging.basicConfig(
            level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
        )
        code = serve(
            settings,
            host=host or settings.host,
            port=settings.port if port is None else port,
            sandbox=sandbox,
        )
        raise typer.Exit(code)
