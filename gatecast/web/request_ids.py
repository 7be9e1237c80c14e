"""Request ids: every HTTP answer carries ``X-Request-Id``, problem bodies echo it as
``request_id``, and the access and error logs name it (decision 67 in
docs/architecture.md, docs/http-api.md "Request ids").

The id is the request's own ``X-Request-Id`` when it is sane (1 to 128 characters of
letters, digits and ``-_.:@+=/``: what proxies and tracing systems send, nothing that
could break a log line or a header), else a fresh one (32 hex digits). It lives in the
ASGI scope's ``state`` (``request.state.request_id``) and, for the loggers, in a context
variable set while the request is served.
"""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from gatecast.web.asgi import HttpMiddleware

HEADER = "x-request-id"
_SANE = re.compile(r"[A-Za-z0-9\-_.:@+=/]{1,128}")
#: the id of the request being served (``-`` outside a request)
current: contextvars.ContextVar[str] = contextvars.ContextVar("gatecast_request_id", default="-")
#: the loggers whose records name the request: uvicorn's access and error logs
LOGGERS = ("uvicorn.access", "uvicorn.error")


def new_id() -> str:
    """A fresh request id: 32 hex digits."""
    return uuid.uuid4().hex


def sane(value: str) -> bool:
    """Whether a given ``X-Request-Id`` is kept as the request's id."""
    return _SANE.fullmatch(value) is not None


def assign(scope: Scope) -> str:
    """The request's id (kept from its header if sane, else new), stored in the scope's
    state; calling it again for the same scope answers the same."""
    state: dict[str, Any] = scope.setdefault("state", {})
    found = state.get("request_id")
    if isinstance(found, str):
        return found
    given = ""
    for name, value in scope.get("headers") or ():
        if name == HEADER.encode():
            given = value.decode("latin-1").strip()
            break
    rid = given if given and sane(given) else new_id()
    state["request_id"] = rid
    return rid


def of_scope(scope: Scope) -> str | None:
    """The id :func:`assign` gave this request, if any."""
    state = scope.get("state") or {}
    rid = state.get("request_id")
    return rid if isinstance(rid, str) else None


def with_header(headers: list[tuple[bytes, bytes]], rid: str) -> list[tuple[bytes, bytes]]:
    """An answer's headers with ``X-Request-Id`` (replacing one a route set)."""
    kept = [(k, v) for k, v in headers if k.lower() != HEADER.encode()]
    return [*kept, (b"x-request-id", rid.encode("latin-1"))]


class RequestIds(HttpMiddleware):
    """ASGI middleware: the request's id assigned (and written back into its headers,
    so what it relays to, the intake's web process, keeps it), ``X-Request-Id`` on the
    answer, :data:`current` set while it is served."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        rid = assign(scope)
        scope["headers"] = with_header(list(scope.get("headers") or ()), rid)

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": with_header(list(message.get("headers", ())), rid)}
            await send(message)

        token = current.set(rid)
        try:
            await self.app(scope, receive, stamped)
        finally:
            current.reset(token)


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to each record and says it in the line: on uvicorn's access
    log after the client's address (``127.0.0.1:50312 request_id=... - "GET / ..."``: its
    format is uvicorn's own), on an error at the end."""

    def filter(self, record: logging.LogRecord) -> bool:
        rid = current.get()
        if getattr(record, "request_id", None) is not None:
            return True  # already said (a record passes several filters)
        record.request_id = rid
        if rid == "-":
            return True
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            record.args = (f"{args[0]} request_id={rid}", *args[1:])
        elif record.levelno >= logging.ERROR and isinstance(record.msg, str):
            record.msg = f"{record.msg} (request_id={rid})"
        return True


def install_request_id_logging(loggers: Sequence[str] = LOGGERS) -> None:
    """Add :class:`RequestIdFilter` to the loggers (idempotent)."""
    add_filter_once(loggers, RequestIdFilter)


def add_filter_once(loggers: Sequence[str], kind: type[logging.Filter]) -> None:
    """A ``kind()`` filter on each of ``loggers`` unless it has one already."""
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())


__all__ = [
    "HEADER",
    "RequestIdFilter",
    "RequestIds",
    "add_filter_once",
    "assign",
    "current",
    "install_request_id_logging",
    "new_id",
    "of_scope",
    "sane",
    "with_header",
]
