"""Everything in one process: leader election, APScheduler jobs, the dispatcher, the
reconnection of dropped instances, and an optional ASGI app (the webhook receiver, API and
dashboard) served by uvicorn.

Every process dispatches (the claim is safe for many workers); only the holder of the
``scheduler`` lease runs the APScheduler jobs and the reconnections, so starts and
recurrences fire once and one process talks to a dropped instance.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from sqlalchemy import Engine

from gateway.client import GatewayClient
from scheduler import leader
from scheduler.clock import Clock, SystemClock
from scheduler.dispatcher import DEFAULT_SENDER_GRACE_SECONDS, Dispatcher, SupportsSend
from scheduler.jobs import CampaignJobs
from scheduler.reconnect import DEFAULT_BACKOFF, Reconnector

log = logging.getLogger("gatecast.service")


@dataclass(frozen=True)
class ServiceOptions:
    """Tuning of a :class:`Service` (the defaults suit a paced production run)."""

    workers: int = 4
    batch_size: int = 256
    lease_seconds: float = 120.0
    leader_ttl_seconds: float = 30.0
    sync_seconds: float = 10.0
    poll_seconds: float = 1.0
    run_jobs: bool = True
    reconnect_check_seconds: float = 10.0
    reconnect_backoff: tuple[float, ...] = DEFAULT_BACKOFF
    sender_grace_seconds: float = DEFAULT_SENDER_GRACE_SECONDS


class Service:
    """Runs the scheduler (when it holds the lease) and the dispatcher in threads."""

    def __init__(
        self,
        engine: Engine,
        client_factory: Callable[[], SupportsSend],
        *,
        options: ServiceOptions | None = None,
        clock: Clock | None = None,
        holder: str | None = None,
        campaign_ids: Sequence[int] | None = None,
        on_outcome: Callable[[str], None] | None = None,
        instance_client: Callable[[], GatewayClient] | None = None,
    ) -> None:
        """``instance_client`` makes clients for instance operations: with it, the leader
        reconnects instances whose connection dropped (:mod:`scheduler.reconnect`)."""
        self.engine = engine
        self.options = options or ServiceOptions()
        self.clock: Clock = clock or SystemClock()
        self.holder = holder or f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        self.dispatcher = Dispatcher(
            engine,
            client_factory,
            clock=self.clock,
            workers=self.options.workers,
            batch_size=self.options.batch_size,
            lease_seconds=self.options.lease_seconds,
            campaign_ids=campaign_ids,
            poll_seconds=self.options.poll_seconds,
            on_outcome=on_outcome,
            sender_grace_seconds=self.options.sender_grace_seconds,
        )
        self.jobs = CampaignJobs(engine, now=self.clock.now)
        self.reconnector = (
            Reconnector(engine, instance_client, backoff=self.options.reconnect_backoff)
            if instance_client is not None
            else None
        )
        self.is_leader = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the leader loop (if jobs run here) and the dispatch loop."""
        self._stop.clear()
        if self.options.run_jobs:
            self._spawn("gatecast-leader", self._leader_loop)
            if self.reconnector is not None:
                self._spawn("gatecast-reconnect", self._reconnect_loop)
        self._spawn("gatecast-dispatch", self._dispatch_loop)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _dispatch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.dispatcher.run(self._stop)
            except Exception:
                log.exception("dispatcher crashed; restarting in 1 s")
                self._stop.wait(1.0)

    def _leader_loop(self) -> None:
        ttl = self.options.leader_ttl_seconds
        renew_every = min(self.options.sync_seconds, ttl / 3)
        while not self._stop.is_set():
            try:
                held = leader.try_acquire(
                    self.engine,
                    leader.SCHEDULER_LEASE,
                    self.holder,
                    now=self.clock.now(),
                    ttl=ttl,
                )
                if held and not self.is_leader:
                    log.info("this process (%s) now runs the scheduler", self.holder)
                    self.is_leader = True
                    self.jobs.start()
                elif held:
                    self.jobs.sync()
                elif self.is_leader:
                    log.warning("scheduler lease lost: another process fires the jobs now")
                    self.is_leader = False
                    self.jobs.clear()
            except Exception:
                log.exception("scheduler loop error")
            self._stop.wait(renew_every)

    def _reconnect_loop(self) -> None:
        # its own thread: a slow gateway must not delay the lease renewal
        assert self.reconnector is not None
        while not self._stop.wait(self.options.reconnect_check_seconds):
            if not self.is_leader:
                continue
            try:
                self.reconnector.run_once(self.clock.now())
            except Exception:
                log.exception("reconnect loop error")

    def sync_now(self) -> None:
        """Rebuild the jobs at once (after a campaign was created in this process)."""
        if self.is_leader:
            self.jobs.sync()
        wake = getattr(self.clock, "wake", None)
        if callable(wake):
            wake()

    def stop(self) -> None:
        """Stop the loops, the scheduler and the dispatcher; give the lease up."""
        self._stop.set()
        wake = getattr(self.clock, "wake", None)
        if callable(wake):
            wake()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()
        self.jobs.shutdown()
        self.dispatcher.close()
        if self.is_leader:
            try:
                leader.release(self.engine, leader.SCHEDULER_LEASE, self.holder)
            except Exception:
                log.exception("releasing the scheduler lease failed")
            self.is_leader = False

    def __enter__(self) -> Service:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the main thread keeps its own handlers
        return


class AsgiServer:
    """An ASGI app served by uvicorn in a background thread (``port=0``: a free port)."""

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
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
            uvicorn.Config(app, log_level=log_level, lifespan="on", access_log=True)
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
