"""The sandbox's WAHA face (``SandboxConfig(dialect="waha")``).

WAHA's routes over the same :class:`SandboxState` (instances, faults, traps, events):
``POST /api/sessions`` (create and start), ``GET|PUT /api/sessions/{session}`` (status;
the config with its webhooks), ``POST /api/sessions/{session}/{start,logout,restart}``,
``GET /api/{session}/auth/qr`` and ``POST /api/{sendText,sendImage,sendFile,sendVideo,
sendVoice,sendButtons,sendList}`` (the session in the body); the key comes in the
``X-Api-Key`` header; errors are NestJS answers (``{"statusCode", "message", "error"}``,
or the object WAHA throws for a session that is not WORKING); a send answers 201 with
the engine's sent message (NOWEB: ``key.id``). A number not on WhatsApp is accepted and
then gets ``message.ack`` ERROR, as WAHA's engines report it (docs/sandbox.md).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.sandbox.events_out import waha_me
from gateway.sandbox.faces import (
    answer,
    json_body,
    spec_buttons,
    spec_interactive,
    spec_list,
    spec_send,
)
from gateway.sandbox.faces import text as _text
from gateway.sandbox.records import CONNECTED, CREATED, LOGGED_OUT, WAITING_SCAN
from gateway.sandbox.refusals import (
    INSTANCE_INVALID,
    INSTANCE_REQUIRED,
    NOT_ACTIVATED,
    RELOGIN,
    TOKEN_REQUIRED,
    TOKEN_UNKNOWN,
    GatewayRefusal,
)
from gateway.sandbox.validation import ValidSend

if TYPE_CHECKING:
    from gateway.sandbox.server import _Sandbox

_ERRORS = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 422: "Unprocessable Entity"}
#: WAHA's webhook events (enums.dto's WAHAEvents) a session config may name
EVENTS = frozenset(
    {
        "session.status", "message", "message.reaction", "message.any", "message.ack",
        "message.ack.group", "message.waiting", "message.revoked", "message.edited",
        "state.change", "group.join", "group.leave", "group.v2.join", "group.v2.leave",
        "group.v2.update", "group.v2.participants", "presence.update", "poll.vote",
        "poll.vote.failed", "chat.archive", "call.received", "call.accepted",
        "call.rejected", "label.upsert", "label.deleted", "label.chat.added",
        "label.chat.deleted", "event.response", "event.response.failed", "engine.event", "*",
    }
)  # fmt: skip
_STATUSES = {
    CONNECTED: "WORKING",
    WAITING_SCAN: "SCAN_QR_CODE",
    CREATED: "STARTING",
    LOGGED_OUT: "FAILED",
}
SENDS = ("sendText", "sendImage", "sendFile", "sendVideo", "sendVoice", "sendButtons", "sendList")
_NOT_EXPECTED = "Session status is not as expected. Try again later or restart the session"


def error(status: int, message: Any) -> Response:
    """A NestJS error answer (WAHA passes HttpExceptions through as they are)."""
    return answer({"statusCode": status, "message": message, "error": _ERRORS.get(status)}, status)


def not_expected(name: str, state: str, expected: str) -> Response:
    """WAHA's 422 for a session in the wrong status (the object it throws, as is)."""
    body = {"error": _NOT_EXPECTED, "session": name, "status": state, "expected": [expected]}
    return answer(body, 422)


def _refusal(exc: GatewayRefusal, name: str | None, status: str) -> Response:
    """The sandbox's refusal as WAHA words and codes it."""
    text = exc.message
    if text in (TOKEN_REQUIRED, TOKEN_UNKNOWN):
        return answer({"message": "Unauthorized", "statusCode": 401}, 401)
    if text in (INSTANCE_INVALID, INSTANCE_REQUIRED):
        return error(404, f"We didn't find a session with name '{name or ''}'.")
    if text in (NOT_ACTIVATED, RELOGIN):
        return not_expected(name or "", status, "WORKING")
    if "already in use" in text:
        return error(422, f"Session '{name}' already exists. Use PUT to update it.")
    return error(400, [text])


def _validate(kind: str, body: dict[str, Any]) -> ValidSend:
    """WAHA's send body checked with the sandbox's own rules (as the spec's), after
    WAHA's own required fields (``chatId``; ``file.url`` and ``file.mimetype``)."""
    chat = _text(body.get("chatId")).strip()
    if not chat:
        raise GatewayRefusal("chatId must be a string")
    number = chat.removesuffix("@c.us").removesuffix("@s.whatsapp.net")
    group = number.endswith("@g.us")
    if kind == "sendText":
        params: dict[str, str] = {"type": "text", "message": _text(body.get("text"))}
    elif kind in ("sendImage", "sendFile", "sendVideo", "sendVoice"):
        file = body.get("file")
        if not isinstance(file, dict) or not _text(file.get("url")):
            raise GatewayRefusal("file.url must be a URL (or file.data base64)")
        if not _text(file.get("mimetype")):
            raise GatewayRefusal("file.mimetype must be a string")
        params = {
            "type": "media",
            "message": _text(body.get("caption")),
            "media_url": _text(file.get("url")),
        }
        if file.get("filename"):
            params["filename"] = _text(file.get("filename"))
    elif group:
        raise GatewayRefusal("groups take text and media only")
    elif kind == "sendButtons":
        words = _text(body.get("body")) or _text(body.get("header"))
        return spec_interactive(number, words, spec_buttons(body.get("buttons"), "text", "reply"))
    else:
        content = body.get("message")
        if not isinstance(content, dict):
            raise GatewayRefusal("message must be an object")
        words = _text(content.get("description")) or _text(content.get("title"))
        return spec_list(number, words, _text(content.get("button")), content.get("sections"))
    return spec_send(number, params)


def _sent(result: dict[str, Any]) -> Response:
    """WAHA's 201 with NOWEB's sent message (``key.id`` its id, status PENDING)."""
    detail = result.get("data") or result.get("message")
    message = dict(detail) if isinstance(detail, dict) else {}
    message.setdefault("status", "PENDING")
    return answer(message, 201)


class WahaRoutes:
    """WAHA's routes bound to one sandbox (``server._Sandbox``)."""

    def __init__(self, sb: _Sandbox) -> None:
        self.sb = sb
        self.state = sb.state
        self.webhooks: dict[str, list[dict[str, Any]]] = {}  # each session's, as set

    def routes(self) -> list[Route]:
        """Every route of the WAHA face."""
        out = [
            Route("/api/sessions", self.create, methods=["POST"]),
            Route("/api/sessions/{name}", self.info, methods=["GET"]),
            Route("/api/sessions/{name}", self.update, methods=["PUT"]),
            Route("/api/sessions/{name}/start", self.operation("start"), methods=["POST"]),
            Route("/api/sessions/{name}/logout", self.operation("logout"), methods=["POST"]),
            Route("/api/sessions/{name}/restart", self.operation("reconnect"), methods=["POST"]),
            Route("/api/{name}/auth/qr", self.qr, methods=["GET"]),
        ]
        for kind in SENDS:
            out.append(Route(f"/api/{kind}", self.send(kind), methods=["POST"]))
        return out

    def _status(self, name: str | None) -> str:
        inst = self.state.instances.get(name or "")
        return _STATUSES.get(inst.state, "STOPPED") if inst is not None else "STOPPED"

    def _refused(self, exc: GatewayRefusal, name: str | None) -> Response:
        self.state.stats.errors[exc.message] += 1
        return _refusal(exc, name, self._status(name))

    def _info(self, name: str) -> dict[str, Any]:
        inst = self.state.instances[name]
        hooks = self.webhooks.get(name, []) if inst.webhook_enabled else []
        config: dict[str, Any] = {"webhooks": hooks}
        info: dict[str, Any] = {"name": name, "status": self._status(name), "config": config}
        me = waha_me(inst.phone) if inst.state == CONNECTED else None
        if me is not None:
            info["me"] = me
        return info

    async def create(self, request: Request) -> Response:
        """``name`` names the session (gatecast's instance id); ``start`` starts it."""
        await self.sb._latency()
        body = await json_body(request)
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            return error(400, ["name must be a string"])  # the sandbox always wants one
        name = name.strip()
        with self.state.lock:
            self.sb._count("create_instance")
            try:
                self.state.create_instance(request.headers.get("x-api-key"), name)
            except GatewayRefusal as exc:
                return self._refused(exc, name)
            return answer(self._info(name), 201)

    async def info(self, request: Request) -> Response:
        """``{"name", "status", "config", "me"}``."""
        name = request.path_params["name"]
        with self.state.lock:
            try:
                self.state.instance_for(request.headers.get("x-api-key"), name)
            except GatewayRefusal as exc:
                return self._refused(exc, name)
            return answer(self._info(name))

    async def update(self, request: Request) -> Response:
        """``{"config": {"webhooks": [{"url", "events"}]}}``: the session's webhook (none:
        disabled). Unknown events are refused as WAHA's validation does (400)."""
        await self.sb._latency(self.sb.cfg.webhook_latency_ms)
        name = request.path_params["name"]
        body = await json_body(request)
        config = body.get("config")
        hooks = (config.get("webhooks") if isinstance(config, dict) else None) or []
        if not isinstance(hooks, list) or not all(isinstance(h, dict) for h in hooks):
            return error(400, ["config.webhooks must be an array"])
        for i, hook in enumerate(hooks):
            events = hook.get("events")
            if not isinstance(events, list) or not all(e in EVENTS for e in events):
                return error(400, [f"config.webhooks.{i}.events must be WAHA events"])
        url = _text(hooks[0].get("url")) if hooks else ""
        with self.state.lock:
            self.sb._count("set_webhook")
            try:
                self.state.set_webhook(
                    request.headers.get("x-api-key"), name, url, "true" if hooks else "false"
                )
            except GatewayRefusal as exc:
                return self._refused(exc, name)
            self.webhooks[name] = hooks
            return answer(self._info(name))

    def operation(self, op: str) -> Callable[[Request], Awaitable[Response]]:
        """Start, logout or restart (the state's ``reboot`` when a start needs a scan,
        ``logout``, ``reconnect``); WAHA answers the session's info."""

        async def handler(request: Request) -> Response:
            await self.sb._latency()
            name = request.path_params["name"]
            token = request.headers.get("x-api-key")
            with self.state.lock:
                self.sb._count(op)
                try:
                    inst = self.state.instance_for(token, name)
                    if op == "start" and inst.state != CONNECTED:
                        self.state.reboot(token, name)
                    elif op == "reconnect" and inst.state != CONNECTED:
                        self.state.reboot(token, name)  # WAHA restarts to a new QR
                    elif op == "logout":
                        self.state.logout(token, name)
                        self.state.reboot(token, name)  # a running session restarts
                    else:
                        self.state.reconnect(token, name)
                except GatewayRefusal as exc:
                    return self._refused(exc, name)
                return answer(self._info(name), 201)

        return handler

    async def qr(self, request: Request) -> Response:
        """The QR to scan: ``{"mimetype", "data"}`` for ``Accept: application/json``, else
        the PNG itself; a session not in SCAN_QR_CODE gets WAHA's 422."""
        await self.sb._latency()
        name = request.path_params["name"]
        token = request.headers.get("x-api-key")
        with self.state.lock:
            self.sb._count("get_qrcode")
            try:
                inst = self.state.instance_for(token, name)
            except GatewayRefusal as exc:
                return self._refused(exc, name)
            if inst.state == CONNECTED:
                return not_expected(name, "WORKING", "SCAN_QR_CODE")
        try:
            qr = self.state.get_qrcode(token, name)
        except GatewayRefusal as exc:
            with self.state.lock:
                return self._refused(exc, name)
        data = str(qr["base64"]).split(",", 1)[-1]
        if request.headers.get("accept") == "application/json":
            return answer({"mimetype": "image/png", "data": data})
        return Response(base64.b64decode(data), media_type="image/png")

    def send(self, kind: str) -> Callable[[Request], Awaitable[Response]]:
        """One ``api/<kind>`` route: the sandbox's send path, WAHA's words."""

        async def handler(request: Request) -> Response:
            await self.sb._latency()
            body = await json_body(request)
            name = _text(body.get("session")) or "default"

            def refuse(exc: GatewayRefusal) -> Response:
                return self._refused(exc, name)

            return await self.sb.accept_send(
                request,
                kind,
                request.headers.get("x-api-key"),
                name,
                lambda: _validate(kind, body),
                answer=_sent,
                refuse=refuse,
            )

        return handler


__all__ = ["EVENTS", "SENDS", "WahaRoutes", "error"]
