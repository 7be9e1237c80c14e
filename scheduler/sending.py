"""Sending: claimed rows to the gateway on a small thread pool, one client per thread.

DESIGN.md measured one shared AsyncClient as slow, so every pool thread makes its own
sync client (``client_factory``). Opted-out contacts are skipped before any send.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import Engine

from campaigns.delivery_lifecycle import OPTED_OUT_ERROR
from gateway.messages import Message
from gateway.outcomes import OutcomeKind, SendOutcome
from scheduler.claiming import Job
from scheduler.clock import Clock
from storage.queries import deliveries as dq

log = logging.getLogger("gatecast.dispatch")

#: a job and the future of its send (None: sent inline, or not sent at all)
Submitted = list[tuple[Job, Future[SendOutcome] | None]]


class SupportsSend(Protocol):
    """What the dispatcher needs of a gateway client (``gateway.client.GatewayClient``)."""

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        """Send one message; never raises for network problems."""
        ...


@dataclass(eq=False)
class SendPool:
    """Starts and collects sends; owns the thread pool and the clients it made."""

    engine: Engine
    client_factory: Callable[[], SupportsSend]
    clock: Clock
    workers: int
    _local: threading.local = field(default_factory=threading.local, init=False)
    _all_clients: list[SupportsSend] = field(default_factory=list, init=False)
    _clients_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False)

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
        try:
            return self._client().send(job.row.sender, job.row.target, job.message)
        except ValueError as exc:  # the client refused the input before any I/O
            return SendOutcome(OutcomeKind.PERMANENT, reason=f"invalid request: {exc}")
        except Exception as exc:  # unexpected: the request may have gone out
            log.exception("send to row %s raised", job.row.id)
            return SendOutcome(OutcomeKind.AMBIGUOUS, reason=f"send raised {type(exc).__name__}")
        finally:
            job.answered_at = self.clock.now()

    def submit(self, jobs: list[Job]) -> Submitted:
        """Skip opted-out contacts and start the sends (on the pool when it pays off)."""
        ids = [j.row.contact_id for j in jobs if j.row.contact_id is not None]
        with self.engine.connect() as conn:
            opted_out = dq.opted_out_contact_ids(conn, ids)
        out: Submitted = []
        for job in jobs:
            if job.row.contact_id is not None and job.row.contact_id in opted_out:
                job.error = OPTED_OUT_ERROR
                out.append((job, None))
            elif job.message is None:
                out.append((job, None))
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
        """Stop the thread pool and close the clients it made."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._clients_lock:
            clients, self._all_clients = self._all_clients, []
        for client in clients:
            close = getattr(client, "close", None)
            if callable(close):
                close()
        self._local = threading.local()


__all__ = ["SendPool", "Submitted", "SupportsSend"]
