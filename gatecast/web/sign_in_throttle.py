"""Sign-in throttling: after :data:`MAX_FAILURES` wrong keys from one client address within
:data:`WINDOW` seconds, that address's sign-ins are refused (429 with ``Retry-After``)
until the oldest failure leaves the window. A successful sign-in clears the address.

The counts live in memory, per process (several processes serving the dashboard each
count their own; a restart forgets). That is enough, and deliberately not shared through
the database: the throttle slows online guessing, the key's length is what defeats it.
With the minimum key (``gatecast.web.auth.MIN_KEY_LENGTH``, 24 characters) even from
hex digits (16^24, about 8e28 keys), N processes and A attacking addresses allow
5 x N x A guesses a minute: 10 processes and a million addresses guess a matching key
with a probability of about 3e-16 a year. A shared count would cut that by N and cost a
database write per wrong key, turning a guessing flood into write load on the database
the webhook intake needs (and a database away would then block every sign-in). The
address is the peer's, or the one a proxy in
``GATECAST_TRUSTED_PROXIES`` puts in ``X-Forwarded-For`` (uvicorn applies that header).
At most :data:`MAX_ADDRESSES` addresses are tracked: the least recently failed are
dropped first, so memory stays bounded whoever calls.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_FAILURES = 5
WINDOW = 60.0
MAX_ADDRESSES = 10_000


@dataclass(eq=False)
class SignInThrottle:
    """Failed sign-ins per client address in a sliding window (thread-safe)."""

    max_failures: int = MAX_FAILURES
    window: float = WINDOW
    max_addresses: int = MAX_ADDRESSES
    clock: Callable[[], float] = time.monotonic
    _failures: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def _recent(self, address: str, now: float) -> deque[float] | None:
        times = self._failures.get(address)
        if times is None:
            return None
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._failures[address]
            return None
        return times

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may try again, or None when it may try now."""
        with self._lock:
            now = self.clock()
            times = self._recent(address, now)
            if times is None or len(times) < self.max_failures:
                return None
            return max(1, math.ceil(times[0] + self.window - now))

    def failed(self, address: str) -> None:
        """Count a wrong key from ``address``."""
        with self._lock:
            now = self.clock()
            times = self._recent(address, now) or deque(maxlen=self.max_failures)
            times.append(now)
            self._failures[address] = times
            self._failures.move_to_end(address)
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)

    def succeeded(self, address: str) -> None:
        """Forget ``address``'s failures (it signed in)."""
        with self._lock:
            self._failures.pop(address, None)


__all__ = ["MAX_FAILURES", "WINDOW", "SignInThrottle"]
