"""``gatecast serve [--sandbox] [--in-process]``: the webhook receiver, API and dashboard,
and the scheduler and dispatcher.

By default the HTTP app runs in a child process, ``gatecast receive`` (same host, port and
settings), started in a session of its own, and this process is the worker (scheduler
and dispatcher: :mod:`gatecast.commands.worker`). The receiver outlives a crash of this
process (SIGKILL, out of memory): the gateway's posts are still received and stored while
the worker is down, and the next ``serve`` takes the running receiver's listening socket
over (no second bind, no gap: :mod:`gatecast.runtime.receiver_control`). A clean stop
(SIGTERM, SIGINT, Ctrl-C) stops the worker, then the receiver it started (unless another
receiver has taken over since: that one keeps serving). When the receiver dies and no
other serves the folder, ``serve`` starts a new one.

With ``GATECAST_WORKERS`` = N > 1, this process also starts N-1 ``gatecast worker``
children (same settings; they stop when this process dies, and a clean stop SIGTERMs
them first); the N workers share the senders with queued work (sender leases).

``--in-process`` (implied by ``--sandbox``, whose gateway lives in this process) serves
the HTTP app in a thread of this process, as one process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from gatecast.commands.common import log_to_stderr

if TYPE_CHECKING:
    from pydantic import SecretStr

    from gatecast.settings import Settings
    from scheduler.recording import SendObserved
    from storage.engine import Engine

log = logging.getLogger("gatecast.serve")
console = Console()

#: how long ``serve`` waits for its receiver to serve
RECEIVER_START_SECONDS = 60.0
#: how long a clean stop waits for the receiver to answer its last requests
RECEIVER_STOP_SECONDS = 60.0


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    sandbox: bool,
    in_process: bool = False,
    stop: threading.Event | None = None,
    ready: Callable[[str], None] | None = None,
) -> int:
    """Run everything until ``stop`` is set (or SIGINT/SIGTERM). Returns the exit code."""
    from pydantic import SecretStr
    from rich.markup import escape

    from campaigns.instances import WarmupChange, mark_connected, set_warmup
    from gatecast.commands.worker import prepare_worker, start_worker
    from gatecast.runtime import embedded_sandbox
    from gatecast.runtime.stopping import stop_on_signals
    from gatecast.web import auth
    from storage.types import utcnow

    stop = stop or threading.Event()
    stop_on_signals(stop)  # first: a SIGTERM during start-up stops the children too
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
        prepared = prepare_worker(settings)
        if isinstance(prepared, int):
            return prepared
        settings, engine = prepared
        if sandbox:
            mark_connected(engine, iid, now=utcnow())
            # the embedded sandbox is a gateway we own: its number needs no warm-up
            set_warmup(engine, iid, WarmupChange(off=True), now=utcnow())
        if api_key.created:
            console.print(
                f"generated an API key for the dashboard and API in {api_key.path} "
                "(read it from there; it is not printed)"
            )
        from gatecast.runtime.receiver_control import state_folder
        from gatecast.web.metrics import observe_send, share_in

        # every process started here keeps its in-process series in the state folder,
        # where the receiver's /metrics reads them (emptied: a new set of processes)
        share_in(state_folder(settings, engine), fresh=True)
        on_outcome: Callable[[SendObserved], None] = observe_send
        receiver: ReceiverProcess | None = None
        if in_process or sandbox:
            url = _serve_http_here(stack, settings, engine, api_key.value, host, port)
        else:
            receiver = stack.enter_context(ReceiverProcess(settings, engine, host, port))
            url = receiver.start()
            if not url:
                return 1
        # the workers stop first (on a stack), then the receiver answers what is left
        service = start_worker(stack, settings, engine, url, on_outcome=on_outcome)
        children = stack.enter_context(WorkerChildren(settings.workers - 1))
        console.print(f"gatecast serving on {url} (dashboard, API, webhook)")
        if ready is not None:
            ready(url)
        while not stop.wait(1.0):
            if receiver is not None:
                receiver.keep_alive()
            children.keep_alive()
        console.print("stopping…")
        del service
    return 0


def _serve_http_here(
    stack: contextlib.ExitStack,
    settings: Settings,
    engine: Engine,
    api_key: SecretStr,
    host: str,
    port: int,
) -> str:
    """Serve the HTTP app in a thread of this process (``--in-process``); its URL."""
    from gatecast.runtime.http_server import AsgiServer
    from gatecast.web.app import create_app
    from gatecast.web.context import AppContext
    from gatecast.web.webhook import install_log_redaction

    install_log_redaction()
    ctx = AppContext(settings=settings, engine=engine, api_key=api_key)
    server = stack.enter_context(
        AsgiServer(
            create_app(ctx), host=host, port=port, forwarded_allow_ips=settings.trusted_proxies
        )
    )
    return server.url


class ReceiverProcess:
    """The ``gatecast receive`` child of ``serve``: started in a session of its own (a
    crash of ``serve`` leaves it serving), restarted when it dies and no other receiver
    serves the folder, stopped (SIGTERM) by a clean stop of ``serve``."""

    def __init__(self, settings: Settings, engine: Engine, host: str, port: int) -> None:
        from gatecast.runtime.receiver_control import state_folder

        self.folder = state_folder(settings, engine)
        self.host = host
        self.port = port
        self.url = ""
        self.popen: subprocess.Popen[bytes] | None = None
        self._checked = 0.0

    def start(self) -> str:
        """Start the receiver and wait until it serves; its URL ('' when it did not start:
        what it printed says why)."""
        with tempfile.TemporaryDirectory(prefix="gatecast-receiver-") as tmp:
            ready = Path(tmp) / "ready"
            argv = ["receive", "--host", self.host, "--port", str(self.port)]
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "gatecast", *argv, "--ready-file", str(ready)],
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # not stopped with this process or its terminal
            )
            deadline = time.monotonic() + RECEIVER_START_SECONDS
            while time.monotonic() < deadline and self.popen.poll() is None:
                if ready.exists():
                    self.url = ready.read_text(encoding="utf-8").strip()
                    return self.url
                time.sleep(0.05)
        console.print("[red]error:[/] the receiver process did not start (see above)")
        self.stop()
        return ""

    def keep_alive(self) -> None:
        """Start a new receiver when this one died and no other serves the folder."""
        from gatecast.runtime.receiver_control import running_receiver

        if self.popen is None or self.popen.poll() is None:
            return
        now = time.monotonic()
        if now - self._checked < 5.0:
            return
        self._checked = now
        if running_receiver(self.folder) is not None:
            return  # another receiver took over (a rolling restart): it serves
        console.print(
            f"[yellow]warning:[/] the receiver process exited ({self.popen.returncode}); "
            "starting a new one",
            highlight=False,
            soft_wrap=True,
        )
        self.port = self.port or _port_of(self.url)
        self.start()

    def stop(self) -> None:
        """SIGTERM the receiver (if still running) and wait for it to finish its requests."""
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(RECEIVER_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("the receiver did not stop in %s s; killed", RECEIVER_STOP_SECONDS)
            self.popen.kill()
            self.popen.wait(10)

    def __enter__(self) -> ReceiverProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class WorkerChildren:
    """The ``gatecast worker`` children of ``serve`` (``GATECAST_WORKERS`` - 1): in this
    process's session, told to stop when it dies (``--parent-pid``), replaced when
    one exits, SIGTERMed (and waited for) by a clean stop."""

    def __init__(self, count: int) -> None:
        self.popens: list[subprocess.Popen[bytes]] = [self._start() for _ in range(count)]

    @staticmethod
    def _start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "gatecast", "worker", "--parent-pid", str(os.getpid())],
            stdin=subprocess.DEVNULL,
        )

    def keep_alive(self) -> None:
        """Start a new worker for each child that exited."""
        for i, popen in enumerate(self.popens):
            if popen.poll() is not None:
                console.print(
                    f"[yellow]warning:[/] worker process {popen.pid} exited "
                    f"({popen.returncode}); starting a new one",
                    highlight=False,
                    soft_wrap=True,
                )
                self.popens[i] = self._start()

    def stop(self) -> None:
        """SIGTERM every child, then wait for each to stop (killed after a minute)."""
        for popen in self.popens:
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        for popen in self.popens:
            try:
                popen.wait(RECEIVER_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                log.warning(
                    "worker %s did not stop in %s s; killed", popen.pid, RECEIVER_STOP_SECONDS
                )
                popen.kill()
                popen.wait(10)
        self.popens = []

    def __enter__(self) -> WorkerChildren:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _port_of(url: str) -> int:
    """The port of ``http://host:port``."""
    return int(url.rsplit(":", 1)[1]) if url else 0


def register(app: typer.Typer) -> None:
    """Add ``gatecast serve`` to the root app."""

    @app.command("serve")
    def serve_cmd(
        sandbox: bool = typer.Option(
            False, "--sandbox", help="Run an embedded sandbox gateway and send through it."
        ),
        host: str | None = typer.Option(None, help="Bind address (default GATECAST_HOST)."),
        port: int | None = typer.Option(None, help="Port (default GATECAST_PORT)."),
        in_process: bool = typer.Option(
            False,
            "--in-process",
            help="Serve HTTP in this process too, instead of a `gatecast receive` child.",
        ),
    ) -> None:
        """Run the scheduler and dispatcher, with a `gatecast receive` child process serving
        the webhook receiver, API and dashboard (it outlives a crash of this process)."""
        from gatecast.settings import get_settings

        settings = get_settings()
        log_to_stderr(settings.log_level)
        code = serve(
            settings,
            host=host or settings.host,
            port=settings.port if port is None else port,
            sandbox=sandbox,
            in_process=in_process,
        )
        raise typer.Exit(code)
