"""Dashboard sessions as records: open, check (and extend), close.

A session id is 256 random bits; the database keeps its SHA-256, never the id, with a
digest of the API key that signed in (changing the key ends every session). A session
ends :data:`LIFETIME` after sign-in unless it is used: a check made when less than
:data:`RENEW_WITHIN` remains extends it to :data:`LIFETIME` again (one write at most
every 6 hours a session). Closing deletes the record, so a copied cookie is refused from
then on. Expired records are pruned when a session opens. The cookie itself is the web's
(``gatecast.web.sessions``).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from pydantic import SecretStr

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


def open_session(engine: Engine, key: SecretStr, now: datetime) -> str:
    """Open a session for ``key``; returns its id (for the cookie)."""
    session_id = secrets.token_urlsafe(32)
    q.open_session(
        engine,
        id_digest=_digest(session_id),
        key_digest=key_digest(key),
        now=now,
        expires_at=now + LIFETIME,
    )
    return session_id


def check(engine: Engine, session_id: str | None, key: SecretStr, now: datetime) -> bool | None:
    """None when ``session_id`` names no open, unexpired session of ``key``; True when it
    does and was extended just now (the cookie should be sent again); False otherwise."""
    if not session_id or len(session_id) > _MAX_ID:
        return None
    digest = _digest(session_id)
    expires_at = q.expiry(engine, id_digest=digest, key_digest=key_digest(key), now=now)
    if expires_at is None:
        return None
    if expires_at - now < RENEW_WITHIN:
        q.extend(engine, digest, now + LIFETIME)
        return True
    return False


def close_session(engine: Engine, session_id: str | None) -> None:
    """Close the session (a later request with the same id is refused)."""
    if session_id and len(session_id) <= _MAX_ID:
        q.close_session(engine, _digest(session_id))


__all__ = ["LIFETIME", "RENEW_WITHIN", "check", "close_session", "key_digest", "open_session"]
