"""The shape of gatecast's own ASGI middleware: HTTP requests handled, the rest passed on."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware:
    """ASGI middleware that sees HTTP requests only (:meth:`handle`); lifespan and other
    scopes go straight to the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request (override; by default the app answers it)."""
        await self.app(scope, receive, send)
