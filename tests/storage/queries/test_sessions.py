"""Dashboard session rows: open, check, close, expiry, the key they belong to, pruning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from storage.queries import sessions as q

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _is_open(engine: Engine, digest: str, key: str = "key-a", now: datetime = NOW) -> bool:
    return q.expiry(engine, id_digest=digest, key_digest=key, now=now) is not None


def _open(engine: Engine, digest: str, now: datetime = NOW) -> int:
    return q.open_session(
        engine, id_digest=digest, key_digest="key-a", now=now, expires_at=now + 12 * HOUR
    )


def test_a_session_is_open_until_closed(engine: Engine) -> None:
    _open(engine, "s1")
    assert q.expiry(engine, id_digest="s1", key_digest="key-a", now=NOW) == NOW + 12 * HOUR
    assert not _is_open(engine, "s2")
    assert not _is_open(engine, "s1", key="key-b")
    q.close_session(engine, "s1")
    assert not _is_open(engine, "s1")
    q.close_session(engine, "s1")  # closing twice is harmless


def test_a_session_expires_and_is_pruned_at_the_next_sign_in(engine: Engine) -> None:
    assert _open(engine, "old") == 0
    assert _is_open(engine, "old", now=NOW + 12 * HOUR - HOUR)
    assert not _is_open(engine, "old", now=NOW + 12 * HOUR)
    assert q.count_sessions(engine) == 1
    assert _open(engine, "new", now=NOW + 13 * HOUR) == 1
    assert q.count_sessions(engine) == 1
    assert _is_open(engine, "new", now=NOW + 13 * HOUR)


def test_a_session_in_use_is_extended(engine: Engine) -> None:
    _open(engine, "s1")
    q.extend(engine, "s1", NOW + 20 * HOUR)
    assert _is_open(engine, "s1", now=NOW + 19 * HOUR)
