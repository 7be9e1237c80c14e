"""The gateway webhook receiver: ``POST /webhooks/gateway/{secret}``.

* The secret path segment is compared in constant time with ``settings.webhook_secret``;
  a wrong (or unconfigured) secret answers 404 like any unknown path and changes nothing.
* Bodies go through :func:`gateway.event_parsing.parse_webhook`; a malformed body answers
  400 with the reason and changes nothing.
* Events are group-committed: an in-process batcher (an asyncio queue started and stopped
  with the app's lifespan) collects up to :data:`MAX_BATCH_EVENTS` events or
  :data:`MAX_WAIT_SECONDS`, applies them with :func:`campaigns.tracking.record_events` in a
  worker thread, and each request answers 200 only after its batch committed (a durable
  acknowledgement). Dedupe and forward-only application make duplicates harmless.
* :func:`install_log_redaction` hides the secret in uvicorn's access and error logs.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from campaigns.tracking import ApplyStats, apply_recent_pending, record_events
from gatecast.web.context import AppContext, get_ctx
from gateway.event_parsing import parse_webhook
from gateway.events import ConnectionStatus, Event, IncomingMessage, MalformedEvent, MessageStatus

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
#: idle time after which the batcher re-applies recent unmatched events (a few times)
SWEEP_AFTER_IDLE_SECONDS = 2.0
SWEEPS_AFTER_ACTIVITY = 3

_ACTIONABLE = (MessageStatus, IncomingMessage, ConnectionStatus)
_Item = tuple[list[Event], "asyncio.Future[None]"]


class EventBatcher:
    """Group-commits webhook events: many requests, one transaction per batch."""

    def __init__(
        self,
        apply: Callable[[list[Event]], ApplyStats],
        *,
        max_events: int = MAX_BATCH_EVENTS,
        max_wait: float = MAX_WAIT_SECONDS,
        sweep: Callable[[], int] | None = None,
        sweep_after: float = SWEEP_AFTER_IDLE_SECONDS,
    ) -> None:
        self._apply = apply
        self._max_events = max_events
        self._max_wait = max_wait
        self._sweep = sweep
        self._sweep_after = sweep_after
        self._sweeps_left = 0
        self._queue: asyncio.Queue[_Item | None] | None = None
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

    async def stop(self) -> None:
        """Apply what is queued, then stop the worker."""
        if self._queue is None or self._task is None:
            return
        await self._queue.put(None)
        await self._task
        self._task = None

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
            batch.append(item)
            count += len(item[0])
        return batch, False

    async def _commit(self, batch: list[_Item]) -> None:
        events = [e for evs, _ in batch for e in evs]
        try:
            await asyncio.to_thread(self._apply, events)
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
        self._sweeps_left = SWEEPS_AFTER_ACTIVITY
        for _, future in batch:
            if not future.done():
                future.set_result(None)

    async def _run_sweep(self) -> None:
        assert self._sweep is not None
        self._sweeps_left -= 1
        try:
            applied = await asyncio.to_thread(self._sweep)
        except Exception:
            log.exception("re-applying unmatched webhook events failed")
            return
        if applied:
            log.info("applied %d webhook event(s) whose send was recorded late", applied)

    async def _run(self) -> None:
        assert self._queue is not None
        stopping = False
        while not stopping:
            if self._sweep is not None and self._sweeps_left > 0:
                try:
                    first = await asyncio.wait_for(self._queue.get(), self._sweep_after)
                except TimeoutError:
                    await self._run_sweep()
                    continue
            else:
                first = await self._queue.get()
            if first is None:
                break
            batch, stopping = await self._collect(first)
            await self._commit(batch)
        # drain whatever raced in behind the stop signal
        leftover = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                leftover.append(item)
        if leftover:
            await self._commit(leftover)


def make_applier(ctx: AppContext) -> Callable[[list[Event]], ApplyStats]:
    """The function the batcher runs in its worker thread for ``ctx``."""

    def apply(events: list[Event]) -> ApplyStats:
        return record_events(
            ctx.engine,
            events,
            opt_out_keywords=ctx.settings.opt_out_keywords,
            now=ctx.clock(),
        )

    return apply


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the app's webhook batcher; stop it (after applying the queue) on shutdown."""
    ctx = app.state.ctx
    assert isinstance(ctx, AppContext)
    batcher = EventBatcher(
        make_applier(ctx), sweep=lambda: apply_recent_pending(ctx.engine, now=ctx.clock())
    )
    await batcher.start()
    app.state.webhook_batcher = batcher
    try:
        yield
    finally:
        await batcher.stop()


router = APIRouter(lifespan=lifespan)


def _not_found() -> JSONResponse:
    return JSONResponse({"detail": "Not Found"}, status_code=404)


def secret_matches(given: str, expected: str) -> bool:
    """Constant-time comparison; an unconfigured (empty) secret matches nothing."""
    if not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


@router.post(PATH_PREFIX + "{secret}", include_in_schema=False)
async def receive_gateway_event(secret: str, request: Request) -> JSONResponse:
    """Accept one webhook body; 200 once its events are committed."""
    ctx = get_ctx(request)
    if not secret_matches(secret, ctx.settings.webhook_secret.get_secret_value()):
        return _not_found()
    body = await request.body()
    try:
        events = parse_webhook(body)
    except MalformedEvent as exc:
        return JSONResponse({"detail": f"malformed event: {exc}"}, status_code=400)
    actionable: list[Event] = [e for e in events if isinstance(e, _ACTIONABLE)]
    if actionable:
        batcher = getattr(request.app.state, "webhook_batcher", None)
        try:
            if isinstance(batcher, EventBatcher) and batcher.running:
                await batcher.submit(actionable)
            else:  # app served without its lifespan: apply directly
                await asyncio.to_thread(make_applier(ctx), actionable)
        except Exception:
            return JSONResponse({"detail": "events could not be stored"}, status_code=503)
    return JSONResponse({"status": "ok", "events": len(events), "applied": len(actionable)})


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
    "MAX_BATCH_EVENTS",
    "MAX_WAIT_SECONDS",
    "EventBatcher",
    "SecretPathFilter",
    "install_log_redaction",
    "lifespan",
    "make_applier",
    "redact",
    "router",
    "secret_matches",
]
