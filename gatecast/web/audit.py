"""The audit trail of the HTTP app: every change (any method but GET, HEAD, OPTIONS) made
by a known actor through the API or the dashboard's scripts, recorded with its route
template, target and outcome (:class:`AuditTrail`); sign-ins and sign-outs are recorded
by the dashboard's sign-in routes (:func:`record_sign_in`).

Not recorded here: requests nobody is signed in for (401: an unknown caller cannot flood
the log), the gateway's webhook intake (its own secret; events are not changes made by a
person), ``/login`` and ``/logout`` (explicit entries instead). The entry is written before
the response's last part is sent, so a client that reads the log after an answer sees it.
The entries themselves are ``campaigns.audit``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.types import Message, Receive, Scope, Send

from campaigns import audit
from gatecast.web.asgi import HttpMiddleware
from gatecast.web.auth import IDENTITY_STATE, Identity, client_address, identify, route_template
from gatecast.web.context import AppContext
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


class AuditTrail(HttpMiddleware):
    """ASGI middleware: one audit entry per changing request of a known actor."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        path: str = scope["path"]
        if method in READ_METHODS or path.startswith(_NOT_HERE):
            await self.app(scope, receive, send)
            return
        status = 500
        body = bytearray()

        async def recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                if status == 201 and len(body) < _MAX_BODY:
                    body.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    await self._record(scope, status, bytes(body))
            await send(message)

        try:
            await self.app(scope, receive, recording)
        except Exception:  # answered as a 500 further out
            await self._record(scope, 500, b"")
            raise

    async def _record(self, scope: Scope, status: int, body: bytes) -> None:
        request = Request(scope)
        identity: Identity | None = scope.get("state", {}).get(IDENTITY_STATE)
        if identity is None or status == 401:
            return
        template = route_template(request)
        kind, ident = target_of(template, dict(scope.get("path_params") or {}))
        if ident is None and status == 201:
            ident = _created_id(body)
        ctx = request.app.state.ctx
        assert isinstance(ctx, AppContext)
        try:
            await run_in_threadpool(
                audit.record,
                ctx.engine,
                at=ctx.clock(),
                actor=identity.actor,
                role=identity.role,
                action=f"{scope['method']} {template}",
                outcome=audit.outcome_of(status),
                source=client_address(request),
                target_type=kind,
                target_id=ident,
                status=status,
                detail={"path": scope["path"], "via": identity.via},
            )
        except Exception as exc:  # the change is done; a lost entry is logged, not raised
            log.warning("audit entry not stored for %s %s: %s", scope["method"], template, exc)


def record_sign_in(request: Request, action: str, outcome: str, actor: str, role: str) -> None:
    """An entry for a sign-in (``sign-in``), a failed one or a sign-out (``sign-out``)."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, AppContext)
    audit.record(
        ctx.engine,
        at=ctx.clock(),
        actor=actor or "(nobody)",
        role=role,
        action=action,
        outcome=outcome,
        source=client_address(request),
        target_type="session",
    )


def actor_of(request: Request) -> Identity | None:
    """Who the request is (for a sign-out's entry)."""
    return identify(request)


__all__ = ["AuditTrail", "actor_of", "record_sign_in", "target_of"]
