"""An ASGI app (the webhook receiver, API and dashboard) served by uvicorn in a thread."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the main thread keeps its own handlers
        return


class AsgiServer:
    """An ASGI app served by uvicorn in a background thread (``port=0``: a free port).

    ``forwarded_allow_ips``: the peers whose ``X-Forwarded-Proto`` and ``X-Forwarded-For``
    uvicorn applies to the request's scheme and client address (comma-separated addresses
    or networks, ``*`` for any, empty for none; None: uvicorn's default, this machine).
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        forwarded_allow_ips: str | None = None,
    ) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets whose proto
        # says TCP; without it every response waits ~40 ms on Nagle + delayed ACK.
        self._sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(1024)
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        self._server = _Server(
            uvicorn.Config(
                app,
                log_level=log_level,
                lifespan="on",
                access_log=True,
                proxy_headers=forwarded_allow_ips != "",
                forwarded_allow_ips=forwarded_allow_ips or None,
            )
        )
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, name="gatecast-http", daemon=True)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    def _serve(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._sock]))
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

    def stop(self) -> None:
        """Stop serving."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> AsgiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
