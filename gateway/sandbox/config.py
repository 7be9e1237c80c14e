"""The sandbox's knobs: dialect, credentials, faults, traps and event timing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

Dialect = Literal["spec", "reference", "evolution", "waha"]


@dataclass(frozen=True)
class SandboxConfig:
    """How the sandbox behaves. Every rate is a probability in [0, 1] drawn per request/message.

    ``dialect``: ``spec`` (instance operations by POST, spec event names) or ``reference``
    (GET-only instance routes, the ``messages.update``/``messages.upsert`` envelope and the
    field notes' traps) or ``evolution`` (Evolution API v2's routes, ``apikey`` header,
    errors and webhook events: docs/gateways.md) or ``waha`` (WAHA's routes, ``X-Api-Key``
    header, errors and webhook events). Everything random is drawn from one
    ``random.Random(seed)``.
    """

    dialect: Dialect = "spec"
    seed: int = 0
    access_tokens: tuple[str, ...] = field(default=("sandbox-token",), repr=False)
    auto_link: bool = False
    # infrastructure faults on send requests (send, send_group, send_template)
    fault_rate_5xx: float = 0.0
    fault_rate_429: float = 0.0
    retry_after_seconds: tuple[int, int] = (1, 5)
    drop_rate: float = 0.0  # close without a response AFTER accepting the message
    slow_rate: float = 0.0  # accept the message, answer after slow_seconds
    slow_seconds: float = 0.0
    latency_ms: tuple[int, int] = (0, 0)
    # added to set_webhook alone, after latency_ms (a gateway slow to register webhooks)
    webhook_latency_ms: tuple[int, int] = (0, 0)
    # recipients
    not_on_app: frozenset[str] = frozenset()  # digits
    not_on_app_rate: float = 0.0
    error_463_rate: float = 0.0  # share of messages that fail with code 463 (a ban signal)
    # a reach-out timelock: after this many cold contacts (never messaged by the
    # instance, never heard from), the next cold one starts a lock of cold_lock_seconds
    # during which every message to a cold contact fails with code 463; known chats and
    # groups go through (one lock per instance)
    cold_lock_after: int | None = None
    cold_lock_seconds: float = 60.0
    # simulated people (docs/sandbox.md "Simulated people"): each a probability per
    # delivered one-to-one message, their sum at most 1; a person answers a message at
    # most once and never again after sending STOP
    reply_rate: float = 0.0  # a short text (on a message with choices: one of them)
    stop_rate: float = 0.0
    tap_rate: float = 0.0  # a tap on one of the message's own buttons or list rows
    keyword_rate: float = 0.0  # a reply that is one of ``keywords`` (STOP among them: a STOP)
    keywords: tuple[str, ...] = ("YES", "INFO", "STOP")
    # seconds from the read to the answer, (min, max); None: about the sent delay
    reply_delay_seconds: tuple[float, float] | None = None
    # share of text replies that quote the message they answer (a button or list choice
    # always quotes it)
    quote_rate: float = 0.0
    # webhook events
    status_delays: tuple[float, float, float] = (0.05, 0.2, 0.5)  # to sent/delivered/read
    read_rate: float = 1.0
    duplicate_event_rate: float = 0.0
    reorder_events: bool = False
    presence_events: bool = False
    webhook_timeout_seconds: float = 5.0
    webhook_workers: int = 4
    # field-notes traps (honoured in both dialects; they are HTTP 200 bodies)
    monthly_quota: int | None = None  # sends per instance before the quota string comes back
    no_key_rate: float = 0.0  # {"status":"success"} without a key: the send failed
    backend_down_rate: float = 0.0  # [], empty or non-JSON body: unknown whether it left
    number_from_json: bool = True  # False: like some reference builds, ignore JSON ``number``
    id_under_data: bool = False  # success body nests the key at data.key.id (some hosts)
    max_instances_per_token: int = 100
    # the connection drops (state ``disconnected``, a connection event) after this many
    # accepted sends since the instance last connected, as web sessions do; ``reconnect``
    # brings it back and the count starts again
    disconnect_after_sends: int | None = None
    # False: never post a connection event (the spec names none; some gateways send
    # none), so a client learns of a link only from a QR request ("already logged in")
    # or an accepted send
    connection_events: bool = True
    # True: follow gateway-spec.md to the letter where it shows nothing: no connection
    # event (as connection_events=False), and a QR request of a linked instance answers a
    # QR code like any other (the spec names no "already logged in" answer), so a client
    # learns of a link only from an accepted send
    strict: bool = False
    # False: answer reset_instance without the new id (as some gateways do); the old id
    # is deleted and a new unscanned instance exists all the same
    reset_returns_id: bool = True
    qr_rotate_seconds: float = 20.0
    events_kept: int = 1_000_000  # older event records are dropped from /sandbox/events

    def __post_init__(self) -> None:
        if self.dialect not in ("spec", "reference", "evolution", "waha"):
            raise ValueError(
                "dialect must be 'spec' or 'reference' (or 'evolution', 'waha'), "
                f"not {self.dialect!r}"
            )
        for name in (
            "fault_rate_5xx",
            "fault_rate_429",
            "drop_rate",
            "slow_rate",
            "not_on_app_rate",
            "error_463_rate",
            "reply_rate",
            "stop_rate",
            "tap_rate",
            "keyword_rate",
            "quote_rate",
            "read_rate",
            "duplicate_event_rate",
            "no_key_rate",
            "backend_down_rate",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {value!r}")
        fault_sum = (
            self.fault_rate_5xx
            + self.fault_rate_429
            + self.drop_rate
            + self.slow_rate
            + self.no_key_rate
            + self.backend_down_rate
        )
        if fault_sum > 1.0:
            raise ValueError(f"the fault and trap rates add up to {fault_sum}, more than 1")
        for name in ("latency_ms", "webhook_latency_ms"):
            lo, hi = getattr(self, name)
            if lo < 0 or hi < lo:
                raise ValueError(
                    f"{name} must be (min, max) with 0 <= min <= max, not {getattr(self, name)}"
                )
        answer_sum = self.reply_rate + self.stop_rate + self.tap_rate + self.keyword_rate
        if answer_sum > 1.0 + 1e-9:
            raise ValueError(
                f"reply_rate, stop_rate, tap_rate and keyword_rate add up to {answer_sum:g}, "
                "more than 1"
            )
        if self.keyword_rate > 0 and not [k for k in self.keywords if k.strip()]:
            raise ValueError("keywords must hold at least one keyword when keyword_rate > 0")
        if self.reply_delay_seconds is not None:
            lo, hi = self.reply_delay_seconds
            if lo < 0 or hi < lo:
                raise ValueError(
                    "reply_delay_seconds must be (min, max) with 0 <= min <= max, "
                    f"not {self.reply_delay_seconds}"
                )
        if any(d < 0 for d in self.status_delays):
            raise ValueError(f"status_delays must not be negative: {self.status_delays}")
        if self.slow_seconds < 0:
            raise ValueError(f"slow_seconds must not be negative: {self.slow_seconds}")
        low, high = self.retry_after_seconds
        if low < 0 or high < low:
            raise ValueError(
                f"retry_after_seconds must be (min, max), not {self.retry_after_seconds}"
            )
        if self.webhook_workers < 1 or self.qr_rotate_seconds <= 0:
            raise ValueError("webhook_workers must be >= 1 and qr_rotate_seconds > 0")
        if not self.access_tokens:
            raise ValueError("access_tokens must hold at least one token")
        bad = sorted(n for n in self.not_on_app if not n.isdigit())
        if bad:
            raise ValueError(f"not_on_app holds non-digit numbers: {', '.join(bad[:5])}")
        if self.monthly_quota is not None and self.monthly_quota < 0:
            raise ValueError("monthly_quota must not be negative")
        if self.cold_lock_after is not None and self.cold_lock_after < 0:
            raise ValueError("cold_lock_after must not be negative")
        if self.cold_lock_seconds <= 0:
            raise ValueError("cold_lock_seconds must be positive")
        if self.disconnect_after_sends is not None and self.disconnect_after_sends < 1:
            raise ValueError("disconnect_after_sends must be at least 1")

    def absent(self, digits: str) -> bool:
        """Whether the number ``digits`` is not on the app: listed in ``not_on_app``, or
        among the ``not_on_app_rate`` share drawn from the number and the seed (stable,
        so the evolution dialect's number check and its send refusal agree)."""
        if digits in self.not_on_app:
            return True
        if self.not_on_app_rate <= 0:
            return False
        draw = hashlib.sha256(f"{self.seed}:{digits}".encode()).digest()
        return int.from_bytes(draw[:8], "big") / 2**64 < self.not_on_app_rate
