"""Dashboard sign-in: pages need a session (API key or session cookie), else they redirect
to /login; a page above the signed-in role answers 403 (``gatecast.web.roles``)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import Request

from gatecast.web.auth import authorise, identify


class LoginRequired(Exception):
    """Raised by :func:`require_session`; the app turns it into a redirect to /login."""

    def __init__(self, next_path: str) -> None:
        super().__init__("sign-in required")
        self.next_path = next_path


def safe_next(path: str | None) -> str:
    """Only local paths are followed after sign-in (no open redirects)."""
    if not path or not path.startswith("/") or path.startswith("//"):
        return "/"
    return path


def require_session(request: Request) -> None:
    """FastAPI dependency for pages: redirect to /login unless signed in; 403 when the
    role may not see the page."""
    identity = identify(request)
    if identity is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(quote(target, safe=""))
    authorise(request, identity)
