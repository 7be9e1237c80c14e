"""Sandbox-only routes under ``/sandbox/``: drive instances and inspect the record.

Tests elsewhere assert "each recipient got exactly one message" and "every recipient's
final state equals the sandbox's truth" from these.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.sandbox.records import CONNECTED, DISCONNECTED, LOGGED_OUT
from gateway.sandbox.state import SandboxState


def json_response(body: Any, status: int = 200) -> Response:
    """Compact JSON."""
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(data, status_code=status, media_type="application/json")


class Inspection:
    """The ``/sandbox/...`` handlers bound to one :class:`SandboxState`."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state
        self.cfg = state.config

    def routes(self) -> list[Route]:
        """Every sandbox-only route."""
        return [
            Route("/sandbox/instances", self.sb_instances, methods=["GET"]),
            Route(
                "/sandbox/instances/{instance_id}/{action}",
                self.sb_instance_action,
                methods=["POST", "GET"],
            ),
            Route("/sandbox/messages", self.sb_messages, methods=["GET"]),
            Route("/sandbox/messages/{message_id}", self.sb_message, methods=["GET"]),
            Route("/sandbox/answers", self.sb_answers, methods=["GET"]),
            Route("/sandbox/chat", self.sb_chat, methods=["GET"]),
            Route("/sandbox/stats", self.sb_stats, methods=["GET"]),
            Route("/sandbox/events", self.sb_events, methods=["GET"]),
            Route("/sandbox/reset", self.sb_reset, methods=["POST"]),
            Route("/sandbox/idle", self.sb_idle, methods=["GET"]),
            Route("/sandbox/config", self.sb_config, methods=["GET"]),
        ]

    async def sb_instances(self, request: Request) -> Response:
        with self.state.lock:
            return json_response([i.public() for i in self.state.instances.values()])

    async def sb_instance_action(self, request: Request) -> Response:
        iid = request.path_params["instance_id"]
        action = request.path_params["action"]
        raw = await request.body()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return json_response({"error": "body is not JSON"}, status=400)
        if not isinstance(body, dict):
            return json_response({"error": "body must be a JSON object"}, status=400)
        params = {**dict(request.query_params), **{k: str(v) for k, v in body.items()}}
        try:
            if action == "scan":
                inst = self.state.scan(iid, phone=params.get("phone"), code=params.get("code"))
                return json_response(inst.public())
            if action in ("disconnect", "logout", "connect"):
                state = {"disconnect": DISCONNECTED, "logout": LOGGED_OUT, "connect": CONNECTED}
                inst = self.state.set_state(iid, state[action], f"sandbox {action}")
                return json_response(inst.public())
            if action == "renew-quota":
                return json_response(self.state.renew_quota(iid).public())
            if action == "incoming":
                sender, text = params.get("from", ""), params.get("text", "")
                mid = self.state.inject_incoming(
                    iid,
                    sender,
                    text,
                    quote=params.get("quote"),
                    button=params.get("button"),
                    row=params.get("row"),
                )
                return json_response({"message_id": mid})
            if action == "qr":
                with self.state.lock:
                    if iid not in self.state.instances:
                        raise KeyError(f"no instance {iid!r}")
                    return json_response({"content": self.state.current_qr_content(iid)})
        except KeyError as exc:
            return json_response({"error": str(exc.args[0])}, status=404)
        except ValueError as exc:
            return json_response({"error": str(exc)}, status=409)
        return json_response({"error": f"unknown action {action!r}"}, status=404)

    async def sb_messages(self, request: Request) -> Response:
        q = request.query_params
        to, iid, since = q.get("to"), q.get("instance_id"), int(q.get("since", "0"))
        limit = int(q.get("limit", "0")) or None
        with self.state.lock:
            if to is not None:  # indexed: no scan over every message
                ids = self.state.by_recipient.get(to, [])
                msgs = [self.state.messages[i] for i in ids]
            else:
                msgs = list(self.state.messages.values())
            if since or limit:
                msgs = msgs[since : since + limit if limit else None]
            out = [
                m.public()
                for m in msgs
                if (to is None or m.to == to) and (iid is None or m.instance_id == iid)
            ]
            return json_response(out)

    async def sb_message(self, request: Request) -> Response:
        with self.state.lock:
            msg = self.state.messages.get(request.path_params["message_id"])
            if msg is None:
                return json_response({"error": "no such message"}, status=404)
            return json_response(msg.public())

    async def sb_answers(self, request: Request) -> Response:
        return json_response(self.state.answers_view(request.query_params.get("to")))

    async def sb_chat(self, request: Request) -> Response:
        """The number checks and typing presences received (evolution dialect), in
        order; ``?kind=check`` or ``?kind=presence`` for one kind."""
        kind = request.query_params.get("kind")
        with self.state.lock:
            calls = [dict(c) for c in self.state.chat_calls if kind in (None, c["kind"])]
        return json_response(calls)

    async def sb_stats(self, request: Request) -> Response:
        return json_response(self.state.stats_view())

    async def sb_events(self, request: Request) -> Response:
        q = request.query_params
        return json_response(
            self.state.events_view(int(q.get("since", "0")), int(q.get("limit", "1000")))
        )

    async def sb_reset(self, request: Request) -> Response:
        self.state.reset()
        return json_response({"status": "reset"})

    async def sb_idle(self, request: Request) -> Response:
        timeout = float(request.query_params.get("timeout", "0"))
        emitter = self.state.emitter
        if emitter is None:
            return json_response({"idle": True, "pending": 0})
        if timeout > 0:
            idle = await asyncio.to_thread(emitter.wait_idle, min(timeout, 60.0))
        else:
            idle = emitter.pending() == 0
        return json_response({"idle": idle, "pending": emitter.pending()})

    async def sb_config(self, request: Request) -> Response:
        cfg = self.cfg
        view = {
            k: (sorted(v) if isinstance(v, frozenset) else v)
            for k, v in vars(cfg).items()
            if k != "access_tokens"
        }
        return json_response(view)
