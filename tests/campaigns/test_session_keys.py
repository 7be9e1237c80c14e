"""A dashboard session opened with a user's key carries that key (issue 27), on real
SQLite files and a real PostgreSQL database: it acts with the key's role (never above it,
nor above the user's current role), ends when the key is revoked or expires, and is never
extended beyond the key's expiry. A password's session acts with the user's role."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import SecretStr
from sqlalchemy import Engine

from campaigns import dashboard_sessions as ds
from campaigns import users

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
FAST = users.Hashing(64, 1)
OWNER = SecretStr("owner-key-0123456789abcdef")


def _open(engine: Engine, key: users.CreatedKey) -> str:
    holder = users.key_holder(engine, key.secret, NOW)
    assert holder is not None
    return ds.open_session(
        engine,
        OWNER,
        NOW,
        user_id=holder.user_id,
        api_key_id=holder.key_id,
        key_expires_at=holder.expires_at,
    )


def test_a_key_session_acts_with_the_key_role_and_ends_with_the_key(engine: Engine) -> None:
    users.create_user(engine, "ana", "operator", "a long password", FAST, NOW)
    viewer_key = users.create_key(engine, "ana", NOW, role="viewer")
    session = _open(engine, viewer_key)
    found = ds.lookup(engine, session, OWNER, NOW)
    assert found is not None
    assert (found.role, found.name, found.key_id) == ("viewer", "ana", viewer_key.key.id)
    # the same rule as the bearer key itself
    holder = users.key_holder(engine, viewer_key.secret, NOW)
    assert holder is not None and holder.role == found.role == "viewer"
    users.revoke_key(engine, viewer_key.key.id, NOW)
    assert ds.lookup(engine, session, OWNER, NOW) is None

    # an operator key: a lowered user lowers the session at once
    operator_key = users.create_key(engine, "ana", NOW)
    session = _open(engine, operator_key)
    found = ds.lookup(engine, session, OWNER, NOW)
    assert found is not None and found.role == "operator"
    users.set_role(engine, "ana", "viewer")
    found = ds.lookup(engine, session, OWNER, NOW)
    assert found is not None and found.role == "viewer"
    users.set_disabled(engine, "ana")
    assert ds.lookup(engine, session, OWNER, NOW) is None


def test_a_key_session_never_outlives_the_key(engine: Engine) -> None:
    users.create_user(engine, "bo", "admin", "a long password", FAST, NOW)
    key = users.create_key(engine, "bo", NOW, expires_at=NOW + timedelta(hours=8))
    session = _open(engine, key)
    # used late in its life: the renewal stops at the key's expiry
    later = NOW + timedelta(hours=7)
    found = ds.lookup(engine, session, OWNER, later)
    assert found is not None and found.role == "admin" and not found.extended
    assert ds.lookup(engine, session, OWNER, NOW + timedelta(hours=8)) is None
    assert ds.lookup(engine, session, OWNER, NOW + timedelta(hours=8, seconds=1)) is None

    # a key that expires later than a session lifetime: renewals go on, up to its expiry
    long_key = users.create_key(engine, "bo", NOW, expires_at=NOW + ds.LIFETIME * 3)
    session = _open(engine, long_key)
    at = NOW
    while True:
        at += ds.LIFETIME - ds.RENEW_WITHIN + timedelta(minutes=1)
        if ds.lookup(engine, session, OWNER, at) is None:
            break
    assert NOW + ds.LIFETIME * 3 <= at < NOW + ds.LIFETIME * 3 + ds.LIFETIME


def test_a_password_session_acts_with_the_user_role(engine: Engine) -> None:
    users.create_user(engine, "cy", "operator", "a long password", FAST, NOW)
    holder = users.authenticate(engine, "cy", "a long password", FAST)
    assert holder is not None
    session = ds.open_session(engine, OWNER, NOW, user_id=holder.user_id)
    found = ds.lookup(engine, session, OWNER, NOW)
    assert found is not None and (found.role, found.key_id) == ("operator", None)
    users.set_role(engine, "cy", "viewer")
    found = ds.lookup(engine, session, OWNER, NOW)
    assert found is not None and found.role == "viewer"
    # the owner key's session: no user, no key, bound to the owner key
    owner = ds.open_session(engine, OWNER, NOW)
    found = ds.lookup(engine, owner, OWNER, NOW)
    assert found is not None and (found.user_id, found.role, found.key_id) == (None, None, None)
    assert ds.lookup(engine, owner, SecretStr("another-owner-key-0123456789"), NOW) is None
