"""Dashboard sessions: server-side records that the session cookie points at.

Signing in stores a session (:mod:`storage.queries.sessions`) and gives the browser a
cookie holding only its random id (256 bits); the database keeps the id's SHA-256, never
the id. A session ends :data:`LIFETIME` after sign-in unless it is used: a request made
when less than :data:`RENEW_WITHIN` remains extends it to :data:`LIFETIME` again (one
write at most every 6 hours a session) and :class:`CookieRenewal` sends the cookie again
with the new lifetime. It also ends at sign-out (the record is deleted, so a copied
cookie is refused from then on) and when the API key changes. Expired records are
pruned at each sign-in.

The cookie is ``HttpOnly``, ``SameSite=Lax`` and ``Secure`` when the request came over
HTTPS as gatecast sees it: its own TLS, or ``X-Forwarded-Proto: https`` from a proxy
listed in ``GATECAST_TRUSTED_PROXIES`` (uvicorn applies that header before the app).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from fastapi import Request, Response
from pydantic import SecretStr
from sqlalchemy import Engine
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storage.queries import sessions as q

COOKIE = "gatecast_session"
#: how long a session lasts from sign-in, or from its last extension
LIFETIME = timedelta(hours=12)
#: a session used when less than this remains is extended
RENEW_WITHIN = LIFETIME / 2
#: where a request whose session was extended keeps the cookie to send again
_RENEWED = "gatecast_session_renewed"


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def key_digest(key: SecretStr) -> str:
    """Which API key a session belongs to (a digest, never the key)."""
    return hashlib.sha256(
        b"gatecast-dashboard-session\0" + key.get_secret_value().encode()
    ).hexdigest()


def start(engine: Engine, key: SecretStr, now: datetime) -> str:
    """Open a session for ``key``; returns the id the cookie carries."""
    session_id = secrets.token_urlsafe(32)
    q.open_session(
        engine,
        id_digest=_digest(session_id),
        key_digest=key_digest(key),
        now=now,
        expires_at=now + LIFETIME,
    )
    return session_id


def is_valid(request: Request, engine: Engine, key: SecretStr, now: datetime) -> bool:
    """True when the request's cookie names an open, unexpired session of ``key``; a
    session near its end is extended (the response carries the cookie again)."""
    session_id = cookie_of(request)
    if not session_id or len(session_id) > 100:
        return False
    digest = _digest(session_id)
    expires_at = q.expiry(engine, id_digest=digest, key_digest=key_digest(key), now=now)
    if expires_at is None:
        return False
    if expires_at - now < RENEW_WITHIN:
        q.extend(engine, digest, now + LIFETIME)
        renewed = Response()
        set_cookie(request, renewed, session_id)
        setattr(request.state, _RENEWED, renewed.headers["set-cookie"])
    return True


def end(engine: Engine, session_id: str | None) -> None:
    """Close the session (a later request with the same cookie is refused)."""
    if session_id and len(session_id) <= 100:
        q.close_session(engine, _digest(session_id))


def served_over_https(request: Request) -> bool:
    """True when the request reached gatecast over HTTPS (directly, or as a trusted
    proxy's ``X-Forwarded-Proto`` says)."""
    return request.url.scheme == "https"


def set_cookie(request: Request, response: Response, session_id: str) -> None:
    """Give the browser the session cookie (``Secure`` when served over HTTPS)."""
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=int(LIFETIME.total_seconds()),
        path="/",
        httponly=True,
        samesite="lax",
        secure=served_over_https(request),
    )


def clear_cookie(request: Request, response: Response) -> None:
    """Tell the browser to forget the session cookie."""
    response.delete_cookie(
        COOKIE, path="/", httponly=True, samesite="lax", secure=served_over_https(request)
    )


def cookie_of(request: Request) -> str | None:
    """The session id the request's cookie carries, if any."""
    return request.cookies.get(COOKIE)


class CookieRenewal:
    """ASGI middleware: the response to a request whose session :func:`is_valid` extended
    carries the session cookie again, with its new lifetime."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def renewing(message: Message) -> None:
            if message["type"] == "http.response.start":
                header = scope.get("state", {}).get(_RENEWED)
                if header:
                    MutableHeaders(scope=message).append("set-cookie", header)
            await send(message)

        await self.app(scope, receive, renewing)


__all__ = [
    "COOKIE",
    "LIFETIME",
    "RENEW_WITHIN",
    "CookieRenewal",
    "clear_cookie",
    "cookie_of",
    "end",
    "is_valid",
    "key_digest",
    "served_over_https",
    "set_cookie",
    "start",
]
