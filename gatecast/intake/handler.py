"""The intake's handler process: receives the gateway's webhook, and nothing else.

``python -m gatecast.intake.handler --fd N`` (started by :mod:`.supervisor`, which holds
the listening socket ``N``). It serves:

* ``POST /webhooks/gateway/{secret}``: :class:`gatecast.web.webhook.WebhookFastPath`
  (secret, allow-list, parse, guard, batcher, journal: answered once the events are
  durable);
* ``GET /healthz``: 200 when the database answers (the ping runs off the event loop),
  else 503;
* anything else: relayed to the web process (:mod:`.proxy`), 503 while it is away.

It imports no API, dashboard, upload or spreadsheet code and no template engine (a test
checks a fresh import). SIGTERM: stop accepting (the supervisor's socket keeps the
waiting connections for the next handler), answer the requests in flight, drain the
batcher, exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import select
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gatecast.intake.proxy import WebProxy
from gatecast.intake.supervisor import WEB_FILE, unix_address
from gatecast.web import metrics, webhook
from gatecast.web.context import AppContext
from gatecast.web.request_ids import RequestIds, install_request_id_logging
from storage.engine import DatabaseError, Engine, ping

log = logging.getLogger("gatecast.intake")

#: how long ``/healthz`` waits for the database's answer
HEALTH_SECONDS = 2.0
#: the ping's own thread: it never waits in the default pool behind the inbox's writes,
#: which a big body fills with batches waiting on the database's write lock (a busy
#: intake is healthy; a database that does not answer a read is not)
_HEALTH_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gatecast-healthz")


class IntakeRest:
    """Behind the webhook's fast path: the lifespan (the batcher), ``/healthz``, and the
    web process for everything else."""

    def __init__(self, app: FastAPI, engine: Engine, web: ASGIApp) -> None:
        self.app = app
        self.engine = engine
        self.web = web

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route one request (or the lifespan)."""
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
        elif scope["type"] == "http" and scope.get("path") == "/healthz":
            await self._health(send)
        else:
            await self.web(scope, receive, send)

    async def _health(self, send: Send) -> None:
        status, answer = 200, {"status": "ok"}
        try:
            loop = asyncio.get_running_loop()
            asked = loop.run_in_executor(_HEALTH_THREAD, ping, self.engine)
            await asyncio.wait_for(asked, HEALTH_SECONDS)
        except DatabaseError as exc:
            status, answer = 503, {"status": "error", "database": type(exc).__name__}
        except TimeoutError:
            status, answer = 503, {"status": "error", "database": "timeout"}
        body = json.dumps(answer, separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json")]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class CountedHere:
    """ASGI middleware: the requests this process answers itself (the webhook,
    ``/healthz``) go into the HTTP metrics by route template, as the web process counts
    its own (``gatecast.web.app``); relayed ones are counted there, not twice. Each
    request gets its id here (:mod:`gatecast.web.request_ids`), passed to the web process."""

    def __init__(self, app: webhook.WebhookFastPath) -> None:
        #: every answer with its ``X-Request-Id``, relayed ones with the same id
        self.app = RequestIds(app)
        #: the FastAPI app whose lifespan starts the inbox (``app.state``)
        self.fastapi_app = app.fastapi_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if path.startswith(webhook.PATH_PREFIX):
            route = webhook.PATH_PREFIX + "{secret}"  # never the secret itself
        elif path == "/healthz":
            route = path
        else:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        answered = 500  # what the server sends when nothing answered

        async def watch(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            seconds = time.perf_counter() - started
            metrics.observe_http(route, scope["method"], answered, seconds)


def create_intake_app(ctx: AppContext, web_address: str) -> CountedHere:
    """The intake's ASGI app: the webhook (its router: lifespan and batcher), ``/healthz``,
    and the web process at ``web_address`` for the rest."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.ctx = ctx
    install_request_id_logging()
    app.include_router(webhook.router)
    rest = IntakeRest(app, ctx.engine, WebProxy(web_address))
    return CountedHere(webhook.WebhookFastPath(rest, app))


def main(argv: list[str] | None = None) -> int:
    """Serve on the inherited socket until SIGTERM (or the supervisor is gone)."""
    parser = argparse.ArgumentParser(prog="python -m gatecast.intake.handler")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket")
    parser.add_argument("--folder", type=Path, required=True, help="the state folder")
    parser.add_argument("--ready-fd", type=int, default=None)
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--standby-fd", type=int, default=None, help="serve once told here")
    args = parser.parse_args(argv)

    from gatecast.runtime import open_engine
    from gatecast.runtime.http_server import AsgiServer
    from gatecast.runtime.stopping import stop_on_signals
    from gatecast.runtime.webhooks import with_webhook_secret
    from gatecast.settings import get_settings
    from gatecast.web.metrics import share_in

    stop = threading.Event()
    stop_on_signals(stop)
    settings = get_settings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    settings, _ = with_webhook_secret(settings)
    engine = open_engine(settings)
    webhook.install_log_redaction()
    share_in(args.folder)  # the web process's /metrics shows the intake's series too
    ctx = AppContext(settings=settings, engine=engine)
    app = create_intake_app(ctx, unix_address(args.folder, WEB_FILE))
    listener = socket.socket(fileno=args.fd)
    if args.standby_fd is not None:  # a spare: prepared, it serves once told to
        _say(args.ready_fd, b"standby\n")
        if not _told_to_serve(args.standby_fd, stop):
            return 0
    server = AsgiServer(
        app, sock=listener, forwarded_allow_ips=settings.trusted_proxies, backlog=4096
    ).start()
    _say(args.ready_fd, b"ready\n")
    if args.ready_fd is not None:
        with contextlib.suppress(OSError):
            os.close(args.ready_fd)
    log.info("intake handler %s serving on %s", os.getpid(), server.url)
    while not stop.wait(0.5):
        if args.parent_pid is not None and os.getppid() != args.parent_pid:
            log.warning("the intake's supervisor is gone: stopping")
            break
    server.stop_accepting()
    server.stop()
    return 0


def _say(fd: int | None, word: bytes) -> None:
    """Tell the supervisor (its pipe) how far this handler is."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.write(fd, word)


def _told_to_serve(fd: int, stop: threading.Event) -> bool:
    """Wait on the supervisor's pipe: True once it says go, False when it closes the pipe
    (it needs no spare any more, or it died) or a signal stops this process."""
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            return bool(os.read(fd, 16))
    return False


if __name__ == "__main__":
    raise SystemExit(main())
