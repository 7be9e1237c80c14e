"""The audit trail of the HTTP app: every change (any method but GET, HEAD, OPTIONS) made
by a known actor through the API or the dashboard's scripts, recorded with its route
template, target, outcome, the API key that acted (``key_id``) and, where a route noted
them (:func:`note_changes`), the values it replaced (:class:`AuditTrail`); sign-ins and
sign-outs are recorded by the dashboard's sign-in routes (:func:`record_sign_in`).

Also recorded: an export of personal data (:data:`EXPORTS`: contacts, reports, the audit
log itself) as ``export GET <route>``; an idempotent request answered from its first
answer as ``replay POST <route>`` (not a second creation); a refused credential (a wrong
or dead API key: 401 ``authentication``; a wrong sign-in) at most once per address per
minute (:class:`FailureLog`), the next entry counting the ones left out. The actor of a
refused key is ``(a key)`` with at most the key's shown prefix, never the key.

Not recorded: the POSTs that change nothing (:data:`READ_ONLY_POSTS`: previews,
checks, conversions), other requests nobody is signed in for (an unknown caller cannot flood
the log), the gateway's webhook intake (its own secret; events are not changes made by a
person), ``/login`` and ``/logout`` (explicit entries instead). The entry is written before
the response's last part is sent, so a client that reads the log after an answer sees it.
The entries themselves are ``campaigns.audit``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any
from urllib.parse import unquote_plus

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from campaigns import audit, users
from gatecast.web.asgi import HttpMiddleware
from gatecast.web.auth import (
    IDENTITY_STATE,
    Identity,
    bearer_token,
    client_address,
    identify,
    route_template,
)
from gatecast.web.context import AppContext
from gatecast.web.idempotency import REPLAYED_HEADER
from gatecast.web.roles import READ_METHODS

log = logging.getLogger("gatecast.web.audit")

#: paths whose requests the trail leaves alone (see the module notes)
_NOT_HERE = ("/webhooks/gateway/", "/login", "/logout")
#: the most of a creating answer read to find the new row's id
_MAX_BODY = 64 * 1024


def target_of(template: str, params: dict[str, Any]) -> tuple[str | None, str | None]:
    """What a route acts on: the last path parameter (``{campaign_id}`` -> ``campaign``,
    ``{name}`` under ``/users`` -> ``user``), else the first part after ``/api/v1``."""
    parts = [p for p in template.split("/") if p and p not in ("api", "v1")]
    for n in range(len(parts) - 1, -1, -1):
        part = parts[n]
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            kind = name.removesuffix("_id") if name.endswith("_id") else None
            if kind is None:
                kind = parts[n - 1].rstrip("s") if n else name
            return kind.replace("-", "_"), str(params.get(name, ""))
    return (parts[0].rstrip("s").replace("-", "_"), None) if parts else (None, None)


def _created_id(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    found = data.get("id") if isinstance(data, dict) else None
    return None if found is None else str(found)


class FailureLog:
    """Refused credentials in the audit log at most once per address per ``window``
    seconds: :meth:`admit` says whether to write an entry now, and how many refusals of
    that address were left out since its last one. Remembers ``max_addresses`` at most
    (the oldest forgotten first); safe across threads."""

    def __init__(
        self,
        window: float = 60.0,
        max_addresses: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window = window
        self._max = max_addresses
        self._clock = clock
        self._last: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, address: str) -> int | None:
        """None: count this refusal, write nothing; else write an entry now, saying how
        many refusals of ``address`` it follows unrecorded."""
        now = self._clock()
        with self._lock:
            found = self._last.get(address)
            if found is not None and now - found[0] < self._window:
                self._last[address] = (found[0], found[1] + 1)
                return None
            self._last[address] = (now, 0)
            self._last.move_to_end(address)
            while len(self._last) > self._max:
                self._last.popitem(last=False)
            return found[1] if found is not None else 0


def failure_log(app: Any) -> FailureLog:
    """The app's :class:`FailureLog` (made on first use)."""
    found = getattr(app.state, "audit_failure_log", None)
    if not isinstance(found, FailureLog):
        found = FailureLog()
        app.state.audit_failure_log = found
    return found


#: routes (as their routers declare them) that hand out personal data: their GETs are
#: recorded as ``export GET <route>``
EXPORTS = frozenset(
    {
        "/contacts/export",
        *(f"/campaigns/{{campaign_id}}/report.{fmt}" for fmt in ("{fmt}", "csv", "json", "xlsx")),
        "/audit/export",
    }
)
#: POST routes that change nothing (a preview, a check, a conversion): not recorded, so
#: a preview the composer refreshes as the user types never shows as a failed change
READ_ONLY_POSTS = frozenset(
    {
        "/campaigns/preview",
        "/campaigns/preview/toml",
        "/campaigns/preview/recipient",
        "/campaigns/check",
        "/campaigns/to-toml",
        "/campaigns/from-toml",
        "/imports/preview",
    }
)

#: where a route leaves the values its change replaced (:func:`note_changes`)
CHANGES_STATE = "gatecast_audit_changes"


def note_changes(request: Request, changes: Mapping[str, Any]) -> None:
    """For the request's audit entry: what its change replaced, ``{field: [before,
    after]}`` (:func:`campaigns.audit.changed`); nothing when ``changes`` is empty."""
    if changes:
        setattr(request.state, CHANGES_STATE, dict(changes))


def presented_key(scope: Scope) -> str | None:
    """How a refused bearer key is named in the log: ``(a key)``, with the shown prefix of
    a user's key (``gck_AbCd``); None when the request sent no bearer key."""
    token = bearer_token(Request(scope))
    if token is None:
        return None
    if token.startswith(users.KEY_PREFIX):
        return f"(a key {token[: users.SHOWN_PREFIX]})"
    return "(a key)"


class AuditTrail(HttpMiddleware):
    """ASGI middleware: one audit entry per changing request of a known actor, per export
    of personal data, per refused API key (rate-limited)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        path: str = scope["path"]
        if path.startswith(_NOT_HERE):
            await self.app(scope, receive, send)
            return
        reading = method in READ_METHODS
        status = 500
        replayed = False
        body = bytearray()

        async def recording(message: Message) -> None:
            nonlocal status, replayed
            if message["type"] == "http.response.start":
                status = int(message["status"])
                replayed = Headers(raw=message.get("headers", [])).get(REPLAYED_HEADER) == "true"
            elif message["type"] == "http.response.body":
                if status == 201 and len(body) < _MAX_BODY:
                    body.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    if status == 401:
                        await self._refused_key(scope)
                    elif not reading and _route_path(scope) not in READ_ONLY_POSTS:
                        await self._record(scope, status, bytes(body), replayed=replayed)
                    elif status < 400 and _route_path(scope) in EXPORTS:
                        await self._record(scope, status, b"", prefix="export ")
            await send(message)

        try:
            await self.app(scope, receive, recording)
        except Exception:  # answered as a 500 further out
            if not reading and _route_path(scope) not in READ_ONLY_POSTS:
                await self._record(scope, 500, b"")
            raise

    async def _record(
        self, scope: Scope, status: int, body: bytes, *, replayed: bool = False, prefix: str = ""
    ) -> None:
        request = Request(scope)
        identity: Identity | None = scope.get("state", {}).get(IDENTITY_STATE)
        if identity is None:
            return
        template = route_template(request)
        kind, ident = target_of(template, dict(scope.get("path_params") or {}))
        if ident is None and status == 201:
            ident = _created_id(body)
        changes = scope.get("state", {}).get(CHANGES_STATE)
        detail = {"path": scope["path"], "via": identity.via}
        if prefix:  # an export: what was asked for
            detail["query"] = unquote_plus(bytes(scope.get("query_string", b"")).decode("latin-1"))
        await _store(
            request,
            actor=identity.actor,
            role=identity.role,
            action=f"{'replay ' if replayed else prefix}{scope['method']} {template}",
            outcome=audit.outcome_of(status),
            target_type=kind,
            target_id=ident,
            status=status,
            detail=detail,
            key_id=identity.key_id,
            changes=changes,
        )

    async def _refused_key(self, scope: Scope) -> None:
        actor = presented_key(scope)
        if actor is None:  # no key sent: an unknown caller, not a failed authentication
            return
        request = Request(scope)
        left_out = failure_log(request.app).admit(client_address(request))
        if left_out is None:
            return
        await _store(
            request,
            actor=actor,
            role="",
            action="authentication",
            outcome="refused",
            target_type="api",
            status=401,
            detail={"path": scope["path"], "method": scope["method"], "unrecorded": left_out},
        )


def _route_path(scope: Scope) -> str | None:
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else None


async def _store(request: Request, **entry: Any) -> None:
    """Append an entry in a worker thread; a failure is logged, never raised (the change
    is done)."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, AppContext)
    try:
        await run_in_threadpool(
            partial(audit.record, ctx.engine, at=ctx.clock(), source=client_address(request)),
            **entry,
        )
    except Exception as exc:
        log.warning("audit entry not stored for %s: %s", entry.get("action"), exc)


def record_sign_in(request: Request, action: str, outcome: str, actor: str, role: str) -> None:
    """An entry for a sign-in (``sign-in``), a failed one or a sign-out (``sign-out``);
    failed ones at most once per address a minute (:class:`FailureLog`)."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, AppContext)
    detail: dict[str, Any] = {}
    if outcome != "ok":
        left_out = failure_log(request.app).admit(client_address(request))
        if left_out is None:
            return
        detail["unrecorded"] = left_out
    audit.record(
        ctx.engine,
        at=ctx.clock(),
        actor=(actor or "(nobody)")[:64],
        role=role,
        action=action,
        outcome=outcome,
        source=client_address(request),
        target_type="session",
        detail=detail,
    )


def actor_of(request: Request) -> Identity | None:
    """Who the request is (for a sign-out's entry)."""
    return identify(request)


__all__ = [
    "CHANGES_STATE",
    "EXPORTS",
    "AuditTrail",
    "FailureLog",
    "actor_of",
    "failure_log",
    "note_changes",
    "presented_key",
    "record_sign_in",
    "target_of",
]
