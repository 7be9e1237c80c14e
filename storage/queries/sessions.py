"""SQL for dashboard sessions: open one (pruning expired ones), check (with the user and
the key it depends on), extend, close one.

Rows are found by the digest of the cookie's session id; how long a session lives and
how ids are digested are the caller's policy (passed in as times and digests).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine, RowMapping, and_, delete, func, insert, or_, select, update

from storage import tables

_s = tables.dashboard_sessions
_u = tables.users
_k = tables.api_keys


def open_session(
    engine: Engine,
    *,
    id_digest: str,
    key_digest: str,
    now: datetime,
    expires_at: datetime,
    user_id: int | None = None,
    api_key_id: int | None = None,
) -> int:
    """Store a new session (of a user when ``user_id`` is given, opened with that user's
    key ``api_key_id``); expired sessions (``expires_at <= now``) are deleted first.
    Returns how many expired sessions were deleted."""
    with engine.begin() as conn:
        pruned = conn.execute(delete(_s).where(_s.c.expires_at <= now)).rowcount
        conn.execute(
            insert(_s).values(
                id_digest=id_digest,
                key_digest=key_digest,
                created_at=now,
                expires_at=expires_at,
                user_id=user_id,
                api_key_id=api_key_id,
            )
        )
    return int(pruned or 0)


def holder(engine: Engine, *, id_digest: str, key_digest: str, now: datetime) -> RowMapping | None:
    """The open, unexpired session with ``id_digest`` and who holds it: ``expires_at``,
    ``user_id``, ``name``, ``role`` (the user's), and the key it was opened with:
    ``api_key_id``, ``key_role``, ``key_expires_at`` (all None for the owner key's
    session, which must belong to ``key_digest``, and for a password's). A user's session
    only while the user is enabled and its key (if any) neither revoked nor expired.
    None otherwise."""
    with engine.connect() as conn:
        return (
            conn.execute(
                select(
                    _s.c.expires_at,
                    _s.c.user_id,
                    _u.c.name,
                    _u.c.role,
                    _s.c.api_key_id,
                    _k.c.role.label("key_role"),
                    _k.c.expires_at.label("key_expires_at"),
                )
                .select_from(
                    _s.outerjoin(_u, _u.c.id == _s.c.user_id).outerjoin(
                        _k, _k.c.id == _s.c.api_key_id
                    )
                )
                .where(
                    _s.c.id_digest == id_digest,
                    _s.c.expires_at > now,
                    or_(
                        and_(_s.c.user_id.is_(None), _s.c.key_digest == key_digest),
                        and_(_s.c.user_id.is_not(None), ~_u.c.disabled),
                    ),
                    or_(
                        _s.c.api_key_id.is_(None),
                        and_(
                            _k.c.user_id == _s.c.user_id,
                            _k.c.revoked_at.is_(None),
                            or_(_k.c.expires_at.is_(None), _k.c.expires_at > now),
                        ),
                    ),
                )
            )
            .mappings()
            .first()
        )


def expiry(engine: Engine, *, id_digest: str, key_digest: str, now: datetime) -> datetime | None:
    """When the session expires, while it exists, belongs to ``key_digest`` and has not
    expired; None otherwise."""
    with engine.connect() as conn:
        found = conn.execute(
            select(_s.c.expires_at).where(
                _s.c.id_digest == id_digest,
                _s.c.key_digest == key_digest,
                _s.c.expires_at > now,
            )
        ).scalar_one_or_none()
    return found


def extend(engine: Engine, id_digest: str, expires_at: datetime) -> None:
    """Move the session's expiry to ``expires_at`` (a session in use is kept)."""
    with engine.begin() as conn:
        conn.execute(update(_s).where(_s.c.id_digest == id_digest).values(expires_at=expires_at))


def close_session(engine: Engine, id_digest: str) -> None:
    """Delete the session (signing out); nothing happens when it is already gone."""
    with engine.begin() as conn:
        conn.execute(delete(_s).where(_s.c.id_digest == id_digest))


def count_sessions(engine: Engine) -> int:
    """How many session rows are stored (expired ones not yet pruned included)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(_s)).scalar_one())


__all__ = ["close_session", "count_sessions", "expiry", "extend", "holder", "open_session"]
