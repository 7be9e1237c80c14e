"""``gatecast serve [--sandbox] [--in-process]``: the webhook intake, the API and
dashboard, and the scheduler and dispatcher.

By default ``serve`` is the worker (scheduler and dispatcher:
:mod:`gatecast.commands.worker`) and runs the rest in processes of their own:

* the intake (:mod:`gatecast.intake`): a supervisor holding the public port and a handler
  receiving the gateway's webhook, started in a session of its own, or adopted when one
  already serves the state folder (its handler is then restarted, without closing the
  socket, when the code installed now is not the one it runs). ``serve`` stays
  attached to it; when ``serve`` stops
  (SIGTERM, or a crash) the intake keeps receiving for ``GATECAST_INTAKE_LINGER``
  seconds, waiting for the next ``serve`` (0: it stops with ``serve``). Ctrl-C (SIGINT)
  and ``gatecast stop`` stop it too;
* ``gatecast web`` (API, dashboard, uploads on a unix socket the intake relays to), in
  this process's session, stopped when ``serve`` is gone, replaced when it exits;
* with ``GATECAST_WORKERS`` = N > 1, N-1 ``gatecast worker`` children (same settings;
  they stop when this process dies, and a clean stop SIGTERMs them first); the N workers
  share the senders with queued work (sender leases).

A clean stop stops the workers, then the web process, then leaves the intake.

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

    from gatecast.intake.client import Intake
    from gatecast.settings import Settings
    from scheduler.recording import SendObserved
    from storage.engine import Engine

log = logging.getLogger("gatecast.serve")
console = Console()

#: how long ``serve`` waits for its web process to serve
RECEIVER_START_SECONDS = 60.0
#: how long a clean stop waits for a child to answer its last requests
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
    signals: list[int] = []
    stop_on_signals(stop, signals)  # first: a SIGTERM during start-up stops the children too
    try:
        api_key = auth.ensure_api_key(settings)
    except auth.WeakApiKey as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    with contextlib.ExitStack() as stack:
        if sandbox:
            sb = stack.enter_context(  # in the dialect of GATECAST_GATEWAY_KIND
                embedded_sandbox(
                    status_delays=(0.2, 1.0, 3.0),
                    dialect=settings.gateway_kind,
                )
            )
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

        folder = state_folder(settings, engine)
        on_outcome: Callable[[SendObserved], None] = observe_send
        intake: Intake | None = None
        web: WebProcess | None = None
        if in_process or sandbox:
            share_in(folder, fresh=True)
            url = _serve_http_here(stack, settings, engine, api_key.value, host, port)
        else:
            from gatecast.intake.client import Intake, IntakeError

            # the series of a running intake are kept; a new set of processes starts at 0
            adopting = _intake_runs(folder)
            share_in(folder, fresh=not adopting)
            intake = Intake(folder, host, port, settings.intake_linger)
            web = WebProcess()
            web.spawn()  # it starts while the intake does (each start is mostly imports)
            try:
                url = intake.start()
            except IntakeError as exc:
                web.stop()
                console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
                return 1
            except BaseException:
                web.stop()
                raise
            # last: the intake lingers (or stops at once: linger 0); Ctrl-C stops it too
            stack.callback(_leave, intake, signals)
            if intake.adopted:
                how = "restarted on" if intake.restarted else "runs"
                console.print(
                    f"the intake at {url} (pid {intake.pid}) kept receiving; "
                    f"its handler {how} this version",
                    highlight=False,
                    soft_wrap=True,
                )
            stack.enter_context(web)  # stopped before the intake leaves
            if not web.wait_ready():
                return 1
        # the workers stop first (on a stack), then the web process, then the intake
        service = start_worker(stack, settings, engine, url, on_outcome=on_outcome)
        children = stack.enter_context(WorkerChildren(settings.workers - 1))
        console.print(f"gatecast serving on {url} (dashboard, API, webhook)")
        # where the key is, never the key: a server's output usually ends in a log
        console.print(auth.sign_in_hint(api_key, url, show_key=False), highlight=False)
        if ready is not None:
            ready(url)
        while not stop.wait(1.0):
            if intake is not None:
                intake.keep_alive()
            if web is not None:
                web.keep_alive()
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


def _intake_runs(folder: Path) -> bool:
    from gatecast.intake.supervisor import running_intake

    return running_intake(folder) is not None


def _leave(intake: Intake, signals: list[int]) -> None:
    """Detach from the intake; after Ctrl-C (SIGINT) stop it too."""
    if signal.SIGINT in signals:
        console.print("stopping the intake too (Ctrl-C)…")
        intake.stop()
    else:
        intake.detach()


class WebProcess:
    """The ``gatecast web`` child of ``serve`` (API, dashboard, uploads behind the
    intake): in this process's session, stopped when it dies (``--parent-pid``),
    replaced when it exits, SIGTERMed (and waited for) by a clean stop."""

    def __init__(self) -> None:
        self.popen: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._ready = Path()

    def start(self) -> bool:
        """Start it and wait until it serves (False: it did not start; it said why)."""
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> None:
        """Start it without waiting (``serve`` starts the intake meanwhile: each
        process's start is mostly its imports)."""
        self._tmp = tempfile.TemporaryDirectory(prefix="gatecast-web-")
        self._ready = Path(self._tmp.name) / "ready"
        argv = ["web", "--parent-pid", str(os.getpid()), "--ready-file", str(self._ready)]
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "gatecast", *argv], stdin=subprocess.DEVNULL
        )

    def wait_ready(self) -> bool:
        """Wait until the process :meth:`spawn` started serves (False: it did not start;
        it said why)."""
        assert self.popen is not None and self._tmp is not None
        try:
            deadline = time.monotonic() + RECEIVER_START_SECONDS
            while time.monotonic() < deadline and self.popen.poll() is None:
                if self._ready.exists():
                    return True
                time.sleep(0.05)
        finally:
            self._tmp.cleanup()
            self._tmp = None
        console.print("[red]error:[/] the web process did not start (see above)")
        self.stop()
        return False

    def keep_alive(self) -> None:
        """Start a new web process when this one exited."""
        if self.popen is None or self.popen.poll() is None:
            return
        console.print(
            f"[yellow]warning:[/] the web process exited ({self.popen.returncode}); "
            "starting a new one (the API and dashboard answer 503 meanwhile)",
            highlight=False,
            soft_wrap=True,
        )
        self.start()

    def stop(self) -> None:
        """SIGTERM it (if still running) and wait for it to finish its requests."""
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(RECEIVER_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("the web process did not stop in %s s; killed", RECEIVER_STOP_SECONDS)
            self.popen.kill()
            self.popen.wait(10)

    def __enter__(self) -> WebProcess:
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
            help="Serve HTTP in this process too, instead of the intake and web processes.",
        ),
    ) -> None:
        """Run the scheduler and dispatcher, with the intake receiving the webhook on the
        public port (it outlives this process: see `gatecast stop`) and a `gatecast web`
        child serving the API and dashboard behind it."""
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
