"""SQL for users and their API keys: add, find, list, change, disable; keys created,
found by digest, listed, revoked; a user's dashboard sessions ended.

Policy (roles, hashing, expiry rules) is the caller's (``campaigns.users``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine, RowMapping, Table, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from storage import tables

_u = tables.users
_k = tables.api_keys
_s = tables.dashboard_sessions

USER_COLUMNS = ("id", "name", "role", "disabled", "created_at", "password_changed_at")
KEY_COLUMNS = (
    "id",
    "user_id",
    "prefix",
    "label",
    "role",
    "created_at",
    "expires_at",
    "revoked_at",
    "last_used_at",
)


def _insert(engine: Engine, table: Table, **values: Any) -> int:
    """Store one row of ``table``; returns its id."""
    with engine.begin() as conn:
        return int(conn.execute(insert(table).values(**values).returning(table.c.id)).scalar_one())


def add_user(
    engine: Engine, *, name: str, role: str, password_hash: str, now: datetime
) -> int | None:
    """Store a new user; returns its id, or None when the name was taken meanwhile (the
    caller checked it was free, but a second request may have stored it since)."""
    try:
        return _insert(
            engine,
            _u,
            name=name,
            role=role,
            password_hash=password_hash,
            disabled=False,
            created_at=now,
            password_changed_at=now,
        )
    except IntegrityError:
        if user_by_name(engine, name) is None:
            raise
        return None


def user_by_name(engine: Engine, name: str) -> RowMapping | None:
    """The user named ``name`` (with its password hash), or None."""
    with engine.connect() as conn:
        return (
            conn.execute(
                select(*(_u.c[c] for c in USER_COLUMNS), _u.c.password_hash).where(
                    _u.c.name == name
                )
            )
            .mappings()
            .first()
        )


def user_by_id(engine: Engine, user_id: int) -> RowMapping | None:
    """The user with id ``user_id`` (no password hash), or None."""
    with engine.connect() as conn:
        return (
            conn.execute(select(*(_u.c[c] for c in USER_COLUMNS)).where(_u.c.id == user_id))
            .mappings()
            .first()
        )


def count_admins(engine: Engine) -> int:
    """How many enabled users have the ``admin`` role."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(_u).where(_u.c.role == "admin", ~_u.c.disabled)
            ).scalar_one()
        )


def count_users(engine: Engine) -> int:
    """How many users exist (disabled ones included)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(_u)).scalar_one())


def users_page(engine: Engine, *, limit: int, offset: int) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: one page of the users by name."""
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(_u)).scalar_one())
        rows = (
            conn.execute(
                select(*(_u.c[c] for c in USER_COLUMNS))
                .order_by(_u.c.name)
                .limit(limit)
                .offset(offset)
            )
            .mappings()
            .all()
        )
    return total, list(rows)


def change_user(engine: Engine, user_id: int, **values: Any) -> bool:
    """Set ``values`` (role, disabled, password_hash, password_changed_at) on the user;
    with ``end_sessions`` in values, its dashboard sessions are deleted in the same
    transaction. False when there is no such user."""
    end_sessions = bool(values.pop("end_sessions", False))
    cap_keys = values.pop("cap_keys_to", None)
    with engine.begin() as conn:
        changed = conn.execute(update(_u).where(_u.c.id == user_id).values(**values)).rowcount
        if not changed:
            return False
        if end_sessions:
            conn.execute(delete(_s).where(_s.c.user_id == user_id))
        if cap_keys is not None:  # (allowed roles): keys above the new role take it
            role, allowed = cap_keys
            conn.execute(
                update(_k)
                .where(_k.c.user_id == user_id, _k.c.role.not_in(list(allowed)))
                .values(role=role)
            )
    return True


def add_key(
    engine: Engine,
    *,
    user_id: int,
    digest: str,
    prefix: str,
    label: str,
    role: str,
    now: datetime,
    expires_at: datetime | None,
) -> int:
    """Store a new API key (its digest); returns its id."""
    return _insert(
        engine,
        _k,
        user_id=user_id,
        digest=digest,
        prefix=prefix,
        label=label,
        role=role,
        created_at=now,
        expires_at=expires_at,
    )


def key_holder(engine: Engine, digest: str, now: datetime) -> RowMapping | None:
    """The key with ``digest`` and its user (``key_id``, ``key_role``, ``expires_at``,
    ``user_id``, ``name``, ``user_role``), when the key is not revoked nor expired and the user is
    enabled; None otherwise. Marks the key used (at most once a minute)."""
    with engine.connect() as conn:
        found = (
            conn.execute(
                select(
                    _k.c.id.label("key_id"),
                    _k.c.role.label("key_role"),
                    _k.c.expires_at,
                    _k.c.last_used_at,
                    _u.c.id.label("user_id"),
                    _u.c.name,
                    _u.c.role.label("user_role"),
                )
                .join(_u, _u.c.id == _k.c.user_id)
                .where(
                    _k.c.digest == digest,
                    _k.c.revoked_at.is_(None),
                    or_(_k.c.expires_at.is_(None), _k.c.expires_at > now),
                    ~_u.c.disabled,
                )
            )
            .mappings()
            .first()
        )
    if found is not None:
        last = found["last_used_at"]
        if last is None or (now - last).total_seconds() >= 60:
            with engine.begin() as conn:
                conn.execute(update(_k).where(_k.c.id == found["key_id"]).values(last_used_at=now))
    return found


def keys_page(
    engine: Engine, *, user_id: int | None, limit: int, offset: int
) -> tuple[int, list[RowMapping]]:
    """``(total, rows)``: one page of API keys (of one user, or all), with the user's
    name, by id."""
    conds = [] if user_id is None else [_k.c.user_id == user_id]
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(_k).where(*conds)).scalar_one())
        rows = (
            conn.execute(
                select(*(_k.c[c] for c in KEY_COLUMNS), _u.c.name.label("user_name"))
                .join(_u, _u.c.id == _k.c.user_id)
                .where(*conds)
                .order_by(_k.c.id)
                .limit(limit)
                .offset(offset)
            )
            .mappings()
            .all()
        )
    return total, list(rows)


def key_by_id(engine: Engine, key_id: int) -> RowMapping | None:
    """One API key with its user's name, or None."""
    with engine.connect() as conn:
        return (
            conn.execute(
                select(*(_k.c[c] for c in KEY_COLUMNS), _u.c.name.label("user_name"))
                .join(_u, _u.c.id == _k.c.user_id)
                .where(_k.c.id == key_id)
            )
            .mappings()
            .first()
        )


def revoke_key(engine: Engine, key_id: int, now: datetime) -> bool:
    """Revoke the key (kept, listed as revoked) and end the sessions it opened; False
    when there is no such key."""
    with engine.begin() as conn:
        found = conn.execute(select(_k.c.id).where(_k.c.id == key_id)).first()
        if found is None:
            return False
        conn.execute(
            update(_k).where(_k.c.id == key_id, _k.c.revoked_at.is_(None)).values(revoked_at=now)
        )
        conn.execute(delete(_s).where(_s.c.api_key_id == key_id))
    return True


__all__ = [
    "KEY_COLUMNS",
    "USER_COLUMNS",
    "add_key",
    "add_user",
    "change_user",
    "count_admins",
    "count_users",
    "key_by_id",
    "key_holder",
    "keys_page",
    "revoke_key",
    "user_by_id",
    "user_by_name",
    "users_page",
]
