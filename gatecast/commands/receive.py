"""``gatecast receive``: the webhook receiver, the API and the dashboard, never the dispatcher.

The receiver is the process the gateway posts to; it runs apart from the dispatcher
(``gatecast worker``) so that a crash or restart of the dispatcher loses no event (gateways
post each event once). It serves the whole HTTP app, so a deployment has one public port:
the webhook, the API, the dashboard, ``/metrics`` and ``/healthz``.

A receiver started in the folder of a running one (the same state folder: the webhook
journal's) takes its listening socket over and retires it, so a rolling restart has no
gap (:mod:`gatecast.runtime.receiver_control`). ``gatecast serve`` runs the intake
(:mod:`gatecast.intake`) and ``gatecast web`` instead: the webhook apart from the rest.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from gatecast.commands.common import log_to_stderr

if TYPE_CHECKING:
    from gatecast.settings import Settings

log = logging.getLogger("gatecast.receive")
console = Console()

#: what ``receive`` prints once it serves (``serve`` and scripts wait for it)
READY_MARKER = "gatecast receiving on "


def receive(
    settings: Settings,
    *,
    host: str,
    port: int,
    stop: threading.Event | None = None,
    ready: Callable[[str], None] | None = None,
) -> int:
    """Serve the HTTP app until ``stop`` is set, SIGINT/SIGTERM, or a successor takes the
    listening socket over. Returns the exit code."""
    from rich.markup import escape

    from campaigns.import_runs import mark_interrupted_imports
    from gatecast.runtime import open_engine
    from gatecast.runtime.http_server import AsgiServer
    from gatecast.runtime.receiver_control import HandOverError, ReceiverSlot, state_folder
    from gatecast.runtime.stopping import stop_on_signals
    from gatecast.runtime.webhooks import with_webhook_secret
    from gatecast.web import auth
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gatecast.web.metrics import share_in
    from gatecast.web.webhook import install_log_redaction
    from storage.types import utcnow

    stop = stop or threading.Event()
    stop_on_signals(stop)  # first: a signal during start-up stops cleanly too
    try:
        api_key = auth.ensure_api_key(settings)
    except auth.WeakApiKey as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    settings, _ = with_webhook_secret(settings)
    engine = open_engine(settings)
    mark_interrupted_imports(engine, now=utcnow())  # imports killed with a past receiver
    install_log_redaction()
    folder = state_folder(settings, engine)
    share_in(folder)  # /metrics sums the series of every process sharing the folder
    app = create_app(AppContext(settings=settings, engine=engine, api_key=api_key.value))
    try:
        with ReceiverSlot(folder) as slot:
            listener, old = slot.listener(host, port)
            server = AsgiServer(
                app, sock=listener, forwarded_allow_ips=settings.trusted_proxies
            ).start()
            control = slot.publish(listener, server.url, on_stop=stop.set)
            if old is not None:
                old.retire()
                console.print(
                    f"took over the listening socket of the receiver at {old.info.url} "
                    f"(pid {old.info.pid}), which stops once its requests are answered",
                    highlight=False,
                    soft_wrap=True,
                )
    except (HandOverError, OSError) as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 1
    console.print(
        f"{READY_MARKER}{server.url} (webhook, API, dashboard; pid {os.getpid()})",
        highlight=False,
        soft_wrap=True,
    )
    if ready is not None:
        ready(server.url)
    while not stop.wait(0.5):
        pass
    control.close()  # no hand-over to a receiver on its way out
    why = "handed over" if control.handed_over else "stopping"
    console.print(f"receiver {os.getpid()} {why}: finishing its requests…", soft_wrap=True)
    if control.handed_over:  # the successor accepts from now on
        server.stop_accepting()
    server.stop()
    return 0


def write_ready_file(path: Path, url: str) -> None:
    """Write ``url`` to ``path`` at once (a reader never sees half of it)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(url + "\n", encoding="utf-8")
    os.replace(tmp, path)


def register(app: typer.Typer) -> None:
    """Add ``gatecast receive`` to the root app."""

    @app.command("receive")
    def receive_cmd(
        host: str | None = typer.Option(None, help="Bind address (default GATECAST_HOST)."),
        port: int | None = typer.Option(
            None, help="Port (default GATECAST_PORT; 0: any free port)."
        ),
        ready_file: Annotated[
            Path | None, typer.Option(help="Write the URL here once serving.")
        ] = None,
    ) -> None:
        """Serve the webhook receiver, API and dashboard (no dispatcher); take over from a
        receiver running in the same folder without a gap."""
        from gatecast.settings import get_settings

        settings = get_settings()
        log_to_stderr(settings.log_level)
        code = receive(
            settings,
            host=host or settings.host,
            port=settings.port if port is None else port,
            ready=(lambda url: write_ready_file(ready_file, url)) if ready_file else None,
        )
        raise typer.Exit(code)
