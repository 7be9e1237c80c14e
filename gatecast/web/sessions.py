"""Dashboard sessions in the browser: the cookie and its renewal.

The records (open, check and extend, close; their lifetime) are
:mod:`campaigns.dashboard_sessions`; the cookie holds only the session's random id.
A request whose session was extended gets the cookie again with the new lifetime
(:class:`CookieRenewal`).

The cookie is ``HttpOnly``, ``SameSite=Lax`` and ``Secure`` when the request came over
HTTPS as gatecast sees it: its own TLS, or ``X-Forwarded-Proto: https`` from a proxy
listed in ``GATECAST_TRUSTED_PROXIES`` (uvicorn applies that header before the app).
"""

from __future__ import annotations

from datetime import datetime

from fastapi import Request, Response
from pydantic import SecretStr
from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from campaigns import dashboard_sessions as records
from campaigns.dashboard_sessions import LIFETIME, RENEW_WITHIN
from gatecast.web.asgi import HttpMiddleware
from storage.engine import Engine

COOKIE = "gatecast_session"
#: where a request whose session was extended keeps the cookie to send again
_RENEWED = "gatecast_session_renewed"


def lookup(
    request: Request, engine: Engine, key: SecretStr, now: datetime
) -> records.Session | None:
    """The open, unexpired session the request's cookie names (the owner ``key``'s or an
    enabled user's), else None; a session near its end is extended (the response carries
    the cookie again)."""
    session_id = cookie_of(request)
    found = records.lookup(engine, session_id, key, now)
    if found is None:
        return None
    if found.extended and session_id:
        renewed = Response()
        set_cookie(request, renewed, session_id)
        setattr(request.state, _RENEWED, renewed.headers["set-cookie"])
    return found


def is_valid(request: Request, engine: Engine, key: SecretStr, now: datetime) -> bool:
    """True when the request's cookie names an open session (:func:`lookup`)."""
    return lookup(request, engine, key, now) is not None


def end(engine: Engine, session_id: str | None) -> None:
    """Close the session (a later request with the same cookie is refused)."""
    records.close_session(engine, session_id)


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


class CookieRenewal(HttpMiddleware):
    """ASGI middleware: the response to a request whose session :func:`is_valid` extended
    carries the session cookie again, with its new lifetime."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
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
    "lookup",
    "served_over_https",
    "set_cookie",
]
