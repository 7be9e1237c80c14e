"""The FastAPI application factory: API, webhook, dashboard, metrics, health."""

from __future__ import annotations

import re
import time
from functools import partial
from typing import Any

from fastapi import Depends, FastAPI, Request, status
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.types import Message, Receive, Scope, Send

from campaigns import test_sends
from gatecast.web import auth, body_limits, media, metrics, sessions, webhook
from gatecast.web.api import router as api_router
from gatecast.web.api.campaign_body import add_typed_bodies
from gatecast.web.api.common import problem_answers
from gatecast.web.api.errors import install_error_handlers
from gatecast.web.api.webhook_events_doc import add_webhooks
from gatecast.web.audit import AuditTrail
from gatecast.web.context import AppContext
from gatecast.web.dashboard import install_dashboard
from gatecast.web.request_ids import RequestIds, install_request_id_logging
from gatecast.web.sign_in_throttle import SignInThrottle
from storage.engine import DatabaseError, ping

DESCRIPTION = """\
gatecast's REST API. Authenticate every call with `Authorization: Bearer <key>`: the
deployment's owner key (`GATECAST_API_KEY`, role admin) or a user's key (`gck_...`, the role
it was given); the dashboard's session cookie works too. Reads need the viewer role, changes
the operator role; users, keys, the audit log, webhook endpoints and erasure need admin
(403 `role_required` otherwise). Only `/healthz` and the gateway webhook are open.
"""


def route_template(scope: Scope) -> str:
    """The route a request matched, as its template (``/api/v1/campaigns/{campaign_id}``):
    a metrics label of bounded cardinality (never a path with ids, nor the webhook's
    secret segment); ``unmatched`` for a path no route has.

    A route included by a router knows its own path without the router's prefix; the
    prefix is the request path's leading segments that the template does not cover."""
    path = str(scope.get("path", ""))
    template = getattr(scope.get("route"), "path", None)
    if isinstance(template, str) and template:
        if ":path}" in template:  # a converter spanning segments: no prefix to find
            return template
        tail = template.strip("/").split("/")
        given = path.strip("/").split("/")
        prefix = given[: max(0, len(given) - len(tail))]
        return "/" + "/".join(prefix + tail)
    if path.startswith(webhook.PATH_PREFIX):
        return webhook.PATH_PREFIX + "{secret}"
    if path.startswith("/static/"):
        return "/static/{path}"
    return "unmatched"


def operation_id(route: APIRoute) -> str:
    """An operation's id in the OpenAPI document: its tag and its function's name
    (``campaigns_post_campaign``, ``webhook_endpoints_patch_endpoint``), what a generated
    client names the call after: letters, digits and ``_`` only (a tag's spaces and
    hyphens become ``_``), so it stays one identifier in every generator."""
    tag = str(route.tags[0]) if route.tags else "gatecast"
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{tag}_{route.name}")


class GatecastAPI(FastAPI):
    """FastAPI with :class:`gatecast.web.webhook.WebhookFastPath` in front of its stack
    (request bodies: :class:`gatecast.web.body_limits.BodyGate`, its innermost middleware)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._front = RequestIds(webhook.WebhookFastPath(partial(FastAPI.__call__, self), self))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Webhook POSTs to the fast path, everything else through FastAPI, timed; every
        answer with its ``X-Request-Id`` (:mod:`gatecast.web.request_ids`)."""
        if scope["type"] != "http":
            await self._front(scope, receive, send)
            return
        started = time.perf_counter()
        answered = 500  # what the server sends when nothing answered

        async def watch(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = int(message["status"])
            await send(message)

        try:
            await self._front(scope, receive, watch)
        finally:
            seconds = time.perf_counter() - started
            metrics.observe_http(route_template(scope), scope["method"], answered, seconds)

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document, with the typed campaign body (:mod:`.campaign_body`),
        the 413 of every operation that takes a body and the outbound events
        (:mod:`.api.webhook_events_doc`)."""
        if self.openapi_schema is None:
            add_webhooks(
                problem_answers(body_limits.declare_limits(add_typed_bodies(super().openapi())))
            )
        return self.openapi_schema or {}


def create_app(ctx: AppContext) -> FastAPI:
    """The whole HTTP app (API, webhook, dashboard) for ``ctx``.

    The API key is ``ctx.api_key`` when given, else :func:`gatecast.web.auth.ensure_api_key`
    (environment, or the generated key file). Call ``ensure_api_key`` yourself first if
    you want to print a newly generated key. A key that is too short raises
    :class:`gatecast.web.auth.WeakApiKey`.
    """
    key = ctx.api_key or auth.ensure_api_key(ctx.settings).value
    auth.require_strong_key(key.get_secret_value(), "the app's context")
    app = GatecastAPI(
        title="gatecast",
        version="0.1.0",
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        generate_unique_id_function=operation_id,
    )
    app.state.ctx = ctx
    app.state.api_key = key
    install_request_id_logging()
    app.state.sign_in_throttle = SignInThrottle()
    # the composer's test sends, per user and hour (gatecast.web.api.test_sends)
    app.state.draft_test_limit = SignInThrottle(
        max_failures=test_sends.PER_HOUR, window=3600.0, max_addresses=10_000
    )
    app.add_middleware(body_limits.BodyGate)  # innermost: before routing reads a body
    app.add_middleware(sessions.CookieRenewal)
    app.add_middleware(AuditTrail)
    install_error_handlers(app)
    app.include_router(webhook.router)
    app.include_router(media.router)
    app.include_router(api_router)

    @app.get("/healthz", tags=["ops"], summary="Health check (no authentication)")
    def healthz() -> JSONResponse:
        """200 when the database answers, else 503 (the error's type only, no details)."""
        try:
            ping(ctx.engine)
        except DatabaseError as exc:
            return JSONResponse(
                {"status": "error", "database": type(exc).__name__},
                status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return JSONResponse({"status": "ok"})

    guarded = [Depends(auth.require_api_key)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=guarded)
    def openapi_document() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=guarded)
    def interactive_docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="gatecast API",
            swagger_js_url="/static/vendor/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
        )

    registry = metrics.build_registry(ctx)

    @app.get(
        "/metrics",
        tags=["ops"],
        dependencies=guarded,
        response_class=Response,
        summary="Prometheus metrics, read from the database at scrape time",
    )
    def prometheus_metrics(request: Request) -> Response:
        body, content_type = metrics.render(registry, request.headers.get("accept"))
        return Response(body, media_type=content_type)

    install_dashboard(app)
    return app
