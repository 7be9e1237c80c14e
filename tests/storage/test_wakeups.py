"""Wake-ups on new work: a ``NOTIFY`` sent in a committed transaction reaches a listener
of another connection; a rolled-back one does not; SQLite has no listener."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from storage.wakeups import listener_for, notify_work


@pytest.mark.postgres
def test_a_committed_notify_wakes_the_listener_and_a_rolled_back_one_does_not(
    pg_engine: Engine,
) -> None:
    listener = listener_for(pg_engine)
    assert listener is not None
    try:
        assert listener.wait(0.01) is False  # connected and listening, nothing yet
        with pg_engine.connect() as conn:
            with conn.begin() as tx:
                notify_work(conn)
                tx.rollback()
            assert listener.wait(0.3) is False
            with conn.begin():
                notify_work(conn)
                notify_work(conn)  # a burst: one wake-up
        assert listener.wait(30) is True
        assert listener.wait(0.01) is False
    finally:
        listener.close()


def test_sqlite_polls(sqlite_engine: Engine) -> None:
    assert listener_for(sqlite_engine) is None
    with sqlite_engine.begin() as conn:
        notify_work(conn)  # a no-op: nothing to send
