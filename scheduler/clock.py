"""The injected clock: everything in the scheduler asks it for the time and to wait."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, tzinfo
from typing import Protocol

from storage.types import clock_offset, set_clock_offset, utcnow


class Clock(Protocol):
    """Tells the time (UTC-aware) and waits."""

    def now(self) -> datetime:
        """The current time, UTC-aware."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (may return early when woken)."""
        ...


class SystemClock:
    """The real clock; ``sleep`` can be cut short with :meth:`wake`."""

    def __init__(self) -> None:
        self._wake = threading.Event()

    def now(self) -> datetime:
        """The current UTC time."""
        return utcnow()

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``; returns at once after :meth:`wake`."""
        if seconds <= 0:
            return
        self._wake.wait(seconds)
        self._wake.clear()

    def wake(self) -> None:
        """Interrupt a running or the next :meth:`sleep`."""
        self._wake.set()


class FakeClock:
    """A clock for tests: time moves only when someone sleeps or calls :meth:`advance`."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._now = start
        self._lock = threading.Lock()
        self.slept: list[float] = []

    def now(self) -> datetime:
        """The fake current time."""
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        """Advance the fake time by ``seconds`` without waiting."""
        with self._lock:
            self.slept.append(seconds)
            if seconds > 0:
                self._now += timedelta(seconds=seconds)

    def advance(self, seconds: float) -> None:
        """Move the fake time forward."""
        with self._lock:
            self._now += timedelta(seconds=seconds)

    def wake(self) -> None:
        """Nothing to interrupt."""


def monotonic() -> float:
    """Monotonic seconds (for measuring, never for deciding)."""
    return time.monotonic()


def install_process_clock(start: datetime) -> None:
    """Set this process's clock to ``start`` (it then runs at real speed).

    For rehearsals and journey tests (``GATECAST_CLOCK_START``): every part of gatecast
    reads :func:`storage.types.utcnow`, and APScheduler's own reading of the time is
    shifted by the same amount, so a start, a window or a cron occurrence can be reached
    in seconds instead of waited for.
    """
    if start.tzinfo is None:
        raise ValueError("the clock start needs a UTC offset, e.g. 2026-11-28T08:59:50+01:00")
    set_clock_offset(start - datetime.now(start.tzinfo))
    _shift_apscheduler()


class _ShiftedDatetime(datetime):
    """``datetime`` whose ``now`` is the process clock (for APScheduler's module)."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
        shifted = datetime.now(tz) + clock_offset()
        return shifted


def _shift_apscheduler() -> None:
    import apscheduler.schedulers.base as base

    base.datetime = _ShiftedDatetime
