"""Sending: claimed rows to the gateway on thread pools, one client per thread.

DESIGN.md measured one shared AsyncClient as slow, so every pool thread makes its own
sync client (``client_factory``). Opted-out contacts, and contacts another campaign
messaged within the campaign's contact cooldown (``campaigns.cooldown``), are skipped
before any send.

Two pools: ``workers`` threads for unpaced batches (the tick waits for them), and, with
``concurrency`` > 0, up to ``concurrency`` threads for paced sends the tick does not wait
for (:meth:`SendPool.submit` with ``background=True``): a sender's send waits on a slow
gateway in its own thread while the ticks go on claiming other senders' rows. The
dispatcher never has more background sends in flight than ``concurrency``, so none of
them queues behind another (a claimed row's lease runs from its claim).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import Connection, Engine

from campaigns.cooldown import cooldown_error, cooled_contacts
from campaigns.delivery_lifecycle import NOT_ON_APP_ERROR, OPTED_OUT_ERROR
from gateway.messages import Message
from gateway.outcomes import OutcomeKind, SendOutcome
from scheduler.claiming import Job
from scheduler.clock import Clock
from scheduler.number_checks import NumberChecks, capabilities_of
from scheduler.pacing import typing_seconds
from storage.queries import deliveries as dq

log = logging.getLogger("gatecast.dispatch")

#: a job and the future of its send (None: sent inline, or not sent at all)
Submitted = list[tuple[Job, Future[SendOutcome] | None]]


class SupportsSend(Protocol):
    """What the dispatcher needs of a gateway client (``gateway.client.GatewayClient``)."""

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        """Send one message; never raises for network problems."""
        ...


class SendThreads:
    """``count`` threads, started at once, that run sends from one queue.

    The background pool: unlike ``ThreadPoolExecutor`` (which starts a thread when no
    thread looks idle, and takes a lock per submit to know) a submit here is a queue put,
    so the dispatch thread, which submits, never waits for the sending threads.
    """

    def __init__(self, count: int, send: Callable[[Job], SendOutcome]) -> None:
        self._send = send
        self._queue: queue.SimpleQueue[tuple[Job, Future[SendOutcome]] | None]
        self._queue = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"gatecast-paced-{i}", daemon=True)
            for i in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> Future[SendOutcome]:
        """Queue ``job``'s send; its future."""
        future: Future[SendOutcome] = Future()
        self._queue.put((job, future))
        return future

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._send(job))
            except BaseException as exc:  # send_one catches everything; kept for the waiter
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Let the queued sends finish, then stop the threads."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()


@dataclass(eq=False)
class SendPool:
    """Starts and collects sends; owns the thread pool and the clients it made."""

    engine: Engine
    client_factory: Callable[[], SupportsSend]
    clock: Clock
    workers: int
    #: most paced sends waiting on the gateway at once (0: paced sends are made in the tick)
    concurrency: int = 0
    _local: threading.local = field(default_factory=threading.local, init=False)
    _all_clients: list[SupportsSend] = field(default_factory=list, init=False)
    _clients_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False)
    _background: SendThreads | None = field(default=None, init=False)
    #: the number check before a first message (scheduler/number_checks.py)
    checks: NumberChecks = field(init=False)

    def __post_init__(self) -> None:
        self.checks = NumberChecks(self.engine, self.clock, self._client)

    def _client(self) -> SupportsSend:
        client: SupportsSend | None = getattr(self._local, "client", None)
        if client is None:
            client = self.client_factory()
            self._local.client = client
            with self._clients_lock:
                self._all_clients.append(client)
        return client

    def send_one(self, job: Job) -> SendOutcome:
        """Send one row; ``job.answered_at`` becomes the moment its answer came back."""
        assert job.message is not None and job.row.sender is not None
        client = self._client()
        self._type_first(client, job)
        started = time.monotonic()
        try:
            return client.send(job.row.sender, job.row.target, job.message)
        except ValueError as exc:  # the client refused the input before any I/O
            return SendOutcome(OutcomeKind.PERMANENT, reason=f"invalid request: {exc}")
        except Exception as exc:  # unexpected: the request may have gone out
            log.exception("send to row %s raised", job.row.id)
            return SendOutcome(OutcomeKind.AMBIGUOUS, reason=f"send raised {type(exc).__name__}")
        finally:
            job.answered_at = self.clock.now()
            job.send_seconds = time.monotonic() - started

    @staticmethod
    def _type_first(client: SupportsSend, job: Job) -> None:
        """Typing presence before a one-to-one send when the campaign asks for it and the
        gateway has it (``[pace] typing``), inside the gap the slot already reserved:
        the pace's next slot counts from the claim, not from the send."""
        if not job.policy.pace.typing or job.row.contact_id is None or job.row.sender is None:
            return
        if not capabilities_of(client).typing:
            return
        words = getattr(job.message, "text", None) or getattr(job.message, "caption", None)
        seconds = typing_seconds(job.policy.pace, len(words) if isinstance(words, str) else 0)
        if seconds > 0:
            show = getattr(client, "show_typing", None)
            if callable(show) and not show(job.row.sender, job.row.target, seconds):
                log.info("typing before row %s was not shown; sending anyway", job.row.id)

    def _cooled(self, conn: Connection, jobs: list[Job]) -> set[int]:
        """The ids of the rows among ``jobs`` whose contact is in its campaign's cooldown
        (messaged by another campaign since the start: ``campaigns.cooldown``)."""
        by_hours: dict[float, list[Job]] = {}
        for job in jobs:
            if job.row.contact_id is not None and job.policy.cooldown_hours > 0:
                by_hours.setdefault(job.policy.cooldown_hours, []).append(job)
        out: set[int] = set()
        now = self.clock.now()
        for hours, group in by_hours.items():
            ids = [j.row.contact_id for j in group if j.row.contact_id is not None]
            messaged = cooled_contacts(conn, ids, hours, now=now)
            out.update(j.row.id for j in group if j.row.contact_id in messaged)
        return out

    def submit(self, jobs: list[Job], *, background: bool = False) -> Submitted:
        """Skip opted-out contacts and those in their cooldown, and start the sends (on the
        pool when it pays off; ``background``: each on the background pool, which the
        caller keeps at most ``concurrency`` deep)."""
        ids = [j.row.contact_id for j in jobs if j.row.contact_id is not None]
        with self.engine.connect() as conn:
            opted_out = dq.opted_out_contact_ids(conn, ids)
            cooled = self._cooled(conn, jobs)
        absent = self.checks.screen(
            self._client(),
            (
                (j.row.id, j.row.target, j.row.sender)
                for j in jobs
                if j.row.contact_id is not None and j.message is not None
            ),
        )
        out: Submitted = []
        for job in jobs:
            if job.row.contact_id is not None and job.row.contact_id in opted_out:
                job.error = OPTED_OUT_ERROR
                out.append((job, None))
            elif job.row.id in cooled:
                job.error = cooldown_error(job.policy.cooldown_hours)
                out.append((job, None))
            elif job.row.id in absent:
                job.error = NOT_ON_APP_ERROR
                out.append((job, None))
            elif job.message is None:
                out.append((job, None))
            elif background:
                if self._background is None:
                    self._background = SendThreads(max(1, self.concurrency), self.send_one)
                out.append((job, self._background.submit(job)))
            elif len(jobs) == 1 or self.workers == 1:
                job.outcome = self.send_one(job)
                out.append((job, None))
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        self.workers, thread_name_prefix="gatecast-send"
                    )
                out.append((job, self._pool.submit(self.send_one, job)))
        return out

    @staticmethod
    def collect(submitted: Submitted) -> None:
        """Wait for the sends started by :meth:`submit` and keep their outcomes."""
        for job, future in submitted:
            if future is not None:
                job.outcome = future.result()

    def close(self) -> None:
        """Stop the thread pools and close the clients they made."""
        self.checks.close()
        self.checks = NumberChecks(self.engine, self.clock, self._client)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._background is not None:
            self._background.shutdown()
        self._pool, self._background = None, None
        with self._clients_lock:
            clients, self._all_clients = self._all_clients, []
        for client in clients:
            close = getattr(client, "close", None)
            if callable(close):
                close()
        self._local = threading.local()


__all__ = ["SendPool", "SendThreads", "Submitted", "SupportsSend"]
