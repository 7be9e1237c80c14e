"""Which events the inbox takes: those of the instances gatecast holds.

* :class:`HeldInstances`: the instance ids gatecast holds (a row in ``instances`` that is
  not ``gone``), cached so the hot path costs a set lookup. The cache is reloaded (in a
  worker thread) when it is :data:`REFRESH_SECONDS` old, and at once when an event names
  an id it lacks and it is :data:`MISS_REFRESH_SECONDS` old (an instance created a moment
  ago is heard; a flood of forged ids costs a few reads a second at most). One load runs
  at a time and no request waits for it longer than :data:`LOAD_WAIT_SECONDS`: past that
  it goes on with the ids read before. With none read yet a request waits for the first
  load up to :data:`COLD_LOAD_WAIT_SECONDS` (a busy machine answers slowly: a burst at
  start must not be refused for it), and past that (a cold start while the database is
  away or hung) is refused with :class:`InstancesUnknown` (503); a failed first load is
  retried after :data:`LOAD_RETRY_SECONDS`, requests meanwhile refused at once. The
  first load runs when the first event asks, not at start: ids read before an instance
  is added elsewhere would refuse its first events for up to
  :data:`MISS_REFRESH_SECONDS`.
* :class:`RefusalLog`: refused events are counted (the ``refused`` hook: the face's
  ``gatecast_webhook_events_refused_total{reason}``) and logged once per instance id
  per :data:`LOG_EVERY_SECONDS`.

Who may post at all (the source allow-list) is the HTTP face's (``gatecast.web.webhook_guard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from campaigns.gateway_events import REFUSED_UNKNOWN_INSTANCE, split_foreign
from gateway.events import Event

log = logging.getLogger("gatecast.webhook")

#: the cache of held instance ids is reloaded when this old
REFRESH_SECONDS = 2.0
#: an event of an id the cache lacks reloads it when it is this old
MISS_REFRESH_SECONDS = 0.25
#: a refused instance id is logged at most once in this long
LOG_EVERY_SECONDS = 600.0
#: the longest a request waits for a load of the ids when some were read before
LOAD_WAIT_SECONDS = 2.0
#: the longest a request waits for the first load (no ids read yet)
COLD_LOAD_WAIT_SECONDS = 8.0
#: with no ids read yet, how long after a failed load the next one is tried
LOAD_RETRY_SECONDS = 1.0
#: refused ids remembered for the log's rate limit (forgotten all at once past this)
_LOGGED_MAX = 1000


class NotStored(Exception):
    """The inbox cannot take events now: neither the database nor the journal could
    store them (e.g. the disk is full), or which instances gatecast holds is not known
    yet. The face refuses the request (503) rather than acknowledge it."""


class InstancesUnknown(NotStored):
    """The instance ids gatecast holds are not known yet: the database has not answered
    since start (events are refused, 503, rather than accepted unchecked)."""


class HeldInstances:
    """The instance ids gatecast holds, cached (see the module docstring).

    ``load`` reads them from the database (it runs in a worker thread). If a reload
    fails or does not answer in time, the ids loaded before are kept; with none loaded
    yet the request fails with :class:`InstancesUnknown`.
    """

    def __init__(
        self,
        load: Callable[[], frozenset[str]],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._clock = clock
        self._ids: frozenset[str] | None = None
        self._loaded_at = float("-inf")
        self._failed_at = float("-inf")
        self._loading: asyncio.Future[None] | None = None

    def invalidate(self) -> None:
        """Reload before the next check (an instance was added or removed here)."""
        self._loaded_at = float("-inf")

    async def split(self, events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
        """``(accepted, refused)``: the events of held instances, and the others."""
        if self._ids is None or self._clock() - self._loaded_at >= REFRESH_SECONDS:
            await self._refresh(REFRESH_SECONDS)
        if self._ids is None:
            raise InstancesUnknown("the instances gatecast holds are not known yet")
        accepted, refused = split_foreign(events, self._ids)
        if refused and self._clock() - self._loaded_at >= MISS_REFRESH_SECONDS:
            await self._refresh(MISS_REFRESH_SECONDS)
            accepted, refused = split_foreign(events, self._ids)
        return accepted, refused

    async def _refresh(self, older_than: float) -> None:
        """Start a load unless one runs or was just tried; wait for it a bounded time."""
        if self._ids is not None and self._clock() - self._loaded_at < older_than:
            return  # reloaded while this request waited
        if self._loading is None:
            if self._ids is None and self._clock() - self._failed_at < LOAD_RETRY_SECONDS:
                return  # the first load failed a moment ago: refused until the retry
            self._loading = asyncio.ensure_future(self._load_now())
        # past the wait the load goes on, and this request uses what is known
        wait = LOAD_WAIT_SECONDS if self._ids is not None else COLD_LOAD_WAIT_SECONDS
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._loading), wait)

    async def _load_now(self) -> None:
        started = self._clock()
        try:
            ids = await asyncio.to_thread(self._load)
        except Exception as exc:
            if self._ids is None:
                self._failed_at = self._clock()
                log.warning("reading the instances held failed (%s); retrying", exc)
            else:
                log.exception("reading the instances held failed; using the ids read before")
                self._loaded_at = started
        else:
            self._ids, self._loaded_at = ids, started
        finally:
            self._loading = None


class RefusalLog:
    """Counts refused events (``count(reason, n)``) and logs each instance id at most
    once in a while."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        count: Callable[[str, int], None] | None = None,
    ) -> None:
        self._clock = clock
        self._count = count
        self._logged: dict[str | None, float] = {}

    def note(self, refused: Sequence[Event], reason: str = REFUSED_UNKNOWN_INSTANCE) -> None:
        """Count ``refused`` under ``reason``; log the instance ids not logged lately."""
        if not refused:
            return
        if self._count is not None:
            self._count(reason, len(refused))
        now = self._clock()
        for instance_id in dict.fromkeys(ev.instance_id for ev in refused):
            last = self._logged.get(instance_id)
            if last is not None and now - last < LOG_EVERY_SECONDS:
                continue
            if len(self._logged) >= _LOGGED_MAX:
                self._logged.clear()
            self._logged[instance_id] = now
            shown = "no instance id" if instance_id is None else repr(instance_id[:64])
            log.warning(
                "webhook events refused (%s): %s is not an instance gatecast holds; "
                "not applied (logged once per %d s per instance)",
                reason,
                shown,
                LOG_EVERY_SECONDS,
            )


__all__ = [
    "COLD_LOAD_WAIT_SECONDS",
    "LOAD_RETRY_SECONDS",
    "LOAD_WAIT_SECONDS",
    "LOG_EVERY_SECONDS",
    "MISS_REFRESH_SECONDS",
    "REFRESH_SECONDS",
    "HeldInstances",
    "InstancesUnknown",
    "NotStored",
    "RefusalLog",
]
