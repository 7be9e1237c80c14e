"""The intake's way to the web process: every request that is not the webhook's or
``/healthz`` goes, as bytes, to the web process's unix socket (``gatecast web``).

A streaming proxy: the request body is relayed a chunk at a time as it arrives and the
answer likewise (h11 frames both sides; nothing is parsed beyond the HTTP framing, and
nothing is held but one chunk). Headers pass unchanged but the hop-by-hop ones; the
``Host`` stays. The intake's view of the client (its address, after the trusted proxies'
``X-Forwarded-For``, and its scheme) goes along in ``X-Gatecast-Client`` and
``X-Gatecast-Scheme``, which the web process applies (:class:`ClientFromIntake`); a client
cannot set them (the intake drops theirs). When the web process does not answer, the
request gets 503 with ``Retry-After``: the webhook is served all the same.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gatecast.web.problems import MEDIA_TYPE, Problem

log = logging.getLogger("gatecast.intake")

#: the headers that describe one connection, not the request (never forwarded as is)
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade"}
    | {b"transfer-encoding", b"proxy-authenticate", b"proxy-authorization"}
)
#: the client's address and scheme as the intake saw them
CLIENT_HEADER = b"x-gatecast-client"
SCHEME_HEADER = b"x-gatecast-scheme"
#: bytes read from the web process at once
CHUNK = 64 * 1024
#: the longest head (status line and headers) accepted from the web process
MAX_HEAD = 256 * 1024
#: ``Retry-After`` of the 503 while the web process is away; seconds
RETRY_AFTER_SECONDS = 5


class WebUnavailable(Exception):
    """The web process did not answer (not running, or it went away before answering)."""


class WebProxy:
    """ASGI app: relays each HTTP request to the web process at ``address``."""

    def __init__(self, address: str) -> None:
        self.address = address

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Relay one request; 503 when the web process does not answer."""
        if scope["type"] != "http":
            return
        started: list[bool] = []

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(True)
            await send(message)

        try:
            await self._relay(scope, receive, tracked)
        except (WebUnavailable, OSError, h11.ProtocolError) as exc:
            if started:  # the answer broke off half-way: close the connection
                raise
            log.warning(
                "the web process did not answer %s %s: %s", scope["method"], _path(scope), exc
            )
            await unavailable(send)

    async def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, self.address)
        except OSError as exc:
            sock.close()
            raise WebUnavailable(f"the web process does not listen ({exc.strerror})") from exc
        return sock

    async def _relay(self, scope: Scope, receive: Receive, send: Send) -> None:
        # a plain socket, not asyncio's streams: when the web process answers early (a 401
        # or 413 before the body) and closes, a stream's failed write would discard the
        # answer already received; the socket still gives it back before the error
        sock = await self._connect()
        try:
            conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
            await _send_all(sock, conn.send(_request(scope)))
            await _relay_body(conn, receive, sock)
            await _relay_answer(conn, sock, send)
        finally:
            sock.close()


async def _send_all(sock: socket.socket, data: bytes | None) -> None:
    if data:
        await asyncio.get_running_loop().sock_sendall(sock, data)


def _path(scope: Scope) -> str:
    return str(scope.get("path", ""))


def _request(scope: Scope) -> h11.Request:
    """The request line and headers for the web process."""
    chunked = False
    headers: list[tuple[bytes, bytes]] = []
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            chunked = True
        if name in HOP_BY_HOP or name in (CLIENT_HEADER, SCHEME_HEADER):
            continue
        headers.append((name, value))
    if not any(name == b"host" for name, _ in headers):
        headers.append((b"host", b"gatecast"))
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    client = scope.get("client")
    if client:
        headers.append((CLIENT_HEADER, f"{client[0]}:{client[1]}".encode("latin-1")))
    headers.append((SCHEME_HEADER, str(scope.get("scheme", "http")).encode("latin-1")))
    headers.append((b"connection", b"close"))
    target = scope.get("raw_path") or _path(scope).encode("utf-8")
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    return h11.Request(method=scope["method"], target=target, headers=headers)


async def _relay_body(conn: h11.Connection, receive: Receive, sock: socket.socket) -> None:
    """The request body, a chunk at a time (the web process may answer before reading it
    all: then the rest is dropped and its answer read)."""
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise WebUnavailable("the client went away")
            chunk: bytes = message.get("body", b"")
            if chunk:
                await _send_all(sock, conn.send(h11.Data(data=chunk)))
            if not message.get("more_body", False):
                await _send_all(sock, conn.send(h11.EndOfMessage()))
                return
    except (ConnectionResetError, BrokenPipeError):
        return  # it answered early and closed: its answer is what the client gets


async def _relay_answer(conn: h11.Connection, sock: socket.socket, send: Send) -> None:
    """The web process's answer, a chunk at a time."""
    while True:
        event = await _next_event(conn, sock)
        if isinstance(event, h11.Response):
            break
        if not isinstance(event, h11.InformationalResponse):
            raise WebUnavailable(f"no answer from the web process ({type(event).__name__})")
    headers = [(name, value) for name, value in event.headers if name not in HOP_BY_HOP]
    await send({"type": "http.response.start", "status": event.status_code, "headers": headers})
    while True:
        event = await _next_event(conn, sock)
        if isinstance(event, h11.Data):
            await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})
        elif isinstance(event, h11.EndOfMessage):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        else:
            raise WebUnavailable("the web process closed its answer half-way")


async def _next_event(conn: h11.Connection, sock: socket.socket) -> Any:
    loop = asyncio.get_running_loop()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await loop.sock_recv(sock, CHUNK)
            except ConnectionResetError:
                data = b""  # closed after its answer, with our body unread: the end
            conn.receive_data(data)
            continue
        if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
            raise WebUnavailable("the web process closed the connection")
        return event


async def unavailable(send: Send) -> None:
    """503 with ``Retry-After`` (problem details, like every other error)."""
    problem = Problem(
        503,
        "unavailable",
        "the API and dashboard are restarting; retry shortly "
        "(webhook events are received meanwhile)",
    )
    body = json.dumps(problem.body(), separators=(",", ":")).encode()
    headers = [
        (b"content-type", MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ClientFromIntake:
    """ASGI middleware of the web process: a request that came through the intake (over
    the unix socket, so from the intake alone) gets the client address and scheme the
    intake saw; the headers are removed either way."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Apply and drop the intake's client headers."""
        if scope["type"] == "http":
            client, scheme, kept = None, None, []
            for name, value in scope["headers"]:
                if name == CLIENT_HEADER:
                    client = value.decode("latin-1")
                elif name == SCHEME_HEADER:
                    scheme = value.decode("latin-1")
                else:
                    kept.append((name, value))
            scope = dict(scope, headers=kept)
            if client and not scope.get("client"):  # from the unix socket only
                host, _, port = client.rpartition(":")
                scope["client"] = (host, int(port) if port.isdigit() else 0)
                if scheme in ("http", "https"):
                    scope["scheme"] = scheme
        await self.app(scope, receive, send)
