"""Dashboard sessions as records: open, check (and extend), close.

A session id is 256 random bits; the database keeps its SHA-256, never the id, with a
digest of the owner key in force (changing it ends the owner key's sessions). A session
ends :data:`LIFETIME` after sign-in unless it is used: a check made when less than
:data:`RENEW_WITHIN` remains extends it to :data:`LIFETIME` again (one write at most
every 6 hours a session). Closing deletes the record, so a copied cookie is refused from
then on. Expired records are pruned when a session opens. The cookie itself is the web's
(``gatecast.web.sessions``).

A session signed in by a user (password, or one of the user's API keys) names the user
(and the key): it is refused once the user is disabled, and ends when the user's password
changes. A session opened with a key carries that key: it acts with the key's role as the
key itself does (``campaigns.users.acting_role``: the lower of the key's and the user's),
is refused once the key is revoked or expired (the same query that finds the session
checks the key), and never lasts beyond the key's expiry (opening and extending stop
there). The roles are read at every check, so a lowered role applies at once. A session
of the owner key names no user and belongs to that key's digest.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import SecretStr

from campaigns.users import acting_role
from storage.engine import Engine
from storage.queries import sessions as q

#: how long a session lasts from sign-in, or from its last extension
LIFETIME = timedelta(hours=12)
#: a session used when less than this remains is extended
RENEW_WITHIN = LIFETIME / 2
#: the longest session id accepted (ours are 43 characters)
_MAX_ID = 100


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def key_digest(key: SecretStr) -> str:
    """Which API key a session belongs to (a digest, never the key)."""
    return hashlib.sha256(
        b"gatecast-dashboard-session\0" + key.get_secret_value().encode()
    ).hexdigest()


@dataclass(frozen=True)
class Session:
    """An open session: whose (``user_id`` and ``name``, None for the owner key), the
    role it acts with (None for the owner key), whether it was extended just now, and
    the user's key it was opened with (``key_id``, None for a password or the owner key)."""

    extended: bool
    user_id: int | None = None
    name: str | None = None
    role: str | None = None
    key_id: int | None = None


def _end(now: datetime, key_expires_at: datetime | None) -> datetime:
    """When a session opened or extended at ``now`` ends: after :data:`LIFETIME`, or when
    its key expires if that is sooner."""
    end = now + LIFETIME
    return end if key_expires_at is None else min(end, key_expires_at)


def open_session(
    engine: Engine,
    key: SecretStr,
    now: datetime,
    *,
    user_id: int | None = None,
    api_key_id: int | None = None,
    key_expires_at: datetime | None = None,
) -> str:
    """Open a session for the owner ``key``, or for the user ``user_id`` (signed in with
    its key ``api_key_id``, if so, which expires at ``key_expires_at``: the session ends
    then at the latest); returns its id (for the cookie)."""
    session_id = secrets.token_urlsafe(32)
    q.open_session(
        engine,
        id_digest=_digest(session_id),
        key_digest=key_digest(key),
        now=now,
        expires_at=_end(now, key_expires_at),
        user_id=user_id,
        api_key_id=api_key_id,
    )
    return session_id


def lookup(engine: Engine, session_id: str | None, key: SecretStr, now: datetime) -> Session | None:
    """The open, unexpired session ``session_id`` (the owner ``key``'s, or an enabled
    user's, whose key is in force if it came with one) and the role it acts with;
    extended when near its end (never beyond its key's expiry). None otherwise."""
    if not session_id or len(session_id) > _MAX_ID:
        return None
    digest = _digest(session_id)
    found = q.holder(engine, id_digest=digest, key_digest=key_digest(key), now=now)
    if found is None:
        return None
    end = _end(now, found["key_expires_at"])
    extended = found["expires_at"] - now < RENEW_WITHIN and end > found["expires_at"]
    if extended:
        q.extend(engine, digest, end)
    if found["user_id"] is None:
        return Session(extended)
    role = acting_role(found["role"], found["key_role"])
    return Session(extended, found["user_id"], found["name"], role, found["api_key_id"])


def check(engine: Engine, session_id: str | None, key: SecretStr, now: datetime) -> bool | None:
    """None when ``session_id`` names no open session (:func:`lookup`); True when it
    does and was extended just now (the cookie should be sent again); False otherwise."""
    found = lookup(engine, session_id, key, now)
    return None if found is None else found.extended


def close_session(engine: Engine, session_id: str | None) -> None:
    """Close the session (a later request with the same id is refused)."""
    if session_id and len(session_id) <= _MAX_ID:
        q.close_session(engine, _digest(session_id))


__all__ = [
    "LIFETIME",
    "RENEW_WITHIN",
    "Session",
    "check",
    "close_session",
    "key_digest",
    "lookup",
    "open_session",
]
