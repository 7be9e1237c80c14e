"""The sandbox's Evolution API v2 face (``SandboxConfig(dialect="evolution")``).

Evolution's routes over the same :class:`SandboxState` (instances, faults, traps, events):
``POST /instance/create``, ``GET /instance/connect/{name}``,
``GET /instance/connectionState/{name}``, ``DELETE /instance/logout/{name}``,
``POST /instance/restart/{name}``, ``POST /webhook/set/{name}`` and
``POST /message/{sendText,sendMedia,sendButtons,sendList}/{name}``,
``POST /chat/whatsappNumbers/{name}`` (the number check) and
``POST /chat/sendPresence/{name}`` (typing); the key comes in
the ``apikey`` header; errors are HTTP 4xx with ``{"status", "error", "response":
{"message": [...]}}``; a send answers 201 with the message (docs/gateways.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.sandbox.faces import (
    answer,
    json_body,
    spec_buttons,
    spec_interactive,
    spec_list,
    spec_send,
)
from gateway.sandbox.faces import text as _text
from gateway.sandbox.records import CONNECTED, WAITING_SCAN
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

_ERRORS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
_STATES = {CONNECTED: "open", WAITING_SCAN: "connecting"}


def error(status: int, message: Any) -> Response:
    """An Evolution error answer (its HttpExceptionFilter's shape)."""
    messages = message if isinstance(message, list) else [message]
    return answer(
        {
            "status": status,
            "error": _ERRORS.get(status, "Error"),
            "response": {"message": messages},
        },
        status,
    )


def _refusal(exc: GatewayRefusal, name: str | None) -> Response:
    """The sandbox's refusal as Evolution words and codes it."""
    text = exc.message
    if text in (TOKEN_REQUIRED, TOKEN_UNKNOWN):
        return error(401, "Unauthorized")
    if text in (INSTANCE_INVALID, INSTANCE_REQUIRED):
        return error(404, f'The "{name or ""}" instance does not exist')
    if text in (NOT_ACTIVATED, RELOGIN):
        return error(400, "Connection Closed")
    if "already in use" in text:
        return error(403, text)
    return error(400, text)


def _validate(kind: str, body: dict[str, Any]) -> ValidSend:
    """Evolution's send body checked with the sandbox's own rules (as the spec's)."""
    number = str(body.get("number", "")).strip()
    for suffix in ("@s.whatsapp.net", "@c.us"):
        number = number.removesuffix(suffix)
    if kind in ("sendText", "sendMedia"):
        params: dict[str, str] = {"type": "text", "message": _text(body.get("text"))}
        if kind == "sendMedia":
            params = {
                "type": "media",
                "message": _text(body.get("caption")),
                "media_url": _text(body.get("media")),
            }
            if body.get("fileName"):
                params["filename"] = _text(body.get("fileName"))
        return spec_send(number, params)
    if number.endswith("@g.us"):
        raise GatewayRefusal("groups take text and media only")
    words = _text(body.get("description")) or _text(body.get("title"))
    if kind == "sendButtons":
        return spec_interactive(number, words, spec_buttons(body.get("buttons"), "displayText"))
    return spec_list(number, words, _text(body.get("buttonText")), body.get("sections"))


def _sent(result: dict[str, Any], kind: str) -> Response:
    """Evolution's 201: the sent message (``key.id`` its id), status PENDING."""
    detail = result.get("data") or result.get("message")
    message = dict(detail) if isinstance(detail, dict) else {}
    message.setdefault("status", "PENDING")
    message["messageType"] = next(iter(message.get("message") or {"conversation": ""}))
    message["source"] = "unknown"
    message["messageTimestamp"] = int(message.get("messageTimestamp") or 0)
    return answer(message, 201)


class EvolutionRoutes:
    """Evolution API v2's routes bound to one sandbox (``server._Sandbox``)."""

    def __init__(self, sb: _Sandbox) -> None:
        self.sb = sb
        self.state = sb.state

    def routes(self) -> list[Route]:
        """Every route of the Evolution face."""
        out = [
            Route("/instance/create", self.create, methods=["POST"]),
            Route("/instance/connect/{name}", self.connect, methods=["GET"]),
            Route("/instance/connectionState/{name}", self.connection_state, methods=["GET"]),
            Route("/instance/logout/{name}", self.operation("logout"), methods=["DELETE"]),
            Route("/instance/restart/{name}", self.operation("reconnect"), methods=["POST"]),
            Route("/webhook/set/{name}", self.set_webhook, methods=["POST"]),
        ]
        for kind in ("sendText", "sendMedia", "sendButtons", "sendList"):
            out.append(Route(f"/message/{kind}/{{name}}", self.send(kind), methods=["POST"]))
        out.append(Route("/chat/whatsappNumbers/{name}", self.whatsapp_numbers, methods=["POST"]))
        out.append(Route("/chat/sendPresence/{name}", self.send_presence, methods=["POST"]))
        return out

    def _unlinked(self, request: Request, name: str, operation: str) -> Response | None:
        """Count ``operation``; Evolution's refusal unless ``name`` is the caller's
        connected instance (the caller holds the state's lock)."""
        self.sb._count(operation)
        try:
            self.state.sending_instance(request.headers.get("apikey"), name)
        except GatewayRefusal as exc:
            return self._refused(exc, name)
        return None

    async def whatsapp_numbers(self, request: Request) -> Response:
        """Evolution's number check: ``{"numbers": [...]}`` (unique strings, at least one)
        answered 200 with ``[{"exists", "jid", "number", "name"}]`` in the order given; a
        number in ``not_on_app`` (or the ``not_on_app_rate`` share) does not exist. Needs
        a connected instance, as Baileys' query does. Recorded in ``/sandbox/chat``."""
        await self.sb._latency()
        name = request.path_params["name"]
        body = await json_body(request)
        numbers = body.get("numbers")
        if (
            not isinstance(numbers, list)
            or not numbers
            or not all(isinstance(n, str) for n in numbers)
            or len(set(numbers)) != len(numbers)
        ):
            return error(400, ['"numbers" must be an array of unique numeric strings'])
        with self.state.lock:
            refused = self._unlinked(request, name, "check_numbers")
            if refused is not None:
                return refused
            digits = ["".join(ch for ch in n if ch.isdigit()) for n in numbers]
            self.state.chat_calls.append(
                {"kind": "check", "instance_id": name, "numbers": digits, "at": time.time()}
            )
        found = [
            {
                "exists": not self.sb.cfg.absent(d),
                "jid": f"{d}@s.whatsapp.net",
                "number": given,
                "name": None,
            }
            for given, d in zip(numbers, digits, strict=True)
        ]
        return answer(found)

    async def send_presence(self, request: Request) -> Response:
        """Evolution's typing: ``{"number", "presence", "delay"}`` (all required; presence
        one of unavailable, available, composing, recording, paused); answered 201 with
        ``{"presence"}`` after ``delay`` ms, as Evolution waits it out (capped at 20 s
        here). A number not on the app is refused (400), as Evolution checks it first.
        Recorded in ``/sandbox/chat`` with the time it began."""
        await self.sb._latency()
        name = request.path_params["name"]
        body = await json_body(request)
        number = _text(body.get("number")).strip()
        presence = body.get("presence")
        delay = body.get("delay")
        if (
            not number
            or presence not in ("unavailable", "available", "composing", "recording", "paused")
            or not isinstance(delay, (int, float))
            or isinstance(delay, bool)
        ):
            return error(400, ["number, presence and delay are required"])
        digits = "".join(ch for ch in number.split("@", 1)[0] if ch.isdigit())
        with self.state.lock:
            refused = self._unlinked(request, name, "send_presence")
            if refused is not None:
                return refused
            if self.sb.cfg.absent(digits):
                self.state.stats.errors["not on WhatsApp"] += 1
                return error(
                    400, [{"exists": False, "jid": f"{digits}@s.whatsapp.net", "number": number}]
                )
            self.state.chat_calls.append(
                {
                    "kind": "presence",
                    "instance_id": name,
                    "to": digits,
                    "presence": presence,
                    "delay": delay,
                    "at": time.time(),
                }
            )
        await asyncio.sleep(max(0.0, min(float(delay), 20_000.0)) / 1000)
        return answer({"presence": presence}, 201)

    def _refused(self, exc: GatewayRefusal, name: str | None) -> Response:
        self.state.stats.errors[exc.message] += 1
        return _refusal(exc, name)

    async def create(self, request: Request) -> Response:
        """``instanceName`` names the instance (gatecast's instance id)."""
        await self.sb._latency()
        body = await json_body(request)
        name = body.get("instanceName")
        if not isinstance(name, str) or not name.strip():
            return error(400, "instanceName is required")
        with self.state.lock:
            self.sb._count("create_instance")
            try:
                self.state.create_instance(request.headers.get("apikey"), name.strip())
            except GatewayRefusal as exc:
                return self._refused(exc, name)
            inst = self.state.instances[name.strip()]
            status = _STATES.get(inst.state, "close")
        created = {
            "instance": {
                "instanceName": inst.id,
                "instanceId": f"sandbox-{inst.id.lower()}",
                "integration": body.get("integration") or "WHATSAPP-BAILEYS",
                "status": status,
            },
            "hash": f"sandbox-hash-{inst.id.lower()}",
            "webhook": {},
            "settings": {},
        }
        return answer(created, 201)

    async def connect(self, request: Request) -> Response:
        """The QR to scan (``base64``), or the state of a connected instance."""
        await self.sb._latency()
        name = request.path_params["name"]
        token = request.headers.get("apikey")
        with self.state.lock:
            self.sb._count("get_qrcode")
            try:
                inst = self.state.instance_for(token, name)
            except GatewayRefusal as exc:
                return self._refused(exc, name)
            if inst.state == CONNECTED:
                return answer({"instance": {"instanceName": name, "state": "open"}})
        try:
            qr = self.state.get_qrcode(token, name)
        except GatewayRefusal as exc:
            with self.state.lock:
                return self._refused(exc, name)
        return answer({"pairingCode": None, "code": "", "base64": qr["base64"], "count": 1})

    async def connection_state(self, request: Request) -> Response:
        """``{"instance": {"instanceName", "state": "open" | "connecting" | "close"}}``."""
        name = request.path_params["name"]
        with self.state.lock:
            try:
                inst = self.state.instance_for(request.headers.get("apikey"), name)
            except GatewayRefusal as exc:
                return self._refused(exc, name)
            state = _STATES.get(inst.state, "close")
        return answer({"instance": {"instanceName": name, "state": state}})

    def operation(self, op: str) -> Callable[[Request], Awaitable[Response]]:
        """Logout or restart (the state's ``logout`` / ``reconnect``)."""

        async def handler(request: Request) -> Response:
            await self.sb._latency()
            name = request.path_params["name"]
            with self.state.lock:
                self.sb._count(op)
                try:
                    getattr(self.state, op)(request.headers.get("apikey"), name)
                except GatewayRefusal as exc:
                    return self._refused(exc, name)
            done = "logged out" if op == "logout" else "restarted"
            return answer(
                {"status": "SUCCESS", "error": False, "response": {"message": f"Instance {done}"}}
            )

        return handler

    async def set_webhook(self, request: Request) -> Response:
        """``{"webhook": {"enabled", "url", "events", ...}}`` (or the same keys at the top)."""
        await self.sb._latency(self.sb.cfg.webhook_latency_ms)
        name = request.path_params["name"]
        body = await json_body(request)
        nested = body.get("webhook")
        webhook: dict[str, Any] = nested if isinstance(nested, dict) else body
        enabled = "false" if webhook.get("enabled") is False else "true"
        with self.state.lock:
            self.sb._count("set_webhook")
            try:
                self.state.set_webhook(
                    request.headers.get("apikey"), name, _text(webhook.get("url")), enabled
                )
            except GatewayRefusal as exc:
                return self._refused(exc, name)
        saved = {
            "enabled": enabled == "true",
            "url": webhook.get("url"),
            "events": webhook.get("events") or [],
        }
        return answer({"webhook": {"instanceName": name, "webhook": saved}}, 201)

    def send(self, kind: str) -> Callable[[Request], Awaitable[Response]]:
        """One ``message/<kind>/{name}`` route: the sandbox's send path, Evolution's words.
        A number in ``not_on_app`` is refused as Evolution does (400, ``exists: false``)."""
        cfg = self.sb.cfg

        async def handler(request: Request) -> Response:
            await self.sb._latency()
            name = request.path_params["name"]
            body = await json_body(request)

            def validate() -> ValidSend:
                valid = _validate(kind, body)
                if cfg.absent(valid.to):
                    raise GatewayRefusal("not on WhatsApp", jid=valid.chat, number=valid.to)
                return valid

            def refuse(exc: GatewayRefusal) -> Response:
                if exc.message == "not on WhatsApp":
                    self.state.stats.errors[exc.message] += 1
                    return error(400, [{"exists": False, **exc.extra}])
                return self._refused(exc, name)

            return await self.sb.accept_send(
                request,
                kind,
                request.headers.get("apikey"),
                name,
                validate,
                answer=lambda result: _sent(result, kind),
                refuse=refuse,
            )

        return handler


__all__ = ["EvolutionRoutes", "error"]
