"""``gatecast web``: the API, the dashboard and uploads, behind the intake.

The web process serves the HTTP app on a unix socket in the state folder
(``gatecast-web.sock``); the intake (:mod:`gatecast.intake`), which holds the public
port, relays every request that is not the gateway's webhook to it. It can crash or
restart (an upload, an upgrade) without the webhook noticing: the intake answers 503 with
``Retry-After`` for the API and the dashboard meanwhile. ``gatecast serve`` runs one as
its child; under systemd it is a service of its own (docs/deploy.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from gatecast.commands.common import log_to_stderr

if TYPE_CHECKING:
    from gatecast.settings import Settings

console = Console()

#: what ``web`` prints once it serves
READY_MARKER = "gatecast web serving on "


def unix_listener(address: str) -> socket.socket:
    """A unix socket listening at ``address`` (a stale file is replaced; owner only)."""
    if not address.startswith("\0"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(address)
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    return sock


def web(
    settings: Settings,
    *,
    stop: threading.Event | None = None,
    parent_pid: int | None = None,
    ready: Path | None = None,
) -> int:
    """Serve the HTTP app on the state folder's web socket until stopped."""
    from rich.markup import escape

    from campaigns.import_runs import mark_interrupted_imports
    from gatecast.commands.receive import write_ready_file
    from gatecast.intake.proxy import ClientFromIntake
    from gatecast.intake.supervisor import WEB_FILE, unix_address
    from gatecast.runtime import open_engine
    from gatecast.runtime.http_server import AsgiServer
    from gatecast.runtime.receiver_control import state_folder
    from gatecast.runtime.stopping import stop_on_signals
    from gatecast.runtime.webhooks import with_webhook_secret
    from gatecast.web import auth
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gatecast.web.metrics import share_in
    from gatecast.web.webhook import install_log_redaction
    from storage.types import utcnow

    stop = stop or threading.Event()
    stop_on_signals(stop)
    try:
        api_key = auth.ensure_api_key(settings)
    except auth.WeakApiKey as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    settings, _ = with_webhook_secret(settings)
    engine = open_engine(settings)
    mark_interrupted_imports(engine, now=utcnow())  # imports killed with a past web process
    install_log_redaction()
    folder = state_folder(settings, engine)
    share_in(folder)
    app = create_app(AppContext(settings=settings, engine=engine, api_key=api_key.value))
    address = unix_address(folder, WEB_FILE)
    try:
        server = AsgiServer(ClientFromIntake(app), sock=unix_listener(address)).start()
    except OSError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 1
    console.print(f"{READY_MARKER}{server.url} (API, dashboard; pid {os.getpid()})", soft_wrap=True)
    if ready is not None:
        write_ready_file(ready, server.url)
    while not stop.wait(0.5):
        if parent_pid is not None and os.getppid() != parent_pid:
            break  # its serve is gone
    server.stop()
    if not address.startswith("\0"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)
    return 0


def register(app: typer.Typer) -> None:
    """Add ``gatecast web`` to the root app."""

    @app.command("web")
    def web_cmd(
        parent_pid: Annotated[
            int | None, typer.Option(help="Stop when this process is gone (serve's child).")
        ] = None,
        ready_file: Annotated[
            Path | None, typer.Option(help="Write the address here once serving.")
        ] = None,
    ) -> None:
        """Serve the API, dashboard and uploads on the state folder's unix socket, behind
        the intake (which holds the public port and relays to it)."""
        from gatecast.settings import get_settings

        settings = get_settings()
        log_to_stderr(settings.log_level)
        raise typer.Exit(web(settings, parent_pid=parent_pid, ready=ready_file))
