"""How a long-running command learns to stop: SIGINT (Ctrl-C) or SIGTERM sets an event."""

from __future__ import annotations

import signal
import threading


def stop_on_signals(stop: threading.Event, seen: list[int] | None = None) -> None:
    """Set ``stop`` on SIGINT or SIGTERM instead of dying at once.

    Installed first thing, so a signal during start-up still stops the command cleanly
    (its children too). Only from the main thread: tests run commands in threads, and
    Python accepts handlers from the main thread alone. ``seen`` gets the signals' numbers.
    """

    def handle(sig: int, _frame: object) -> None:
        if seen is not None:
            seen.append(sig)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, handle)


__all__ = ["stop_on_signals"]
