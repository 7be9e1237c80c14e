"""Timed, fire-and-forget webhook delivery: one POST per event, failures swallowed and counted.

A scheduler thread keeps a heap of due events; when one falls due it asks a callback for
the target URL (looked up then, so a reset or re-pointed webhook is honoured) and hands the
POST to a small pool of worker threads, each with its own ``httpx.Client``. Nothing here
ever blocks the HTTP request that caused an event. Deliveries with the same ``lane`` (a
message id, else the instance id) go through the same worker, in the order they fell due:
the events of one message or one link session arrive in order unless the plan reorders
them on purpose (``SandboxConfig.reorder_events``), as a gateway's one socket would.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.tls import client_ssl_context


@dataclass
class Delivery:
    """What the scheduler hands to a worker: a body for a URL, and its record to update."""

    url: str
    body: bytes
    record: dict[str, Any]
    lane: str = ""  # same lane, same worker: delivered in order


class WebhookEmitter:
    """Runs ``on_due(job) -> Delivery | None`` at each job's due time and POSTs the result."""

    def __init__(
        self,
        on_due: Callable[[Any], Delivery | None],
        *,
        workers: int = 4,
        timeout: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_due = on_due
        self._monotonic = monotonic
        self._heap: list[tuple[float, int, Any]] = []  # (due, seq, job): seq breaks ties
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._lanes: list[queue.Queue[Delivery | None]] = [
            queue.Queue() for _ in range(max(1, workers))
        ]
        self._stopping = False
        self._inflight = 0
        self._timeout = timeout
        self.delivered = 0
        self.failed = 0
        self._threads = [threading.Thread(target=self._schedule_loop, name="sandbox-events")]
        self._threads += [
            threading.Thread(
                target=self._post_loop, args=(lane,), name=f"sandbox-webhook-{i}", daemon=True
            )
            for i, lane in enumerate(self._lanes)
        ]
        self._threads[0].daemon = True
        for t in self._threads:
            t.start()

    def schedule(self, delay: float, job: Any) -> None:
        """Run ``job`` after ``delay`` seconds."""
        with self._cond:
            heapq.heappush(self._heap, (self._monotonic() + delay, next(self._seq), job))
            self._cond.notify_all()

    def schedule_many(self, items: list[tuple[float, Any]]) -> None:
        """Schedule several ``(delay, job)`` at once."""
        if not items:
            return
        now = self._monotonic()
        with self._cond:
            for delay, job in items:
                heapq.heappush(self._heap, (now + delay, next(self._seq), job))
            self._cond.notify_all()

    def pending(self) -> int:
        """Events scheduled or being posted."""
        with self._cond:
            return len(self._heap) + self._inflight

    def clear(self) -> None:
        """Forget every scheduled event and the counters (posts in flight still go)."""
        with self._cond:
            self._heap.clear()
            self.delivered = 0
            self.failed = 0

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is pending, or ``timeout`` seconds; True when idle."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._heap or self._inflight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self) -> None:
        """Stop the threads; events not yet due are dropped."""
        with self._cond:
            self._stopping = True
            self._heap.clear()
            self._cond.notify_all()
        for lane in self._lanes:
            lane.put(None)
        for t in self._threads:
            t.join(timeout=self._timeout + 1)

    def _schedule_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    if self._heap:
                        wait = self._heap[0][0] - self._monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                if self._stopping:
                    return
                job = heapq.heappop(self._heap)[2]
                self._inflight += 1
            delivery: Delivery | None = None
            try:
                delivery = self._on_due(job)
            finally:
                if delivery is None:
                    self._done()
            if delivery is not None:
                lane = zlib.crc32(delivery.lane.encode()) % len(self._lanes)
                self._lanes[lane].put(delivery)

    def _done(self) -> None:
        with self._cond:
            self._inflight -= 1
            self._cond.notify_all()

    def _post_loop(self, lane: queue.Queue[Delivery | None]) -> None:
        headers = {"content-type": "application/json", "user-agent": "gatecast-sandbox"}
        with httpx.Client(
            timeout=self._timeout, headers=headers, verify=client_ssl_context()
        ) as client:
            while True:
                delivery = lane.get()
                if delivery is None:
                    return
                try:
                    resp = client.post(delivery.url, content=delivery.body)
                    delivery.record["http_status"] = resp.status_code
                    ok = resp.status_code < 400
                    delivery.record["delivered"] = ok
                    if not ok:
                        delivery.record["error"] = f"HTTP {resp.status_code}"
                except Exception as exc:  # fire-and-forget: swallow, count, record
                    ok = False
                    delivery.record["delivered"] = False
                    delivery.record["error"] = type(exc).__name__
                with self._cond:
                    if ok:
                        self.delivered += 1
                    else:
                        self.failed += 1
                self._done()
