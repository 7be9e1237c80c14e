"""The sandbox's HTTP face: every operation of the spec on ``/api`` and ``/messenger_api``
(faults, traps and latency included), or Evolution API's routes (``evolution.py``) or
WAHA's (``waha.py``), plus
the ``/sandbox/...`` routes of ``inspection.py``.

Starlette rather than FastAPI: the hot path reads the raw request and writes pre-encoded
JSON, with no per-request validation models or logging.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.sandbox.config import SandboxConfig
from gateway.sandbox.inspection import Inspection
from gateway.sandbox.refusals import QUOTA, GatewayRefusal
from gateway.sandbox.state import SandboxState
from gateway.sandbox.validation import ValidSend, validate_group, validate_send, validate_template

BASES = ("api", "messenger_api")
INSTANCE_OPS = (
    "create_instance",
    "reboot",
    "reset_instance",
    "reconnect",
    "logout",
    "get_qrcode",
    "set_webhook",
)
_RAW_SEND = "gatecast.sandbox.raw_send"


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(data, status_code=status, headers=headers, media_type="application/json")


def _scalar(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def read_params(
    request: Request, *, dialect: str, group: bool = False, number_from_json: bool = True
) -> dict[str, str]:
    """Query string, then form fields or a JSON body on top (as the field notes describe).

    The reference build never reads ``group_id`` from a JSON body, and some reference
    builds do not read ``number`` from it either (``number_from_json=False``).
    """
    params = dict(request.query_params)
    if request.method != "POST":
        return params
    ctype = request.headers.get("content-type", "")
    if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await request.form()
        for key, value in form.items():
            if isinstance(value, str):
                params[key] = value
    else:
        raw = await request.body()
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if isinstance(body, dict):
                for key, value in body.items():
                    if dialect == "reference" and (
                        (group and key == "group_id") or (key == "number" and not number_from_json)
                    ):
                        continue
                    text = _scalar(value)
                    if text is not None:
                        params[key] = text
    return params


class _Sandbox:
    """Route handlers bound to one :class:`SandboxState`."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state
        self.cfg = state.config

    # --------------------------------------------------------------- helpers
    async def _latency(self, extra: tuple[int, int] = (0, 0)) -> None:
        lo, hi = self.cfg.latency_ms
        lo, hi = lo + extra[0], hi + extra[1]
        if hi > 0:
            with self.state.lock:
                ms = self.state.rng.uniform(lo, hi)
            await asyncio.sleep(ms / 1000)

    def _count(self, name: str) -> None:
        self.state.stats.requests[name] += 1

    def _refused(self, exc: GatewayRefusal) -> Response:
        self.state.stats.errors[exc.message] += 1
        return _json(exc.body())

    # --------------------------------------------------------------- instance operations
    def instance_route(self, op: str) -> Callable[[Request], Awaitable[Response]]:
        """The handler of one instance operation (parameters in the query string)."""
        state = self.state

        async def handler(request: Request) -> Response:
            await self._latency(self.cfg.webhook_latency_ms if op == "set_webhook" else (0, 0))
            params = await read_params(request, dialect=self.cfg.dialect)
            token, iid = params.get("access_token"), params.get("instance_id")
            with state.lock:
                self._count(op)
                try:
                    if op == "create_instance":
                        return _json(state.create_instance(token))
                    if op == "set_webhook":
                        body = state.set_webhook(
                            token, iid, params.get("webhook_url"), params.get("enable")
                        )
                        return _json(body)
                    if op != "get_qrcode":
                        method = getattr(state, op)
                        return _json(method(token, iid))
                except GatewayRefusal as exc:
                    return self._refused(exc)
            try:
                return _json(state.get_qrcode(token, iid))
            except GatewayRefusal as exc:
                with state.lock:
                    return self._refused(exc)

        return handler

    # --------------------------------------------------------------- sends
    def send_route(self, endpoint: str) -> Callable[[Request], Awaitable[Response]]:
        """The handler of send, send_group or send_template."""
        cfg = self.cfg

        async def handler(request: Request) -> Response:
            await self._latency()
            body_json: Any = None
            if endpoint == "send_template":
                params = dict(request.query_params)
                raw = await request.body()
                try:
                    body_json = json.loads(raw) if raw.strip() else None
                except ValueError:
                    body_json = None
            else:
                params = await read_params(
                    request,
                    dialect=cfg.dialect,
                    group=endpoint == "send_group",
                    number_from_json=cfg.number_from_json,
                )
            token, iid = params.get("access_token"), params.get("instance_id")

            def validate() -> ValidSend:
                if endpoint == "send":
                    return validate_send(params, cfg.dialect)
                if endpoint == "send_group":
                    return validate_group(params, cfg.dialect)
                return validate_template(body_json)

            return await self.accept_send(request, endpoint, token, iid, validate)

        return handler

    async def accept_send(
        self,
        request: Request,
        endpoint: str,
        token: str | None,
        iid: str | None,
        validate: Callable[[], ValidSend],
        *,
        answer: Callable[[dict[str, Any]], Response] = _json,
        refuse: Callable[[GatewayRefusal], Response] | None = None,
    ) -> Response:
        """A send request past its parsing: faults, the instance, ``validate``, quota and
        traps, then the record; ``answer`` writes the success body, ``refuse`` a refusal
        (each dialect's own)."""
        state = self.state
        cfg = self.cfg
        refused = refuse or self._refused
        with state.lock:
            self._count(endpoint)
            u = state.rng.random()
            # infrastructure faults come first: the request never reached the app
            edge = cfg.fault_rate_5xx
            if u < edge:
                state.stats.faults["5xx"] += 1
                code = state.rng.choice((500, 502, 503))  # refused: 504 is a backend_down case
                return Response("Service Unavailable", status_code=code, media_type="text/html")
            if u < (edge := edge + cfg.fault_rate_429):
                state.stats.faults["429"] += 1
                lo, hi = cfg.retry_after_seconds
                return _json(
                    {"status": "error", "message": "Too Many Requests"},
                    status=429,
                    headers={"Retry-After": str(state.rng.randint(lo, hi))},
                )
            try:
                inst = state.sending_instance(token, iid)
                valid = validate()
            except GatewayRefusal as exc:
                return refused(exc)
            if state.check_quota(inst):
                state.stats.faults["quota"] += 1
                return _json({"status": "success", "message": QUOTA})
            if u < (edge := edge + cfg.no_key_rate):
                state.stats.faults["no_key"] += 1
                return _json({"status": "success"})
            answered = "ok"
            if u < (edge := edge + cfg.backend_down_rate):
                answered = "backend_down"
            elif u < (edge := edge + cfg.drop_rate):
                answered = "dropped"
            elif u < edge + cfg.slow_rate:
                answered = "slow"
            if answered == "backend_down":
                state.stats.faults["backend_down"] += 1
                variant = state.rng.randrange(4)
                if state.rng.random() < 0.5:  # whether it left is unknown: sometimes it did
                    self._record(inst, valid, endpoint, answered)
                if variant == 0:
                    return _json([])
                if variant == 1:
                    return Response(b"", media_type="text/html")
                return Response(
                    b"<html><body><h1>504 Gateway Time-out</h1></body></html>",
                    status_code=200 if variant == 2 else 504,
                    media_type="text/html",
                )
            result = self._record(inst, valid, endpoint, answered)
            if answered != "ok":
                state.stats.faults[answered] += 1
        if answered == "dropped":
            return await self._drop(request)
        if answered == "slow":
            try:
                await asyncio.sleep(cfg.slow_seconds)
            except asyncio.CancelledError:  # server stopping: just close the connection
                _close_transport(request)
                return Response(b"", status_code=500)  # written to a closed transport: lost
        return answer(result)

    def _record(self, inst: Any, valid: ValidSend, endpoint: str, answered: str) -> dict[str, Any]:
        return self.state.record_send(
            inst,
            to=valid.to,
            chat=valid.chat,
            kind=valid.type,
            payload=valid.payload,
            content=valid.content,
            endpoint=endpoint,
            answered=answered,
        )

    async def _drop(self, request: Request) -> Response:
        """Close the connection without a response (the message WAS accepted)."""
        if not _close_transport(request):
            raise ConnectionResetError("sandbox dropped the connection (no transport to close)")
        for _ in range(3):  # let uvicorn see connection_lost before the app returns
            await asyncio.sleep(0)
        return Response(b"", status_code=500)


def _close_transport(request: Request) -> bool:
    """Close the client's TCP connection under uvicorn; False when there is no transport."""
    raw_send = request.scope.get(_RAW_SEND)
    transport = getattr(getattr(raw_send, "__self__", None), "transport", None)
    if transport is None:
        return False
    transport.close()
    return True


class SandboxApp:
    """Outermost ASGI layer: remembers the server's own ``send`` (to drop connections)."""

    def __init__(self, app: Starlette, state: SandboxState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[_RAW_SEND] = send
        await self.app(scope, receive, send)


def create_sandbox_app(
    config: SandboxConfig | None = None, *, state: SandboxState | None = None
) -> SandboxApp:
    """The sandbox as an ASGI app; its :class:`SandboxState` is ``app.state``."""
    st = state if state is not None else SandboxState(config or SandboxConfig())
    sb = _Sandbox(st)
    if st.config.dialect == "evolution":  # Evolution API's own routes, no /api bases
        from gateway.sandbox.evolution import EvolutionRoutes

        evolution = EvolutionRoutes(sb).routes() + Inspection(st).routes()
        return SandboxApp(Starlette(routes=evolution), st)
    if st.config.dialect == "waha":  # WAHA's own routes under /api, the key in X-Api-Key
        from gateway.sandbox.waha import WahaRoutes

        waha = WahaRoutes(sb).routes() + Inspection(st).routes()
        return SandboxApp(Starlette(routes=waha), st)
    instance_methods = ["GET"] if st.config.dialect == "reference" else ["POST"]
    routes: list[Route] = []
    for base in BASES:
        for op in INSTANCE_OPS:
            routes.append(Route(f"/{base}/{op}", sb.instance_route(op), methods=instance_methods))
        routes.append(Route(f"/{base}/send", sb.send_route("send"), methods=["GET", "POST"]))
        routes.append(
            Route(f"/{base}/send_group", sb.send_route("send_group"), methods=["GET", "POST"])
        )
        routes.append(
            Route(f"/{base}/send_template", sb.send_route("send_template"), methods=["POST"])
        )
    routes += Inspection(st).routes()
    return SandboxApp(Starlette(routes=routes), st)
