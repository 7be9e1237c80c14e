"""Every HTTP error in one shape: RFC 9457 problem details (``application/problem+json``).

A body is ``{"type", "title", "status", "detail", "code"}``: ``code`` is a stable
snake_case name, ``type`` the URI made from it (``tag:gatecast,2026:problem/<code>``),
``detail`` always one string; problems with fields add ``errors``, a list of
``{"loc", "msg", "type"}`` (``loc`` is the field's path, e.g. ``["body", "list_name"]``).
Dashboard pages get a friendly HTML page instead (a 404, a 405, a 500). No answer carries
a traceback or a server path; an unexpected error is logged with a reference the
answer repeats.

Texts that come from the domain can name things in the CLI's terms (an option such as
``--phone-column``, a file's path on the server, ``run `gatecast ...```); every place
that hands such a text to a web user passes it through :func:`web_terms` first.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount
from starlette.types import Message, Receive, Scope, Send

from gatecast.web import request_ids
from gatecast.web.asgi import HttpMiddleware

log = logging.getLogger("gatecast.web")

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "tag:gatecast,2026:problem/"

#: the code of a problem that is nothing more than its HTTP status
STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    500: "internal_error",
    502: "gateway_error",
    503: "unavailable",
}

#: paths answered in JSON even for a browser (everything else is a dashboard page)
_MACHINE_PREFIXES = ("/api/", "/webhooks/", "/metrics", "/openapi.json", "/healthz", "/static/")


class Problem(Exception):
    """An error answer. ``errors`` names the fields at fault; ``extra`` adds members."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        title: str | None = None,
        errors: Sequence[Mapping[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title or _phrase(status)
        self.errors = [dict(e) for e in errors]
        self.headers = dict(headers or {})
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The problem details object."""
        out: dict[str, Any] = {
            "type": TYPE_PREFIX + self.code,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
        }
        if self.errors:
            out["errors"] = self.errors
        out.update(self.extra)
        rid = request_ids.current.get()
        if rid != "-":  # the answer's X-Request-Id, for a support request or a log search
            out["request_id"] = rid
        return out

    def response(self) -> JSONResponse:
        """The problem as an ``application/problem+json`` answer."""
        return JSONResponse(
            self.body(), self.status, headers=self.headers or None, media_type=MEDIA_TYPE
        )


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def field_problem(
    loc: Sequence[str | int], msg: str, kind: str = "value_error", status: int = 422
) -> Problem:
    """A problem with one field: ``loc`` is its path (``("body", "list_name")``)."""
    where = ".".join(str(p) for p in loc if p not in ("body", "query", "path"))
    return Problem(
        status,
        "invalid_request",
        f"{where}: {msg}" if where else msg,
        title="The request is not valid",
        errors=[{"loc": list(loc), "msg": msg, "type": kind}],
    )


def errors_detail(errors: Sequence[Mapping[str, Any]], what: str = "the request") -> str:
    """One string summing up field errors (the first three, then a count)."""
    parts = []
    for e in errors[:3]:
        loc = [str(p) for p in e.get("loc", []) if p not in ("body", "query", "path")]
        parts.append(f"{'.'.join(loc)}: {e.get('msg', '')}" if loc else str(e.get("msg", "")))
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"{len(errors)} problem(s) in {what}: " + "; ".join(parts) + more


# --- web terms ----------------------------------------------------------------------

#: CLI options -> the form field (or API field) a web user fills in
CLI_FLAG_FIELDS: dict[str, str] = {
    "--phone-column": "phone_column",
    "--name-column": "name_column",
    "--region": "region",
    "--list": "list_name",
    "--sheet": "sheet",
    "--strict": "strict",
    "--unknown": "include_unknown",
    "--url": "url",
    "--label": "label",
}
_NAME_IT = re.compile(r"name it with (--[a-z][a-z0-9-]*)")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_RUN_CLI = re.compile(r"[;,(]?\s*(?:run\s+)?`gatecast [^`]*`\)?")
# an absolute path (not part of a URL): keep only its last part, the file's own name
_ABS_PATH = re.compile(r"(?<![\w:/.~-])/(?:[^\s/'\"`]+/)+(?=[^\s/'\"`])")


def _field_name(flag: str) -> str:
    name = CLI_FLAG_FIELDS.get(flag)
    return f"the {name} field" if name else "the form"


def web_terms(text: str) -> str:
    """``text`` said for a web user: file paths cut to the file's name, CLI options named
    as the form field, advice to run a ``gatecast`` command dropped."""
    text = _ABS_PATH.sub("", text)
    text = _RUN_CLI.sub("", text)
    text = _NAME_IT.sub(lambda m: f"choose it in {_field_name(m.group(1))}", text)
    return _FLAG.sub(lambda m: _field_name(m.group(0)), text).strip(" ;:,")


# --- handlers -----------------------------------------------------------------------


def wants_html(request: Request) -> bool:
    """True for a dashboard page a browser asked for (errors as HTML, not JSON)."""
    path = request.url.path
    if path.startswith(_MACHINE_PREFIXES) or path in ("/docs",):
        return False
    return "text/html" in request.headers.get("accept", "")


#: what renders an error as an HTML page: ``(request, status, title, message)``; the
#: dashboard sets it on ``app.state`` (:func:`set_error_page`), no import of it here
ErrorPage = Callable[[Request, int, str, str], HTMLResponse]


def set_error_page(app: FastAPI, page: ErrorPage) -> None:
    """Errors a browser gets on ``app``'s pages are rendered by ``page`` (the dashboard's)."""
    app.state.error_page = page


def _html(request: Request, status: int, title: str, message: str) -> Response:
    """The error as the app's HTML error page; as problem details on an app without one."""
    page = getattr(request.app.state, "error_page", None)
    if page is None:
        return Problem(status, STATUS_CODES.get(status, "error"), message, title=title).response()
    response: HTMLResponse = page(request, status, title, message)
    response.status_code = status
    return response


_HTML_MESSAGES = {
    404: ("Not found", "There is no such page. Check the address, or start from the menu."),
    405: ("Not allowed", "This page cannot be used that way. Start again from the menu."),
}


def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    headers = dict(exc.headers or {})
    if wants_html(request) and status in _HTML_MESSAGES:
        title, message = _HTML_MESSAGES[status]
        return _html(request, status, title, message)
    code = STATUS_CODES.get(status, "error")
    detail: Any = exc.detail
    if isinstance(detail, list):  # FastAPI's validation shape, from older call sites
        errors = [_clean_error(e) for e in detail if isinstance(e, Mapping)]
        return Problem(
            status, code, errors_detail(errors), errors=errors, headers=headers
        ).response()
    if status == 413 and detail == "Content Too Large":  # Starlette's body limit
        detail = "the request body is larger than the limit this server accepts"
    elif status == 404 and detail == "Not Found":
        detail = f"no such address: {request.method} {request.url.path}"
    elif status == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
        allowed = allowed_methods(request)
        if allowed:
            headers["Allow"] = allowed
    return Problem(status, code, str(detail), headers=headers).response()


#: the methods :func:`allowed_methods` asks the routes about
_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> str:
    """Every method the app answers at the request's path (``GET, POST``), over all the
    routes of that path: the router's own 405 names only the first route it tried. Each
    method is asked of the routes as a request of it (included routers answer too)."""
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
            if not isinstance(route, Mount)  # static files answer their own methods
        )
    ]
    return ", ".join(allowed)


def _clean_error(e: Mapping[str, Any]) -> dict[str, Any]:
    if e.get("type") == "json_invalid":  # loc holds a character position
        return {"loc": ["body"], "msg": "the body is not valid JSON", "type": "json_invalid"}
    if e.get("type") == "extra_forbidden":  # a field no request model has: a misspelling
        msg = "unknown field (check the spelling)"
        return {"loc": list(e.get("loc", [])), "msg": msg, "type": "extra_forbidden"}
    return {
        "loc": list(e.get("loc", [])),
        "msg": str(e.get("msg", "")),
        "type": str(e.get("type", "value_error")),
    }


def _validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [_clean_error(e) for e in exc.errors()]
    return Problem(
        422,
        "invalid_request",
        errors_detail(errors),
        title="The request is not valid",
        errors=errors,
    ).response()


def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    if exc.status == 403 and wants_html(request):  # a dashboard page above the user's role
        return _html(request, 403, exc.title, exc.detail)
    return exc.response()


def _unexpected(request: Request, exc: Exception, *, with_traceback: bool = False) -> Response:
    reference = secrets.token_hex(4)
    log.error(
        "unexpected error (reference %s, request_id %s) on %s %s: %s",
        reference,
        request_ids.current.get(),
        request.method,
        request.url.path,
        type(exc).__name__,
        exc_info=exc if with_traceback else None,
    )
    message = (
        "an unexpected error happened on the server; nothing more is shown here. "
        f"It was logged with the reference {reference}."
    )
    if wants_html(request):
        return _html(request, 500, "Something went wrong", message)
    return Problem(
        500, "internal_error", message, title="Internal Server Error", reference=reference
    ).response()


class CatchUnexpected(HttpMiddleware):
    """ASGI middleware: an exception no handler took becomes a 500 problem (logged with
    its traceback and a reference), and the connection stays usable; Starlette's own last
    resort would answer, then re-raise it into the server."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:  # too late for another answer
                raise
            response = _unexpected(Request(scope), exc, with_traceback=True)
            await response(scope, receive, send)


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as problem details (HTML for dashboard pages)."""
    app.add_exception_handler(Problem, _problem)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(Exception, _unexpected)  # the server then logs the traceback
    app.add_middleware(CatchUnexpected)


__all__ = [
    "CLI_FLAG_FIELDS",
    "MEDIA_TYPE",
    "Problem",
    "errors_detail",
    "field_problem",
    "install_problem_handlers",
    "set_error_page",
    "wants_html",
    "web_terms",
]
