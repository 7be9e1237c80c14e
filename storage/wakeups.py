"""Wake-ups on new work: PostgreSQL ``NOTIFY`` / ``LISTEN`` on one channel.

:func:`notify_work` is sent inside the transaction that makes work (PostgreSQL delivers
it at commit, never for a rolled-back one); on SQLite it does nothing and the workers
keep polling. :class:`WorkListener` holds one autocommit psycopg connection that listens;
it reconnects after a lost connection. When to notify is the domain's rule
(:mod:`scheduler.sender_leases`, :mod:`campaigns.lifecycle`, :mod:`scheduler.recording`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text

if TYPE_CHECKING:  # imported by the listener (PostgreSQL only): a SQLite command never loads it
    import psycopg

log = logging.getLogger("gatecast.dispatch")

#: the channel every worker listens on
CHANNEL = "gatecast_work"


def notify_work(conn: Connection) -> None:
    """Wake the listening workers when ``conn``'s transaction commits (PostgreSQL only)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})


class WorkListener:
    """Waits for :func:`notify_work` of any process, over a connection of its own."""

    def __init__(self, engine: Engine) -> None:
        self._conninfo = engine.url.set(drivername="postgresql").render_as_string(
            hide_password=False
        )
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    def _connection(self) -> psycopg.Connection[tuple[object, ...]]:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._conninfo, autocommit=True)
            self._conn.execute(f"LISTEN {CHANNEL}")
        return self._conn

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notification; True if one (or more) came.

        A lost connection counts as a wake-up after ``timeout`` (work may have come
        meanwhile); the next call reconnects."""
        import psycopg

        try:
            conn = self._connection()
            got = False
            for _ in conn.notifies(timeout=timeout, stop_after=1):
                got = True
            if got:  # drain the others already queued: one wake-up for a burst
                for _ in conn.notifies(timeout=0):
                    pass
            return got
        except psycopg.Error as exc:
            log.warning("listening for new work failed (%s); polling meanwhile", type(exc).__name__)
            self.close()
            time.sleep(timeout)
            return True

    def close(self) -> None:
        """Close the listening connection."""
        import psycopg

        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None


def listener_for(engine: Engine) -> WorkListener | None:
    """A listener on PostgreSQL; None on SQLite (workers poll)."""
    return WorkListener(engine) if engine.dialect.name == "postgresql" else None
