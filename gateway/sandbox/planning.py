"""What happens after an accepted send: the webhook events of one message, and when.

Every choice is drawn from the state's ``random.Random`` (the caller holds the state's lock),
so a seed replays the same story: sent, delivered, maybe read, maybe a reply or STOP,
presence, failures for numbers not on the app, duplicates and reordering.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from gateway.sandbox import events_out as ev
from gateway.sandbox.config import SandboxConfig
from gateway.sandbox.records import EventJob, SentMessage

REPLY_TEXTS = ("Thanks!", "Who is this?", "ok 👍", "Call me later", "Interested, tell me more")
HEX = "0123456789ABCDEF"


def jitter(rng: random.Random, base: float) -> float:
    """``base`` seconds give or take 20 %."""
    return base * (0.8 + 0.4 * rng.random()) if base > 0 else 0.0


def incoming_id(rng: random.Random) -> str:
    """An id for a message someone sent to the instance (``3A`` + 18 hex)."""
    return "3A" + "".join(rng.choice(HEX) for _ in range(18))


def choices_of(msg: SentMessage) -> list[tuple[str, str, str]]:
    """The ``(kind, id, title)`` choices a recipient of ``msg`` can tap: its quick-reply
    buttons, template buttons or list rows, in order ([] for any other message)."""
    content = msg.payload.get("message")
    if not isinstance(content, dict):
        return []
    if msg.type == "interactive":
        out = []
        for b in content.get("interactiveButtons", []):
            if b.get("name") == "quick_reply":
                params = json.loads(b["buttonParamsJson"])
                out.append(("button", params["id"], params["display_text"]))
        return out
    if msg.type == "template":
        return [
            ("template_button", b["quickReplyButton"]["id"], b["quickReplyButton"]["displayText"])
            for b in content.get("templateButtons", [])
        ]
    if msg.type == "list":
        rows = [r for s in content.get("sections", []) for r in s["rows"]]
        return [("list", r["rowId"], r["title"]) for r in rows]
    return []


def stable_choice(seed: int, recipient: str, count: int) -> int:
    """The index a recipient taps among ``count`` choices: the same for the same seed and
    recipient in every run, independent of the order of sends."""
    digest = hashlib.sha256(f"{seed}:{recipient}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def answer_total(cfg: SandboxConfig, msg: SentMessage) -> float:
    """The chance that the recipient of ``msg`` answers it (a tap counts only when the
    message has choices)."""
    tap = cfg.tap_rate if cfg.tap_rate > 0 and choices_of(msg) else 0.0
    return cfg.stop_rate + cfg.reply_rate + tap + cfg.keyword_rate


def plan_message_events(
    cfg: SandboxConfig,
    rng: random.Random,
    msg: SentMessage,
    *,
    refused: str | None = None,
    silent: bool = False,
) -> list[tuple[float, EventJob]]:
    """The ``(delay in seconds, event)`` list that follows the accepted send ``msg``
    (``refused``: the error code of a failed status instead, e.g. a timelock's 463;
    ``silent``: the recipient sent STOP before and never answers again)."""
    dialect = cfg.dialect
    iid = msg.instance_id
    now = int(msg.at)
    d_sent, d_deliv, d_read = (jitter(rng, d) for d in cfg.status_delays)
    d_deliv = max(d_deliv, d_sent)
    d_read = max(d_read, d_deliv)
    plan: list[tuple[float, EventJob]] = []
    is_group = msg.chat.endswith("@g.us")
    not_on_app = not is_group and (
        msg.to in cfg.not_on_app or (cfg.not_on_app_rate > 0 and rng.random() < cfg.not_on_app_rate)
    )

    def status(delay: float, st: str, code: str | None = None) -> None:
        variant = 0 if dialect != "reference" else rng.choice((0, 0, 1, 2))
        plan.append(
            (  # each status carries the time it happened, as a real gateway stamps it
                delay,
                EventJob(
                    iid, "status", None, msg.id, st, code, msg.chat, int(msg.at + delay), variant
                ),
            )
        )

    if refused is not None:
        status(d_sent, "failed", refused)
    elif not_on_app:
        status(d_sent, "failed", "404")
    elif cfg.error_463_rate > 0 and rng.random() < cfg.error_463_rate:
        status(d_sent, "failed", "463")
    else:
        status(d_sent, "sent")
        status(d_deliv, "delivered")
        replying = not is_group and rng.random() < answer_total(cfg, msg)
        if replying or (not is_group and rng.random() < cfg.read_rate):
            status(d_read, "read")
        if cfg.presence_events and not is_group:
            online = ev.presence_body(dialect, iid, msg.chat, "available", now)
            offline = ev.presence_body(dialect, iid, msg.chat, "unavailable", now)
            plan.append((d_deliv, EventJob(iid, "presence", online)))
            plan.append(
                (d_read + max(cfg.status_delays[0], 0.01), EventJob(iid, "presence", offline))
            )
        if replying and not silent:
            if cfg.reply_delay_seconds is None:
                d_reply = d_read + jitter(rng, cfg.status_delays[0])
            else:
                d_reply = d_read + rng.uniform(*cfg.reply_delay_seconds)
            if dialect == "reference":  # the reference forwards contact noise too
                contact = [{"id": msg.chat, "notify": f"Contact {msg.to[-4:]}"}]
                body = ev.reference_body(iid, "contacts.upsert", contact)
                plan.append((d_reply, EventJob(iid, "contacts", body)))
            plan.append((d_reply, reply_job(cfg, rng, msg, at=msg.at + d_reply)))
    if cfg.reorder_events and len(plan) > 1 and rng.random() < 0.5:
        delays = [d for d, _ in plan]
        rng.shuffle(delays)
        plan = [(d, job) for d, (_, job) in zip(delays, plan, strict=True)]
    if cfg.duplicate_event_rate > 0:
        for delay, job in list(plan):
            if rng.random() < cfg.duplicate_event_rate:
                plan.append((delay + jitter(rng, 0.05), job))
    return plan


def reply_job(
    cfg: SandboxConfig, rng: random.Random, msg: SentMessage, *, at: float | None = None
) -> EventJob:
    """The recipient's answer (stamped ``at``, default the send's time): STOP, a short
    text (on a message with choices, one of them), a tap on a choice (the recipient's
    stable choice) or a keyword; recorded on ``msg`` (``replied``, ``answer``)."""
    choices = choices_of(msg)
    tap = cfg.tap_rate if cfg.tap_rate > 0 and choices else 0.0
    pick = rng.random() * (cfg.stop_rate + cfg.reply_rate + tap + cfg.keyword_rate)
    kind, reply_id, how = "text", None, "text"
    if pick < cfg.stop_rate:
        text, how = "STOP", "stop"
    elif pick < cfg.stop_rate + cfg.reply_rate:
        text = rng.choice(REPLY_TEXTS)
        if choices:
            kind, reply_id, text = rng.choice(choices)
            how = "tap"
    elif pick < cfg.stop_rate + cfg.reply_rate + tap:
        kind, reply_id, text = choices[stable_choice(cfg.seed, msg.to, len(choices))]
        how = "tap"
    else:
        text = rng.choice([k.strip() for k in cfg.keywords if k.strip()])
        how = "stop" if text.upper() == "STOP" else "keyword"
    # a choice quotes the message whose buttons it tapped (as WhatsApp does); a text
    # quotes it for ``quote_rate`` of replies (no draw at 0: a seed replays as before)
    quoting = kind != "text" or (cfg.quote_rate > 0 and rng.random() < cfg.quote_rate)
    incoming = incoming_id(rng)
    stamp = int(msg.at if at is None else at)
    body = ev.incoming_body(
        cfg.dialect,
        msg.instance_id,
        incoming,
        msg.to,
        text,
        stamp,
        reply_kind=kind,
        reply_id=reply_id,
        variant=rng.randrange(8),
        quoted_id=msg.id if quoting else None,
    )
    msg.replied = text
    msg.answer = answer_record(msg, how, kind, reply_id, text, incoming, stamp, quoting)
    return EventJob(msg.instance_id, "incoming", body, msg.id)


def answer_record(
    msg: SentMessage,
    how: str,
    kind: str,
    reply_id: str | None,
    text: str,
    incoming: str,
    at: int,
    quoting: bool,
) -> dict[str, Any]:
    """The sandbox's record of a simulated answer (``/sandbox/answers``)."""
    return {
        "message_id": msg.id,
        "instance_id": msg.instance_id,
        "to": msg.to,
        "answer": how,  # stop, text, keyword, tap
        "kind": kind,  # text, button, template_button, list
        "id": reply_id,
        "text": text,
        "incoming_id": incoming,
        "at": at,
        "quotes": quoting,
    }
