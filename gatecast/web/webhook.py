"""The gateway webhook receiver: ``POST /webhooks/gateway/{secret}``.

* The secret path segment is compared in constant time with ``settings.webhook_secret``;
  a wrong (or unconfigured) secret answers 404 like any unknown path and changes nothing.
* Bodies go through :func:`gateway.event_parsing.parse_webhook`; a malformed body answers
  400 with the reason and changes nothing.
* Events are group-committed: an in-process batcher (an asyncio queue started and stopped
  with the app's lifespan) collects up to :data:`MAX_BATCH_EVENTS` events or
  :data:`MAX_WAIT_SECONDS` and stores them in one transaction (on the event loop for a
  SQLite file unless another writer holds the lock, else in a worker thread:
  :func:`make_inline_applier`); each request answers 200 only after its batch committed
  (a durable acknowledgement). Status events are stored unapplied
  (:func:`campaigns.tracking.store_events_in`) and applied to their deliveries by the
  inbox pass, a few hundred at once, within :data:`APPLY_LATER_SECONDS` (and on stop);
  replies, opt-outs and connection states are applied with the batch. Events a dead
  process stored but never applied are applied at the next start. Dedupe and
  forward-only application make duplicates harmless.
* :func:`install_log_redaction` hides the secret in uvicorn's access and error logs.
* :class:`WebhookFastPath` serves ``POST /webhooks/gateway/{secret}`` as a bare ASGI
  handler in front of the FastAPI stack (no routing, dependency solving or middleware:
  gateways post one event per request, so per-request overhead bounds the receiver);
  the router's route runs the same :func:`accept_body` for apps built without it.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from campaigns.tracking import (
    ApplyStats,
    apply_all_pending,
    apply_pending,
    apply_recent_pending,
    record_events_in,
    store_events_in,
)
from gatecast.web.context import AppContext, get_ctx
from gateway.event_parsing import parse_webhook
from gateway.events import ConnectionStatus, Event, IncomingMessage, MalformedEvent, MessageStatus
from storage.engine import SQLITE_BUSY_TIMEOUT_MS, is_lock_error, is_sqlite_file

log = logging.getLogger("gatecast.webhook")

PATH_PREFIX = "/webhooks/gateway/"
#: events applied in one transaction at most
MAX_BATCH_EVENTS = 500
#: how long the batcher waits for more events before committing what it has. 0: commit
#: what is queued at once; the next batch forms while this one commits (group commit).
#: Waiting idles every batch: gateways post one event per request and wait for the 200,
#: so once every open connection is queued no more can come (bench/webhooks.py: 20 ms
#: halved the throughput and doubled the median acknowledgement).
MAX_WAIT_SECONDS = 0.0
#: the inbox: status events are acknowledged once stored; their application to deliveries
#: runs when this many message ids wait, or this long after the first of them was stored
#: (applying a few hundred at once costs about half as much per event as applying each
#: small batch before its acknowledgement: bench/webhooks.py)
APPLY_LATER_EVENTS = 256
APPLY_LATER_SECONDS = 0.05
#: idle time after which the batcher re-applies recent unmatched events (a few times)
SWEEP_AFTER_IDLE_SECONDS = 2.0
SWEEPS_AFTER_ACTIVITY = 3

_ACTIONABLE = (MessageStatus, IncomingMessage, ConnectionStatus)
_Item = tuple[list[Event], "asyncio.Future[None]"]


class _ApplyNow:
    """Queued by the apply-later timer: apply the stored, unapplied events now."""


_APPLY_NOW = _ApplyNow()


class WouldBlock(Exception):
    """An inline applier found the database locked by another writer (nothing applied)."""


class EventBatcher:
    """Group-commits webhook events: many requests, one transaction per batch.

    ``apply`` runs in a worker thread. ``inline``, when given, is tried first on the event
    loop itself and must raise :class:`WouldBlock` rather than wait for a lock; then the
    batch goes to ``apply``.

    With ``apply_later`` (the inbox), ``apply`` only stores status events and returns their
    message ids in :attr:`ApplyStats.pending`; requests are answered once that commits, and
    the batcher hands the ids to ``apply_later`` (``inline_later`` first, like ``inline``)
    every :data:`APPLY_LATER_EVENTS` ids or :data:`APPLY_LATER_SECONDS`, between batches,
    and on stop. A failed pass keeps its ids for the next one. ``recover`` runs once in a
    worker thread at start (events stored but left unapplied by a previous process).
    """

    def __init__(
        self,
        apply: Callable[[list[Event]], ApplyStats],
        *,
        inline: Callable[[list[Event]], ApplyStats] | None = None,
        max_events: int = MAX_BATCH_EVENTS,
        max_wait: float = MAX_WAIT_SECONDS,
        sweep: Callable[[], int] | None = None,
        sweep_after: float = SWEEP_AFTER_IDLE_SECONDS,
        apply_later: Callable[[list[str]], int] | None = None,
        inline_later: Callable[[list[str]], int] | None = None,
        later_events: int = APPLY_LATER_EVENTS,
        later_seconds: float = APPLY_LATER_SECONDS,
        recover: Callable[[], int] | None = None,
    ) -> None:
        self._apply = apply
        self._inline = inline
        self._apply_later = apply_later
        self._inline_later = inline_later
        self._later_events = later_events
        self._later_seconds = later_seconds
        self._later: dict[str, None] = {}  # message ids stored, not yet applied (ordered)
        self._later_timer: asyncio.TimerHandle | None = None
        self._recover = recover
        self._recovering: asyncio.Task[None] | None = None
        self._max_events = max_events
        self._max_wait = max_wait
        self._sweep = sweep
        self._sweep_after = sweep_after
        self._sweeps_left = 0
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._sweeping: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[_Item | _ApplyNow | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        self.events = 0

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the worker task (on the running loop)."""
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="gatecast-webhook-batcher")
        if self._recover is not None:
            self._recovering = asyncio.create_task(self._run_recover())

    @property
    def unapplied(self) -> int:
        """Message ids stored by this batcher whose events are not applied yet."""
        return len(self._later)

    async def _run_recover(self) -> None:
        assert self._recover is not None
        try:
            applied = await asyncio.to_thread(self._recover)
            if applied:
                log.info("applied %d stored webhook event(s) left unapplied", applied)
        except Exception:
            log.exception("applying stored webhook events at start failed")

    async def stop(self) -> None:
        """Apply what is queued, then stop the worker."""
        if self._queue is None or self._task is None:
            return
        await self._queue.put(None)
        await self._task
        self._task = None
        if self._later_timer is not None:
            self._later_timer.cancel()
            self._later_timer = None
        if self._recovering is not None:
            await self._recovering
            self._recovering = None
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        if self._sweeping is not None:
            await self._sweeping

    async def submit(self, events: list[Event]) -> None:
        """Queue ``events`` and wait until the batch holding them has committed."""
        if not self.running or self._queue is None:
            raise RuntimeError("webhook batcher is not running")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._queue.put((events, future))
        await future

    async def _collect(self, first: _Item) -> tuple[list[_Item], bool]:
        assert self._queue is not None
        batch = [first]
        count = len(first[0])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_wait
        while count < self._max_events:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            if item is None:
                return batch, True
            if isinstance(item, _ApplyNow):
                continue  # due anyway: the pass runs right after this batch
            batch.append(item)
            count += len(item[0])
        return batch, False

    async def _apply_batch(self, events: list[Event]) -> ApplyStats | None:
        if self._inline is not None:
            try:
                return self._inline(events)
            except WouldBlock:
                pass  # another writer holds the database: wait for it in a thread
        return await asyncio.to_thread(self._apply, events)

    async def _commit(self, batch: list[_Item]) -> None:
        events = [e for evs, _ in batch for e in evs]
        try:
            stats = await self._apply_batch(events)
        except Exception:
            if len(batch) == 1:
                log.exception("applying %d webhook event(s) failed", len(events))
                batch[0][1].set_exception(RuntimeError("could not apply the events"))
                return
            # one bad request must not fail the others: apply each on its own
            for item in batch:
                await self._commit([item])
            return
        self.batches += 1
        self.events += len(events)
        self._arm_sweep()
        for _, future in batch:
            if not future.done():
                future.set_result(None)
        if self._apply_later is not None and isinstance(stats, ApplyStats) and stats.pending:
            self._later.update(dict.fromkeys(stats.pending))
            if len(self._later) >= self._later_events:
                await self._apply_stored()
            elif self._later_timer is None:
                loop = asyncio.get_running_loop()
                self._later_timer = loop.call_later(self._later_seconds, self._later_due)

    def _later_due(self) -> None:
        self._later_timer = None
        if self._queue is not None and self.running:
            self._queue.put_nowait(_APPLY_NOW)

    async def _apply_stored(self) -> None:
        """Apply the stored events of :attr:`_later` (the inbox pass); keep them on failure."""
        if self._later_timer is not None:
            self._later_timer.cancel()
            self._later_timer = None
        if not self._later or self._apply_later is None:
            return
        ids = list(self._later)
        try:
            if self._inline_later is not None:
                try:
                    self._inline_later(ids)
                    self._later.clear()
                    return
                except WouldBlock:
                    pass  # another writer holds the database: wait for it in a thread
            await asyncio.to_thread(self._apply_later, ids)
            self._later.clear()
        except Exception:
            log.exception("applying %d stored webhook event(s) failed; will retry", len(ids))
            if self.running:
                loop = asyncio.get_running_loop()
                self._later_timer = loop.call_later(SWEEP_AFTER_IDLE_SECONDS, self._later_due)

    def _arm_sweep(self) -> None:
        """After activity: sweep once the batcher has been idle for ``sweep_after``."""
        if self._sweep is None:
            return
        self._sweeps_left = SWEEPS_AFTER_ACTIVITY
        self._schedule_sweep()

    def _schedule_sweep(self) -> None:
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()  # a timer handle, not a task: cheap per batch
        loop = asyncio.get_running_loop()
        self._sweep_timer = loop.call_later(self._sweep_after, self._sweep_due)

    def _sweep_due(self) -> None:
        self._sweep_timer = None
        if self._sweeps_left > 0 and self._sweeping is None and self.running:
            self._sweeping = asyncio.create_task(self._run_sweep())

    async def _run_sweep(self) -> None:
        assert self._sweep is not None
        self._sweeps_left -= 1
        try:
            applied = await asyncio.to_thread(self._sweep)
            if applied:
                log.info("applied %d webhook event(s) whose send was recorded late", applied)
        except Exception:
            log.exception("re-applying unmatched webhook events failed")
        finally:
            self._sweeping = None
            if self._sweeps_left > 0 and self._sweep_timer is None and self.running:
                self._schedule_sweep()

    async def _run(self) -> None:
        assert self._queue is not None
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            if isinstance(first, _ApplyNow):
                await self._apply_stored()
                continue
            batch, stopping = await self._collect(first)
            await self._commit(batch)
        # drain whatever raced in behind the stop signal
        leftover = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None and not isinstance(item, _ApplyNow):
                leftover.append(item)
        if leftover:
            await self._commit(leftover)
        await self._apply_stored()


def make_applier(
    ctx: AppContext, *, store_only: bool = False
) -> Callable[[list[Event]], ApplyStats]:
    """The function the batcher runs in its worker thread for ``ctx``.

    ``store_only``: status events are stored, not applied (their ids in ``pending``).
    """
    record = store_events_in if store_only else record_events_in

    def apply(events: list[Event]) -> ApplyStats:
        with ctx.engine.begin() as conn:
            return record(
                conn, events, opt_out_keywords=ctx.settings.opt_out_keywords, now=ctx.clock()
            )

    return apply


def make_later_applier(ctx: AppContext) -> Callable[[list[str]], int]:
    """The inbox pass in a worker thread: apply the stored events of some message ids."""

    def apply_later(message_ids: list[str]) -> int:
        with ctx.engine.begin() as conn:
            return apply_pending(conn, message_ids, now=ctx.clock())

    return apply_later


_T = TypeVar("_T")


class InlineApplier:
    """Applies batches on the event loop over one held SQLite connection that never waits.

    SQLite work is CPU under the GIL, so a worker thread only adds hand-offs and GIL
    convoys (bench/webhooks.py: about 0.6x -> 0.8x of a bare endpoint's rate). The
    connection's busy timeout is 0: when another writer holds the lock the batch raises
    :class:`WouldBlock` at once (nothing applied) and the batcher hands it to a thread,
    so the loop never stalls. Not for PostgreSQL, whose work waits on the server: there a
    thread overlaps that wait with serving requests. ``store_only``: see
    :func:`campaigns.tracking.store_events_in`.
    """

    def __init__(self, ctx: AppContext, *, store_only: bool = False) -> None:
        self._ctx = ctx
        self._record = store_events_in if store_only else record_events_in
        self._conn: Connection | None = None

    def __call__(self, events: list[Event]) -> ApplyStats:
        """Record ``events`` in one transaction; :class:`WouldBlock` if the DB is locked."""
        keywords = self._ctx.settings.opt_out_keywords
        now = self._ctx.clock()
        return self._transaction(
            lambda conn: self._record(conn, events, opt_out_keywords=keywords, now=now)
        )

    def apply_later(self, message_ids: list[str]) -> int:
        """The inbox pass on the loop; :class:`WouldBlock` if the DB is locked."""
        now = self._ctx.clock()
        return self._transaction(lambda conn: apply_pending(conn, message_ids, now=now))

    def _transaction(self, work: Callable[[Connection], _T]) -> _T:
        conn = self._connection()
        try:
            with conn.begin():
                return work(conn)
        except OperationalError as exc:
            if is_lock_error(exc):
                raise WouldBlock from exc
            self.close()
            raise

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self._ctx.engine.connect()
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.execute("PRAGMA busy_timeout=0")  # not through SQLAlchemy: no autobegin
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Give the held connection back (with the usual busy timeout)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            raw = conn.connection.dbapi_connection
            if raw is not None:
                raw.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            conn.close()


def make_inline_applier(ctx: AppContext, *, store_only: bool = False) -> InlineApplier | None:
    """An :class:`InlineApplier` for a SQLite file database, else None (use a thread)."""
    return InlineApplier(ctx, store_only=store_only) if is_sqlite_file(ctx.engine) else None


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the app's webhook batcher (the inbox); stop it (after applying what it holds)."""
    ctx = app.state.ctx
    assert isinstance(ctx, AppContext)
    inline = make_inline_applier(ctx, store_only=True)
    batcher = EventBatcher(
        make_applier(ctx, store_only=True),
        inline=inline,
        apply_later=make_later_applier(ctx),
        inline_later=inline.apply_later if inline is not None else None,
        sweep=lambda: apply_recent_pending(ctx.engine, now=ctx.clock()),
        recover=lambda: apply_all_pending(ctx.engine, now=ctx.clock()),
    )
    await batcher.start()
    app.state.webhook_batcher = batcher
    try:
        yield
    finally:
        await batcher.stop()
        if inline is not None:
            inline.close()


router = APIRouter(lifespan=lifespan)


def _not_found() -> JSONResponse:
    return JSONResponse({"detail": "Not Found"}, status_code=404)


def secret_matches(given: str, expected: str) -> bool:
    """Constant-time comparison; an unconfigured (empty) secret matches nothing."""
    if not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


async def accept_body(app: Any, ctx: AppContext, body: bytes) -> tuple[int, dict[str, Any]]:
    """Parse and durably apply one webhook body: ``(HTTP status, JSON answer)``.

    200 once the body's events are committed (or when it holds nothing to apply), 400
    with the reason for a malformed body, 503 when the events could not be stored.
    ``app`` is the FastAPI app whose lifespan started the batcher (``app.state``).
    """
    try:
        events = parse_webhook(body)
    except MalformedEvent as exc:
        return 400, {"detail": f"malformed event: {exc}"}
    actionable: list[Event] = [e for e in events if isinstance(e, _ACTIONABLE)]
    if actionable:
        batcher = getattr(app.state, "webhook_batcher", None)
        try:
            if isinstance(batcher, EventBatcher) and batcher.running:
                await batcher.submit(actionable)
            else:  # app served without its lifespan: apply directly
                await asyncio.to_thread(make_applier(ctx), actionable)
        except Exception:
            return 503, {"detail": "events could not be stored"}
    return 200, {"status": "ok", "events": len(events), "applied": len(actionable)}


@router.post(PATH_PREFIX + "{secret}", include_in_schema=False)
async def receive_gateway_event(secret: str, request: Request) -> JSONResponse:
    """Accept one webhook body; 200 once its events are committed."""
    ctx = get_ctx(request)
    if not secret_matches(secret, ctx.settings.webhook_secret.get_secret_value()):
        return _not_found()
    status, answer = await accept_body(request.app, ctx, await request.body())
    return JSONResponse(answer, status_code=status)


#: the biggest webhook body the fast path reads (413 past it); status events are a few
#: hundred bytes, an incoming message with an inline thumbnail some kilobytes
MAX_BODY_BYTES = 16 * 1024 * 1024


class WebhookFastPath:
    """ASGI wrapper: ``POST /webhooks/gateway/{secret}`` straight to :func:`accept_body`.

    Everything else (other paths and methods, lifespan) goes to ``app`` unchanged.
    ``fastapi_app`` is the app whose ``state`` holds the context and the batcher.
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
            status, answer = await self._handle(secret, receive)
        except Exception:  # answer 500 rather than drop the connection
            log.exception("webhook request failed")
            status, answer = 500, {"detail": "Internal Server Error"}
        if status:  # 0: the client went away before its body arrived
            await _send_json(send, status, answer)

    async def _handle(self, secret: str, receive: Receive) -> tuple[int, dict[str, Any]]:
        ctx = self.fastapi_app.state.ctx
        assert isinstance(ctx, AppContext)
        if not secret_matches(secret, ctx.settings.webhook_secret.get_secret_value()):
            return 404, {"detail": "Not Found"}
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
    body = json.dumps(answer, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
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
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretPathFilter) for f in logger.filters):
            logger.addFilter(SecretPathFilter())


__all__ = [
    "APPLY_LATER_EVENTS",
    "APPLY_LATER_SECONDS",
    "MAX_BATCH_EVENTS",
    "MAX_BODY_BYTES",
    "MAX_WAIT_SECONDS",
    "EventBatcher",
    "InlineApplier",
    "SecretPathFilter",
    "WebhookFastPath",
    "WouldBlock",
    "accept_body",
    "install_log_redaction",
    "lifespan",
    "make_applier",
    "make_inline_applier",
    "make_later_applier",
    "redact",
    "router",
    "secret_matches",
]
