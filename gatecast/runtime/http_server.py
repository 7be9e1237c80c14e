"""An ASGI app (the webhook receiver, API and dashboard) served by uvicorn in a thread."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the main thread keeps its own handlers
        return


#: uvicorn's event loop and HTTP parser: "auto" takes uvloop and httptools (dependencies;
#: bench/webhooks.py: about a third less server CPU per webhook event than asyncio + h11)
LOOP = "auto"
HTTP = "auto"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port=0``: a free port) and listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets whose proto
    # says TCP; without it every response waits ~40 ms on Nagle + delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def proxy_options(trusted_proxies: str) -> dict[str, Any]:
    """uvicorn's options that believe forwarded headers from ``trusted_proxies`` only
    (``GATECAST_TRUSTED_PROXIES``; empty: from nobody, not uvicorn's default of this
    machine)."""
    trusted = trusted_proxies.strip()
    return {"proxy_headers": bool(trusted), "forwarded_allow_ips": trusted or ""}


def _access_log_wanted() -> bool:
    """``GATECAST_ACCESS_LOG``: a line per request (each with its request id,
    :mod:`gatecast.web.request_ids`), whatever ``log_level`` the server was given."""
    from gatecast.settings import get_settings

    try:
        return bool(get_settings().access_log)
    except ValueError:  # settings the process could not read: as before
        return False


class AsgiServer:
    """An ASGI app served by uvicorn in a background thread (``port=0``: a free port).

    ``sock``: serve on this listening socket instead of binding ``host:port`` (a socket
    handed over by another receiver: :mod:`gatecast.runtime.receiver_control`); it is
    closed on stop, which leaves the kernel socket to any other process holding it; a
    unix socket too (the web process behind the intake). ``backlog``: the accept queue
    (uvicorn sets it on the socket, a given one too).

    ``forwarded_allow_ips``: the peers whose ``X-Forwarded-Proto`` and ``X-Forwarded-For``
    uvicorn applies to the request's scheme and client address (comma-separated addresses
    or networks, ``*`` for any; empty, the default: none, whoever sends them). Pass
    ``GATECAST_TRUSTED_PROXIES``: uvicorn's own default trusts this machine, so any local
    process could claim another client address (:func:`proxy_options`).
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        forwarded_allow_ips: str = "",
        sock: socket.socket | None = None,
        backlog: int = 2048,
    ) -> None:
        self._sock = sock if sock is not None else listening_socket(host, port)
        address = self._sock.getsockname()
        if self._sock.family == socket.AF_UNIX:  # the web process behind the intake
            self.host, self.port = str(address), 0
        else:
            self.host = str(address[0]) if sock is not None else host
            self.port = int(address[1])
        self._server = _Server(
            uvicorn.Config(
                app,
                log_level=log_level,
                lifespan="on",
                loop=LOOP,
                http=HTTP,
                access_log=True,
                **proxy_options(forwarded_allow_ips),
                backlog=backlog,
            )
        )
        if _access_log_wanted():  # after uvicorn set its loggers' levels from log_level
            logging.getLogger("uvicorn.access").setLevel(logging.INFO)
        self._errors: list[BaseException] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, name="gatecast-http", daemon=True)

    @property
    def url(self) -> str:
        """``http://host:port`` (``unix:PATH`` on a unix socket)."""
        if self._sock.family == socket.AF_UNIX:
            return f"unix:{self.host}"
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    def _serve(self) -> None:
        try:
            with asyncio.Runner(loop_factory=self._server.config.get_loop_factory()) as runner:
                self._loop = runner.get_loop()
                runner.run(self._server.serve(sockets=[self._sock]))
        except BaseException as exc:  # reported by start()
            self._errors.append(exc)

    def start(self) -> AsgiServer:
        """Start serving and wait until uvicorn is ready."""
        self._thread.start()
        while not self._server.started:
            if self._errors or not self._thread.is_alive():
                raise RuntimeError(f"HTTP server failed to start: {self._errors[:1]!r}")
            self._thread.join(0.01)
        return self

    def stop_accepting(self, grace: float = 1.0) -> None:
        """Accept no more connections (the socket stays open for any other process that
        holds it: a successor accepts them), then give the connections just accepted
        ``grace`` seconds to send their request, which :meth:`stop` then answers (uvicorn
        closes a connection that has sent nothing yet at once)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for server in list(self._server.servers):
            loop.call_soon_threadsafe(server.close)
        time.sleep(grace)

    def stop(self) -> None:
        """Stop serving."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> AsgiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
