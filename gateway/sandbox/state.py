"""The sandbox's record: tokens, instances, accepted messages, counters and emitted events.

Everything here is plain dicts and lists behind one lock, and every random choice comes from
one ``random.Random(seed)`` used under that lock, so a run is reproducible for a seed (for a
given order of requests). The HTTP layer (``server.py``) calls the operations below; they
return the response body (a dict) or raise :class:`GatewayRefusal` with the gateway's text.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from gateway.sandbox import events_out as ev
from gateway.sandbox.config import SandboxConfig
from gateway.sandbox.emitter import Delivery, WebhookEmitter
from gateway.sandbox.planning import incoming_id, plan_message_events
from gateway.sandbox.qr import qr_content, qr_data_uri
from gateway.sandbox.records import (
    CONNECTED,
    CREATED,
    DISCONNECTED,
    LOGGED_OUT,
    STATUS_RANK,
    WAITING_SCAN,
    EventJob,
    Instance,
    SentMessage,
    Stats,
    redact_url,
)
from gateway.sandbox.refusals import (
    INSTANCE_INVALID,
    INSTANCE_REQUIRED,
    NOT_ACTIVATED,
    QUOTA,
    RELOGIN,
    TOKEN_REQUIRED,
    TOKEN_UNKNOWN,
    GatewayRefusal,
)

__all__ = [  # the records and refusals are re-exported for callers of this module
    "CONNECTED",
    "CREATED",
    "DISCONNECTED",
    "LOGGED_OUT",
    "QUOTA",
    "WAITING_SCAN",
    "GatewayRefusal",
    "Instance",
    "SandboxState",
    "SentMessage",
]


class SandboxState:
    """The whole in-memory gateway."""

    def __init__(
        self,
        config: SandboxConfig,
        *,
        clock: Callable[[], float] = time.time,
        start_emitter: bool = True,
    ) -> None:
        self.config = config
        self.clock = clock
        self.lock = threading.RLock()
        self.rng = random.Random(config.seed)
        self.resets = 0
        self._salt = f"{config.seed}"
        self.instances: dict[str, Instance] = {}
        self.messages: dict[str, SentMessage] = {}
        self.by_recipient: dict[str, list[str]] = {}  # recipient -> message ids
        self.stopped: set[str] = set()  # people who sent STOP: they never answer again
        self.answers: list[dict[str, Any]] = []  # every simulated answer, in planned order
        #: the evolution dialect's number checks and typing presences, in arrival order
        self.chat_calls: list[dict[str, Any]] = []
        self.stats = Stats()
        self.events: list[dict[str, Any]] = []
        self.events_dropped = 0  # records trimmed from the front of ``events``
        self.emitter: WebhookEmitter | None = None
        if start_emitter:
            self.emitter = WebhookEmitter(
                self._on_due,
                workers=config.webhook_workers,
                timeout=config.webhook_timeout_seconds,
            )

    # ----------------------------------------------------------------- utilities
    def _hex(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789ABCDEF") for _ in range(n))

    def new_instance_id(self) -> str:
        """13 upper-case hex characters, like ``6501A9176BD17``."""
        while True:
            iid = self._hex(13)
            if iid not in self.instances:
                return iid

    def new_message_id(self) -> str:
        """``3EB0`` and 18 upper-case hex characters."""
        while True:
            mid = "3EB0" + f"{self.rng.getrandbits(72):018X}"
            if mid not in self.messages:
                return mid

    def reset(self) -> None:
        """Forget everything (instances, messages, events, counters); keep the config."""
        with self.lock:
            if self.emitter is not None:
                self.emitter.clear()
            # a fresh but different stream: ids never repeat those handed out before a reset
            self.resets += 1
            self.rng = random.Random(f"{self.config.seed}:{self.resets}")
            self.instances.clear()
            self.messages.clear()
            self.by_recipient.clear()
            self.stopped.clear()
            self.answers.clear()
            self.chat_calls.clear()
            self.stats = Stats()
            self.events.clear()
            self.events_dropped = 0

    def close(self) -> None:
        """Stop the event threads."""
        if self.emitter is not None:
            self.emitter.close()

    # ----------------------------------------------------------------- credentials
    def check_token(self, token: str | None) -> str:
        """The token, or the gateway's refusal."""
        if not token:
            raise GatewayRefusal(TOKEN_REQUIRED)
        if token not in self.config.access_tokens:
            raise GatewayRefusal(TOKEN_UNKNOWN)
        return token

    def instance_for(self, token: str | None, instance_id: str | None) -> Instance:
        """The caller's instance, or the gateway's refusal (token first, then instance)."""
        tok = self.check_token(token)
        if not instance_id:
            raise GatewayRefusal(INSTANCE_REQUIRED)
        inst = self.instances.get(instance_id)
        if inst is None or inst.token != tok:
            raise GatewayRefusal(INSTANCE_INVALID)
        return inst

    def sending_instance(self, token: str | None, instance_id: str | None) -> Instance:
        """An instance that may send now, or the refusal a real gateway gives."""
        inst = self.instance_for(token, instance_id)
        if inst.state in (CREATED, WAITING_SCAN):
            raise GatewayRefusal(NOT_ACTIVATED)
        if inst.state != CONNECTED:
            raise GatewayRefusal(RELOGIN)
        return inst

    # ----------------------------------------------------------------- instances
    def create_instance(self, token: str | None, name: str | None = None) -> dict[str, Any]:
        """A new instance id; the same id while an unscanned one exists for this token.
        ``name``: the caller names it (Evolution API's ``instanceName``; a name in use is
        refused)."""
        with self.lock:
            tok = self.check_token(token)
            mine = [i for i in self.instances.values() if i.token == tok]
            if name is not None and name in self.instances:
                raise GatewayRefusal(f'This name "{name}" is already in use.')
            for inst in mine:
                if name is None and inst.state in (CREATED, WAITING_SCAN):
                    return _created(inst.id)
            if len(mine) >= self.config.max_instances_per_token:
                raise GatewayRefusal(
                    f"You can only add up to {self.config.max_instances_per_token} profiles"
                )
            iid = name if name is not None else self.new_instance_id()
            inst = Instance(id=iid, token=tok, created_at=self.clock())
            self.instances[inst.id] = inst
            if self.config.auto_link:
                self._link(inst)
            return _created(inst.id)

    def qr_bucket(self) -> int:
        """The current rotation bucket of QR codes."""
        return int(self.clock() // self.config.qr_rotate_seconds)

    def current_qr_content(self, instance_id: str) -> str:
        """What the QR of ``instance_id`` encodes right now."""
        return qr_content(instance_id, self.qr_bucket(), self._salt)

    def get_qrcode(self, token: str | None, instance_id: str | None) -> dict[str, Any]:
        """A scannable QR PNG (also posted to the webhook); the instance now waits for a scan."""
        with self.lock:
            inst = self.instance_for(token, instance_id)
            if inst.state == CONNECTED and not self.config.strict:
                raise GatewayRefusal("This instance is already logged in")
            if inst.state not in (WAITING_SCAN, CONNECTED):  # strict: a linked one stays linked
                inst.state = WAITING_SCAN
                self._emit_connection(inst, "qr requested")
            content = self.current_qr_content(inst.id)
        uri = qr_data_uri(content)
        with self.lock:
            self._emit_now(inst.id, "qr", ev.qr_body(self.config.dialect, inst.id, uri))
        return {"status": "success", "message": "Success", "base64": uri}

    def scan(self, instance_id: str, phone: str | None = None, code: str | None = None) -> Instance:
        """Simulate the phone scanning the QR (sandbox-only). ``code``, if given, must match."""
        with self.lock:
            inst = self.instances.get(instance_id)
            if inst is None:
                raise KeyError(f"no instance {instance_id!r}")
            if inst.state != WAITING_SCAN:
                raise ValueError(
                    f"instance {instance_id} is {inst.state}: request a QR code (get_qrcode) first"
                )
            if code is not None and code != self.current_qr_content(instance_id):
                raise ValueError("that QR code has expired or belongs to another instance")
            if phone is not None and not phone.isdigit():
                raise ValueError(f"phone must be digits only, not {phone!r}")
            self._link(inst, phone)
            return inst

    def _link(self, inst: Instance, phone: str | None = None) -> None:
        inst.state = CONNECTED
        inst.phone = phone or inst.phone or ("1555" + "".join(self.rng.choices("0123456789", k=7)))
        self._emit_connection(inst, "scanned")

    def set_state(self, instance_id: str, state: str, reason: str) -> Instance:
        """Force a state (sandbox-only: ``disconnect``, phone-side ``logout``)."""
        with self.lock:
            inst = self.instances.get(instance_id)
            if inst is None:
                raise KeyError(f"no instance {instance_id!r}")
            inst.state = state
            self._emit_connection(inst, reason)
            return inst

    def set_webhook(
        self, token: str | None, instance_id: str | None, url: str | None, enable: str | None
    ) -> dict[str, Any]:
        """Store (or disable) the instance's webhook address."""
        with self.lock:
            inst = self.instance_for(token, instance_id)
            if self.config.dialect == "reference" and inst.state in (CREATED, WAITING_SCAN):
                raise GatewayRefusal(NOT_ACTIVATED)
            on = (enable or "").strip().lower()
            if on not in ("true", "false", "1", "0"):
                raise GatewayRefusal("enable must be true or false")
            if on in ("true", "1"):
                if not url or not url.startswith(("http://", "https://")):
                    raise GatewayRefusal("Webhook URL is invalid")
                inst.webhook_url = url
                inst.webhook_enabled = True
            else:
                inst.webhook_enabled = False
            return {"status": "success", "message": "Webhook URI Saved"}

    def reboot(self, token: str | None, instance_id: str | None) -> dict[str, Any]:
        """Log out of the web client and start a new scan."""
        with self.lock:
            inst = self.instance_for(token, instance_id)
            if inst.state == CONNECTED:
                inst.state = LOGGED_OUT
                self._emit_connection(inst, "reboot")
            inst.state = WAITING_SCAN
            self._emit_connection(inst, "reboot")
            if self.config.auto_link:
                self._link(inst)
            return {"status": "success", "message": "Reboot successfully"}

    def reset_instance(self, token: str | None, instance_id: str | None) -> dict[str, Any]:
        """Log out, give the instance a NEW id, forget the old one and its data."""
        with self.lock:
            inst = self.instance_for(token, instance_id)
            if inst.state == CONNECTED:
                inst.state = LOGGED_OUT
                self._emit_connection(inst, "reset")
            del self.instances[inst.id]
            new = Instance(id=self.new_instance_id(), token=inst.token, created_at=self.clock())
            self.instances[new.id] = new
            if self.config.auto_link:
                self._link(new)
            if not self.config.reset_returns_id:
                return {"status": "success", "message": "Instance ID reset successfully"}
            return {
                "status": "success",
                "message": "Instance ID reset successfully",
                "instance_id": new.id,
            }

    def reconnect(self, token: str | None, instance_id: str | None) -> dict[str, Any]:
        """Restart the connection after a loss; logged-out instances need a new login."""
        with self.lock:
            inst = self.instance_for(token, instance_id)
            if inst.state in (LOGGED_OUT, CREATED, WAITING_SCAN):
                raise GatewayRefusal("Error", relogin=True)
            if inst.state == DISCONNECTED:
                inst.state = CONNECTED
                self._emit_connection(inst, "reconnect")
            return {"status": "success", "message": "Reconnect successfully"}

    def logout(self, token: str | None, instance_id: str | None) -> dict[str, Any]:
        """Log the instance out of the web client."""
        with self.lock:
            inst = self.instance_for(token, instance_id)
            if inst.state != LOGGED_OUT:
                inst.state = LOGGED_OUT
                self._emit_connection(inst, "logout")
            return {"status": "success", "message": "Logout successfully"}

    # ----------------------------------------------------------------- sends
    def record_send(
        self,
        inst: Instance,
        *,
        to: str,
        chat: str,
        kind: str,
        payload: dict[str, Any],
        content: dict[str, Any],
        endpoint: str,
        answered: str = "ok",
    ) -> dict[str, Any]:
        """Accept a validated send: record it, plan its events, return the success body.

        Must be called with ``self.lock`` held.
        """
        now = self.clock()
        mid = self.new_message_id()
        msg = SentMessage(
            id=mid,
            instance_id=inst.id,
            to=to,
            chat=chat,
            type=kind,
            payload=payload,
            at=now,
            endpoint=endpoint,
            answered=answered,
        )
        self.messages[mid] = msg
        inst.sends += 1
        inst.sends_since_connect += 1
        self.stats.accepted += 1
        self.stats.per_recipient[to] += 1
        plan = plan_message_events(
            self.config,
            self.rng,
            msg,
            refused=self._timelock(inst, msg),
            silent=to in self.stopped,
        )
        if msg.answer is not None:
            self.answers.append(msg.answer)
            if msg.answer["answer"] == "stop":
                self.stopped.add(to)
        if self.emitter is not None:
            self.emitter.schedule_many(plan)
        self.by_recipient.setdefault(to, []).append(mid)
        limit = self.config.disconnect_after_sends
        if limit is not None and inst.sends_since_connect >= limit:
            inst.state = DISCONNECTED  # this message left; the next send finds it dropped
            self._emit_connection(inst, "connection lost")
        detail = {
            "key": {"remoteJid": chat, "fromMe": True, "id": mid},
            "message": content,
            "messageTimestamp": str(int(now)),
            "status": "PENDING",
        }
        if self.config.id_under_data:
            return {"status": "success", "message": "Success", "data": detail}
        return {"status": "success", "message": detail}

    def _timelock(self, inst: Instance, msg: SentMessage) -> str | None:
        """``"463"`` when the cold-contact timelock refuses ``msg`` (the mode
        ``cold_lock_after``); a message that goes through makes its chat known."""
        cfg = self.config
        is_group = msg.chat.endswith("@g.us")
        if is_group or msg.to in inst.known_chats:
            return None
        if cfg.cold_lock_after is not None:
            if msg.at < inst.locked_until:
                return "463"
            if inst.cold_sent >= cfg.cold_lock_after and not inst.lock_used:
                inst.lock_used = True
                inst.locked_until = msg.at + cfg.cold_lock_seconds
                return "463"
            inst.cold_sent += 1
        inst.known_chats.add(msg.to)
        return None

    def check_quota(self, inst: Instance) -> bool:
        """True when the instance has used up its monthly quota (the trap's condition)."""
        quota = self.config.monthly_quota
        return quota is not None and inst.sends - inst.quota_from >= quota

    def renew_quota(self, instance_id: str) -> Instance:
        """A new month for the instance's quota (sandbox-only): its sends count from 0."""
        with self.lock:
            inst = self.instances.get(instance_id)
            if inst is None:
                raise KeyError(f"no instance {instance_id!r}")
            inst.quota_from = inst.sends
            return inst

    def inject_incoming(
        self,
        instance_id: str,
        sender: str,
        text: str,
        *,
        quote: str | None = None,
        button: str | None = None,
        row: str | None = None,
    ) -> str:
        """Simulate someone writing to the instance (sandbox-only); returns the message id.

        ``quote``: the id of a message the reply quotes; ``button`` / ``row``: the id of
        the button or list row tapped (``text`` is then its title)."""
        if button and row:
            raise ValueError("a message taps a button or a list row, not both")
        kind, reply_id = ("button", button) if button else ("list", row) if row else ("text", None)
        with self.lock:
            if instance_id not in self.instances:
                raise KeyError(f"no instance {instance_id!r}")
            if not sender.isdigit():
                raise ValueError(f"sender must be digits only, not {sender!r}")
            mid = incoming_id(self.rng)
            self.instances[instance_id].known_chats.add(sender)  # they wrote: a known chat
            body = ev.incoming_body(
                self.config.dialect,
                instance_id,
                mid,
                sender,
                text,
                int(self.clock()),
                reply_kind=kind,
                reply_id=reply_id,
                variant=self.rng.randrange(8),
                quoted_id=quote or None,
            )
            self._emit_now(instance_id, "incoming", body)
            return mid

    def _emit_connection(self, inst: Instance, reason: str) -> None:
        if inst.state == CONNECTED:
            inst.sends_since_connect = 0
        if not self.config.connection_events or self.config.strict:
            return
        body = ev.connection_body(
            self.config.dialect, inst.id, inst.state, reason=reason, phone=inst.phone
        )
        self._emit_now(inst.id, "connection", body)

    def _emit_now(self, instance_id: str, name: str, body: dict[str, Any]) -> None:
        if self.emitter is not None:
            self.emitter.schedule(0.0, EventJob(instance_id, name, body))

    def _on_due(self, job: EventJob) -> Delivery | None:
        """Called by the emitter when ``job`` falls due: move the truth, record, hand over."""
        body = job.body
        if body is None and job.message_id is not None and job.truth is not None:
            body = ev.status_body(
                self.config.dialect,
                job.instance_id,
                job.message_id,
                job.chat,
                job.truth,
                job.at,
                error_code=job.error_code,
                variant=job.variant,
            )
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        with self.lock:
            if job.truth is not None and job.message_id is not None:
                msg = self.messages.get(job.message_id)
                if msg is not None:
                    if job.truth == "failed":
                        msg.status, msg.error_code = "failed", job.error_code
                    elif (
                        msg.status != "failed" and STATUS_RANK[job.truth] > STATUS_RANK[msg.status]
                    ):
                        msg.status = job.truth
            inst = self.instances.get(job.instance_id)
            url = inst.webhook_url if inst is not None and inst.webhook_enabled else None
            record: dict[str, Any] = {
                "seq": self.events_dropped + len(self.events),
                "at": self.clock(),
                "instance_id": job.instance_id,
                "event": job.name,
                "message_id": job.message_id,
                "status": job.truth,
                "url": redact_url(url),
                "delivered": None if url else False,
                "error": None if url else ("instance gone" if inst is None else "no webhook"),
                "body": data,
            }
            self.events.append(record)
            if len(self.events) > self.config.events_kept:
                cut = max(1, self.config.events_kept // 10)
                del self.events[:cut]
                self.events_dropped += cut
        if url is None:
            return None
        return Delivery(url=url, body=data, record=record, lane=job.message_id or job.instance_id)

    # ----------------------------------------------------------------- inspection
    def stats_view(self) -> dict[str, Any]:
        """Counters: requests, errors, faults, accepted, per recipient, events."""
        with self.lock:
            per = self.stats.per_recipient
            emitter = self.emitter
            return {
                "requests": dict(self.stats.requests),
                "requests_total": sum(self.stats.requests.values()),
                "errors": dict(self.stats.errors),
                "faults": dict(self.stats.faults),
                "accepted": self.stats.accepted,
                "recipients": len(per),
                "recipients_with_several": sorted(k for k, v in per.items() if v > 1),
                "per_recipient": dict(per),
                "instances": len(self.instances),
                "events_recorded": self.events_dropped + len(self.events),
                "events_pending": emitter.pending() if emitter else 0,
                "webhook_delivered": emitter.delivered if emitter else 0,
                "webhook_failed": emitter.failed if emitter else 0,
            }

    def answers_view(self, to: str | None = None) -> dict[str, Any]:
        """Every simulated answer (with the message it answers) and who sent STOP."""
        with self.lock:
            items = [a for a in self.answers if to is None or a["to"] == to]
            return {"items": items, "stopped": sorted(self.stopped)}

    def events_view(self, since: int = 0, limit: int = 1000) -> dict[str, Any]:
        """Event records with ``seq >= since`` (bodies decoded), at most ``limit``."""
        with self.lock:
            start = max(0, since - self.events_dropped)
            chunk = self.events[start : start + max(0, limit)]
            out = [{**r, "body": json.loads(r["body"])} for r in chunk]
            return {
                "events": out,
                "next": (out[-1]["seq"] + 1) if out else max(since, self.events_dropped),
                "total": self.events_dropped + len(self.events),
            }


def _created(instance_id: str) -> dict[str, Any]:
    return {
        "status": "success",
        "message": "Instance ID generated successfully",
        "instance_id": instance_id,
    }
