"""``gatecast serve [--sandbox]``: webhook receiver, API, dashboard, scheduler and dispatcher
in one process.

At start, every instance waiting for a scan is checked with the gateway (a scanned one
answers "already logged in" and becomes connected: gateways without connection events).
The webhook is registered with ``set_webhook`` for every connected (usable) instance at
``{public_url or http://host:port}/webhooks/gateway/<secret>``. The secret comes from
``GATECAST_WEBHOOK_SECRET``, else from a generated owner-only file beside the SQLite
database (or in the working directory); it is never printed in full.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from pydantic import SecretStr

    from gatecast.settings import Settings
    from gateway.client import GatewayClient
    from storage.engine import Engine

log = logging.getLogger("gatecast.serve")
console = Console()

SECRET_FILE_NAME = ".gatecast-webhook-secret"  # noqa: S105  (a file name, not a secret)
WEBHOOK_PATH = "/webhooks/gateway/"


def secret_file_path(settings: Settings) -> Path:
    """Where a generated webhook secret is kept (beside the SQLite file, else the cwd)."""
    from storage.engine import sqlite_file

    database = sqlite_file(settings.database_url)
    if database is not None:
        return database.resolve().parent / SECRET_FILE_NAME
    return Path.cwd() / SECRET_FILE_NAME


def ensure_webhook_secret(settings: Settings) -> tuple[SecretStr, bool]:
    """The webhook secret and whether it was generated now (never logged in full)."""
    from pydantic import SecretStr

    configured = settings.webhook_secret.get_secret_value()
    if configured:
        return SecretStr(configured), False
    path = secret_file_path(settings)
    if path.exists():
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            return SecretStr(stored), False
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(24)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return SecretStr(path.read_text(encoding="utf-8").strip()), False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(value + "\n")
    return SecretStr(value), True


def with_webhook_secret(settings: Settings) -> tuple[Settings, bool]:
    """``settings`` with ``webhook_secret`` filled in (generated and stored if unset)."""
    secret, created = ensure_webhook_secret(settings)
    return settings.model_copy(update={"webhook_secret": secret}), created


def hint(secret: SecretStr) -> str:
    """How a secret is shown in output: never any of its characters."""
    del secret
    return "***"


def webhook_url(base_url: str, secret: SecretStr) -> str:
    """The full webhook URL (contains the secret: send it to the gateway only)."""
    return base_url.rstrip("/") + WEBHOOK_PATH + secret.get_secret_value()


def register_webhooks(
    engine: Engine,
    client: GatewayClient,
    base_url: str,
    secret: SecretStr,
    instance_ids: Sequence[str],
    *,
    out: Console | None = None,
) -> list[str]:
    """``set_webhook`` for each instance; returns those that were registered."""
    from campaigns.instances import InstanceGone, set_webhook
    from gateway.errors import GatewayError
    from storage.types import utcnow

    out = out or console
    url = webhook_url(base_url, secret)
    done: list[str] = []
    for iid in instance_ids:
        try:
            set_webhook(engine, client, iid, url, now=utcnow())
        except (GatewayError, InstanceGone) as exc:
            out.print(f"[yellow]webhook not registered for {iid}:[/] {exc}")
            continue
        done.append(iid)
    shown = base_url.rstrip("/") + WEBHOOK_PATH + hint(secret)
    if done:
        out.print(f"webhook {shown} registered for {', '.join(done)}")
    return done


@contextlib.contextmanager
def embedded_sandbox(seed: int = 0, *, auto_link: bool = True, **config: Any) -> Iterator[Any]:
    """A sandbox gateway on a free local port (for ``--sandbox`` and the demo)."""
    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread

    cfg = SandboxConfig(seed=seed, auto_link=auto_link, **config)
    with run_sandbox_in_thread(cfg) as sb:
        yield sb


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

    from campaigns.import_runs import mark_interrupted_imports
    from campaigns.instances import confirm_scans, connected_ids, mark_connected
    from gatecast.runtime import GatewayNotConfigured, make_gateway_client, open_engine
    from gatecast.web import auth
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gatecast.web.metrics import observe_send
    from gatecast.web.webhook import install_log_redaction
    from scheduler.service import AsgiServer, Service, ServiceOptions
    from storage.types import utcnow

    stop = stop or threading.Event()
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
        api_key = auth.ensure_api_key(settings)
        if api_key.created:
            console.print(
                f"generated an API key for the dashboard and API in {api_key.path} "
                "(read it from there; it is not printed)"
            )
        ctx = AppContext(settings=settings, engine=engine, api_key=api_key.value)
        server = stack.enter_context(AsgiServer(create_app(ctx), host=host, port=port))
        base = settings.public_url or server.url
        with make_gateway_client(settings) as client:
            # gateways that post no connection event: a scanned QR shows as "already
            # logged in"; those instances are usable from now on
            linked = confirm_scans(engine, client, now=utcnow())
            if linked:
                console.print(f"linked (QR code scanned): {', '.join(linked)}")
            register_webhooks(engine, client, base, settings.webhook_secret, connected_ids(engine))
        service = stack.enter_context(
            Service(
                engine,
                lambda: make_gateway_client(settings),
                options=ServiceOptions(sender_grace_seconds=settings.sender_grace_seconds),
                on_outcome=observe_send,
                instance_client=lambda: make_gateway_client(settings),
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
