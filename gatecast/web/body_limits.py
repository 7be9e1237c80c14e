"""Nothing is read before it is allowed: the gate every request body passes (issue 27).

:class:`BodyGate` is the app's innermost middleware: it runs before routing, where FastAPI
reads and parses a body before any dependency (authentication included) is solved. For a
request that carries a body (a ``Content-Length`` above 0, or any ``Transfer-Encoding``) it

1. works out who the caller is from the headers alone (:func:`gatecast.web.auth.identify`:
   a bearer key or the session cookie) and answers 401 before reading a byte when nobody
   is signed in, except on the open routes (:data:`OPEN_ROUTES`: sign-in and sign-out);
2. finds the route's body limit (:func:`limit_for`: :data:`UPLOAD_ROUTES` take
   ``GATECAST_IMPORT_MAX_BYTES`` plus the multipart slack, :data:`MEDIA_ROUTES` the
   largest media file allowed (``GATECAST_MEDIA_MAX_BYTES``, ``campaigns.media``) plus
   the slack, every other route ``GATECAST_REQUEST_MAX_BYTES``) and answers 413 at once
   when the declared length is larger, or as soon as the bytes streamed so far pass it
   (chunked bodies too), without reading the rest.

The gateway's webhook (``/webhooks/gateway/{secret}``) is left alone: it checks its secret
before reading and keeps its own limit (:mod:`gatecast.web.webhook`). Requests without a
body pass untouched: their routes authenticate as always. The identity worked out here is
the request's (cached in its state), so the route does not look it up again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi.routing import iter_route_contexts
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import compile_path
from starlette.types import Message, Receive, Scope, Send

from campaigns.media import upload_limit
from gatecast.settings import Settings
from gatecast.web import auth
from gatecast.web.api.imports import MULTIPART_SLACK
from gatecast.web.asgi import HttpMiddleware
from gatecast.web.problems import Problem
from gatecast.web.webhook import PATH_PREFIX as WEBHOOK_PREFIX

#: routes that take a file upload: their limit is ``GATECAST_IMPORT_MAX_BYTES`` (+ slack)
UPLOAD_ROUTES = frozenset(
    {
        ("POST", "/api/v1/imports"),
        ("POST", "/api/v1/imports/preview"),
        ("POST", "/api/v1/campaigns/toml"),
        ("POST", "/api/v1/campaigns/preview/toml"),
    }
)
#: the media upload: its limit is the largest media file allowed (+ slack)
MEDIA_ROUTES = frozenset({("POST", "/api/v1/media")})
#: routes that take a small form from anybody (the sign-in page's); the JSON limit holds
OPEN_ROUTES = frozenset({("POST", "/login"), ("POST", "/logout")})


def limit_for(method: str, template: str, settings: Settings) -> int:
    """The most bytes a body of ``method template`` may have (the one home of the rule)."""
    if (method, template) in UPLOAD_ROUTES:
        return settings.import_max_bytes + MULTIPART_SLACK
    if (method, template) in MEDIA_ROUTES:
        return upload_limit(settings.media_max_bytes) + MULTIPART_SLACK
    return settings.request_max_bytes


class BodyTooLarge(HTTPException):
    """A body past its route's limit: 413, answered as a ``too_large`` problem (raised
    where the app reads the body, an HTTP exception so that its handlers answer it)."""

    def __init__(self, limit: int, template: str, setting: str) -> None:
        super().__init__(
            413,
            f"the request body is larger than the {limit} bytes {template} accepts "
            f"(the server's {setting}); the rest was not read",
        )
        self.limit = limit

    def problem(self) -> Problem:
        """The answer, when no handler of the app gave it."""
        return Problem(413, "too_large", str(self.detail), limit=self.limit)


def setting_for(method: str, template: str) -> str:
    """The setting that holds a route's body limit."""
    if (method, template) in UPLOAD_ROUTES:
        return "GATECAST_IMPORT_MAX_BYTES"
    if (method, template) in MEDIA_ROUTES:
        return "GATECAST_MEDIA_MAX_BYTES"
    return "GATECAST_REQUEST_MAX_BYTES"


def has_body(scope: Scope) -> bool:
    """True when the request declares a body: a ``Content-Length`` above 0 or any
    ``Transfer-Encoding`` (chunked)."""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
    return False


def declared_length(scope: Scope) -> int | None:
    """The ``Content-Length`` the request declares, if it is a number."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.strip()
            return int(text) if text.isdigit() else None
    return None


@dataclass(frozen=True)
class _Template:
    pattern: re.Pattern[str]
    methods: frozenset[str]
    path: str


def route_table(app: Any) -> list[_Template]:
    """Every route of ``app`` as its full template (router prefixes included) with its
    path's pattern and methods; made once per app."""
    table: list[_Template] | None = getattr(app.state, "body_route_table", None)
    if table is None:
        table = []
        for context in iter_route_contexts(app.routes):
            path = context.path
            if isinstance(path, str) and path:
                pattern, _, _ = compile_path(path)
                table.append(_Template(pattern, frozenset(context.methods or ()), path))
        app.state.body_route_table = table
    return table


def template_for(app: Any, method: str, path: str) -> str:
    """The template of the route ``method path`` will reach (a method mismatch still names
    the path's route); ``path`` itself when no route has it."""
    other: str | None = None
    for route in route_table(app):
        if route.pattern.match(path):
            if method in route.methods:
                return route.path
            other = other or route.path
    return other or path


def declare_limits(document: dict[str, Any]) -> dict[str, Any]:
    """Every operation of ``document`` (an OpenAPI document, changed in place) that takes
    a body answers 413 past its route's limit: say so, naming the setting."""
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "requestBody" in operation:
                setting = setting_for(method.upper(), path)
                operation.setdefault("responses", {})["413"] = {
                    "description": f"The body is larger than this route accepts ({setting})"
                }
    return document


class BodyGate(HttpMiddleware):
    """ASGI middleware, innermost before the routes: authentication before the body, and
    the route's body limit enforced while it streams in (see the module notes)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if path.startswith(WEBHOOK_PREFIX) or not has_body(scope):
            await self.app(scope, receive, send)
            return
        app = scope["app"]
        method = str(scope["method"])
        template = template_for(app, method, path)
        if (method, template) not in OPEN_ROUTES:
            request = Request(scope)
            if await run_in_threadpool(auth.identify, request) is None:
                refused = auth.unauthenticated()
                answer = Problem(401, "unauthorized", refused.detail, headers=refused.headers)
                await answer.response()(scope, receive, send)
                return
        limit = limit_for(method, template, app.state.ctx.settings)
        refusal = BodyTooLarge(limit, template, setting_for(method, template))
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await refusal.problem().response()(scope, receive, send)
            return
        await self._within(refusal, scope, receive, send)

    async def _within(
        self, refusal: BodyTooLarge, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serve the request, stopping its body at ``refusal.limit`` bytes: ``refusal`` is
        raised where the app reads (its handlers answer it), or answered here when it
        escapes before any answer started."""
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > refusal.limit:
                    raise refusal
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as raised:
            if raised is not refusal or started:
                raise
            await refusal.problem().response()(scope, receive, send)


__all__ = [
    "MEDIA_ROUTES",
    "OPEN_ROUTES",
    "UPLOAD_ROUTES",
    "BodyGate",
    "BodyTooLarge",
    "declare_limits",
    "declared_length",
    "has_body",
    "limit_for",
    "route_table",
    "setting_for",
    "template_for",
]
