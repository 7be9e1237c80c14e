"""The gateway webhook receiver: ``POST /webhooks/gateway/{secret}``.

* The secret path segment is compared in constant time with ``settings.webhook_secret``;
  a wrong (or unconfigured) secret answers 404 like any unknown path and changes nothing.
* With an allow-list of source addresses (``webhook_allowed_sources``), a request from
  any other address answers 403 and changes nothing.
* Bodies go through :func:`gateway.event_parsing.parse_webhook` (off the event loop past
  :data:`PARSE_ON_LOOP_BYTES`); a malformed body answers 400 with the reason and changes
  nothing.
* The events go to the inbox (:class:`campaigns.inbox.Inbox`, started and stopped with
  the app's lifespan): events of an instance gatecast does not hold are refused (never
  stored or applied, counted and logged; the answer is still 200, ``refused``: how many,
  as gateways neither retry nor read it); the rest are group-committed and stored, and
  each request answers 200 only once its events are durable (committed, or fsynced in the
  inbox's journal while the database is locked, full or away). Status events are applied
  to their deliveries by the inbox pass within 50 ms. A body of many events is stored a
  batch at a time, so one big body never holds the loop. When the events cannot be stored
  (the journal cannot take them either, or the instances held were never read: a cold
  start with the database away), the request answers 503 with ``Retry-After``.
* :func:`install_log_redaction` hides the secret in uvicorn's access and error logs.
* :class:`WebhookFastPath` serves ``POST /webhooks/gateway/{secret}`` as a bare ASGI
  handler in front of the FastAPI stack (no routing, dependency solving or middleware:
  gateways post one event per request, so per-request overhead bounds the receiver);
  the router's route runs the same :func:`accept_body` for apps built without it.
* The face knows no database: no dialect, no writer, no journal file (the inbox's).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from campaigns.inbox import Inbox, InboxHooks, NotStored
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.metrics import observe_refused, observe_time_to, observe_webhook_lag
from gatecast.web.problems import MEDIA_TYPE as PROBLEM_MEDIA_TYPE
from gatecast.web.problems import STATUS_CODES, Problem
from gatecast.web.request_ids import add_filter_once
from gatecast.web.webhook_guard import WebhookGuard, guard_for
from gateway.event_parsing import parse_webhook
from gateway.events import MalformedEvent

log = logging.getLogger("gatecast.webhook")

PATH_PREFIX = "/webhooks/gateway/"
#: the inbox's observations, to this process's metrics
METRICS = InboxHooks(lag=observe_webhook_lag, time_to=observe_time_to, refused=observe_refused)


def open_inbox(ctx: AppContext) -> Inbox:
    """The inbox of ``ctx``'s database, reporting to the metrics."""
    return Inbox.open(ctx.engine, ctx.settings, clock=ctx.clock, hooks=METRICS)


def inbox_for(state: Any, ctx: AppContext) -> Inbox:
    """The :class:`Inbox` kept on an app's ``state`` (made, not started, on first use)."""
    inbox = getattr(state, "inbox", None)
    if not isinstance(inbox, Inbox):
        inbox = open_inbox(ctx)
        state.inbox = inbox
    return inbox


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the app's inbox; stop it (after applying what it holds)."""
    ctx = app.state.ctx
    assert isinstance(ctx, AppContext)
    inbox = open_inbox(ctx)
    app.state.webhook_guard = WebhookGuard(ctx)
    await inbox.start()
    app.state.inbox = inbox
    app.state.webhook_batcher = inbox.batcher
    try:
        yield
    finally:
        await inbox.stop()


router = APIRouter(lifespan=lifespan)


#: ``Retry-After`` of a 503 (events not stored: the database and the journal cannot take
#: them, or the instances held are not known yet); seconds
RETRY_AFTER_SECONDS = 5
#: the answer when events cannot be stored now
_NOT_STORED: dict[str, Any] = {"detail": "events could not be stored; retry later"}
#: the answer to a wrong secret: what any unknown path answers
_NOT_FOUND: dict[str, Any] = {"detail": "Not Found"}
#: the answer to a source address outside the allow-list
_FORBIDDEN: dict[str, Any] = {"detail": "source address not allowed"}


#: bodies up to this size are parsed on the event loop (a few events: quicker than a thread)
PARSE_ON_LOOP_BYTES = 64 * 1024


def secret_matches(given: str, expected: str) -> bool:
    """Constant-time comparison; an unconfigured (empty) secret matches nothing."""
    if not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


async def accept_body(app: Any, ctx: AppContext, body: bytes) -> tuple[int, dict[str, Any]]:
    """Parse and durably apply one webhook body: ``(HTTP status, JSON answer)``.

    200 once the body's events are committed or journalled (or when it holds nothing to
    apply), 400 with the reason for a malformed body, 503 when the events could not be
    stored (the database and the journal cannot take them, or the instances held are not
    known yet: the database was away since start); a 503 carries ``Retry-After``.
    ``app`` is the FastAPI app whose lifespan started the inbox (``app.state``).
    """
    try:
        if len(body) > PARSE_ON_LOOP_BYTES:  # a big body is parsed off the event loop
            events = await asyncio.to_thread(parse_webhook, body)
        else:
            events = parse_webhook(body)
    except MalformedEvent as exc:
        return 400, {"detail": f"malformed event: {exc}"}
    try:
        taken = await inbox_for(app.state, ctx).accept(events)
    except NotStored:
        return 503, _NOT_STORED
    answer: dict[str, Any] = {"status": "ok", "events": taken.events, "applied": taken.applied}
    if taken.refused:
        answer["refused"] = taken.refused
    return 200, answer


@router.post(PATH_PREFIX + "{secret}", include_in_schema=False)
async def receive_gateway_event(secret: str, request: Request) -> JSONResponse:
    """Accept one webhook body; 200 once its events are committed."""
    ctx = get_ctx(request)
    if not secret_matches(secret, ctx.settings.webhook_secret.get_secret_value()):
        return _problem(404, _NOT_FOUND).response()
    client = request.client.host if request.client else None
    if not guard_for(request.app.state, ctx).source_allowed(client):
        return _problem(403, _FORBIDDEN).response()
    status, answer = await accept_body(request.app, ctx, await request.body())
    if status >= 400:
        return _problem(status, answer).response()
    return JSONResponse(answer, status_code=status)


def _problem(status: int, answer: dict[str, Any]) -> Problem:
    """An error answer of the webhook as problem details (like every other error); a 503
    says when to try again."""
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
    return Problem(
        status, STATUS_CODES.get(status, "error"), str(answer.get("detail", "")), headers=headers
    )


#: the biggest webhook body the fast path reads (413 past it); status events are a few
#: hundred bytes, an incoming message with an inline thumbnail some kilobytes
MAX_BODY_BYTES = 16 * 1024 * 1024


class WebhookFastPath:
    """ASGI wrapper: ``POST /webhooks/gateway/{secret}`` straight to :func:`accept_body`.

    Everything else (other paths and methods, lifespan) goes to ``app`` unchanged.
    ``fastapi_app`` is the app whose ``state`` holds the context and the inbox.
    """

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI) -> None:
        self.app = app
        self.fastapi_app = fastapi_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a webhook POST here; pass everything else on."""
        path = scope.get("path", "") if scope["type"] == "http" else ""
        secret = path[len(PATH_PREFIX) :] if path.startswith(PATH_PREFIX) else ""
        if not secret or "/" in secret or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        try:
            status, answer = await self._handle(secret, scope, receive)
        except Exception:  # answer 500 rather than drop the connection
            log.exception("webhook request failed")
            status, answer = 500, {"detail": "Internal Server Error"}
        if status:  # 0: the client went away before its body arrived
            await _send_json(send, status, answer)

    async def _handle(
        self, secret: str, scope: Scope, receive: Receive
    ) -> tuple[int, dict[str, Any]]:
        ctx = self.fastapi_app.state.ctx
        assert isinstance(ctx, AppContext)
        if not secret_matches(secret, ctx.settings.webhook_secret.get_secret_value()):
            return 404, _NOT_FOUND
        client = scope.get("client")
        if not guard_for(self.fastapi_app.state, ctx).source_allowed(client[0] if client else None):
            return 403, _FORBIDDEN
        body = await _read_body(receive, MAX_BODY_BYTES)
        if body is None:
            return 0, {}
        if len(body) > MAX_BODY_BYTES:
            return 413, {"detail": f"webhook body larger than {MAX_BODY_BYTES} bytes"}
        return await accept_body(self.fastapi_app, ctx, body)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or ``limit + 1`` bytes once past ``limit``; None on disconnect."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return bytes(limit + 1)  # the caller only looks at the length
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send_json(send: Send, status: int, answer: dict[str, Any]) -> None:
    media = b"application/json"
    extra: dict[str, str] = {}
    if status >= 400:
        problem = _problem(status, answer)
        answer, media, extra = problem.body(), PROBLEM_MEDIA_TYPE.encode(), problem.headers
    body = json.dumps(answer, separators=(",", ":")).encode()
    headers = [
        (b"content-type", media),
        (b"content-length", str(len(body)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in extra.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ------------------------------------------------------------------ log redaction
_SECRET_IN_PATH = re.compile(r"(/webhooks/gateway/)[^/?#\s\"']+")
#: uvicorn's logs, and httpx's request log (the embedded sandbox posts to the webhook)
REDACTED_LOGGERS = ("uvicorn.access", "uvicorn.error", "httpx")


def redact(text: str) -> str:
    """``text`` with the webhook secret path segment replaced by ``***``."""
    return _SECRET_IN_PATH.sub(r"\1***", text)


class SecretPathFilter(logging.Filter):
    """Replaces the webhook secret in a record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and PATH_PREFIX in record.msg:
            record.msg = redact(record.msg)
        if record.args:
            record.args = _redact_args(record.args)
        return True


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, int | float | bool) or value is None:
        return value
    text = str(value)  # e.g. an httpx.URL
    return redact(text) if PATH_PREFIX in text else value


def _redact_args(args: Any) -> Any:
    if isinstance(args, tuple):
        return tuple(_redact_value(a) for a in args)
    if isinstance(args, dict):
        return {k: _redact_value(v) for k, v in args.items()}
    return args


def install_log_redaction(loggers: Sequence[str] = REDACTED_LOGGERS) -> None:
    """Add :class:`SecretPathFilter` to uvicorn's and httpx's loggers (idempotent)."""
    add_filter_once(loggers, SecretPathFilter)


__all__ = [
    "MAX_BODY_BYTES",
    "PATH_PREFIX",
    "RETRY_AFTER_SECONDS",
    "SecretPathFilter",
    "WebhookFastPath",
    "accept_body",
    "inbox_for",
    "install_log_redaction",
    "lifespan",
    "open_inbox",
    "redact",
    "router",
    "secret_matches",
]
