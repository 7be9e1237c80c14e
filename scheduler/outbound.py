"""The sender of outbound webhooks: runs on the leader, delivers the outbox's messages.

At least once and in order per recipient: a pass claims the due messages that are each
the oldest unsettled one of their (endpoint, recipient) (``storage.queries.outbound.
claim_due``), posts each endpoint's in turn (endpoints in parallel threads), and records
every attempt in the endpoint's log. A 2xx answer delivers; anything else (another
status, a timeout, a refused connection) retries after an exponential backoff with
jitter, until the message is :attr:`OutboundPolicy.give_up_after` old (3 days) and is
marked failed. When an attempt fails, the endpoint's other messages of that pass wait
for its next try (a receiver that is down is not hammered). An endpoint whose every
attempt has failed for :attr:`OutboundPolicy.disable_after` (24 h) is disabled: its
events are no longer written, its unsettled messages wait for a replay.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy import Engine

from campaigns.webhook_endpoints import new_message_id, signature_header
from gateway.tls import client_ssl_context
from storage.queries import outbound as q
from storage.types import utcnow

log = logging.getLogger("gatecast.outbound")


@dataclass(frozen=True)
class OutboundPolicy:
    """Timing of the deliveries (the defaults are the documented ones)."""

    timeout_seconds: float = 10.0
    first_retry_seconds: float = 1.0
    max_retry_seconds: float = 3600.0
    give_up_after: timedelta = timedelta(days=3)
    disable_after: timedelta = timedelta(hours=24)
    batch: int = 200
    parallel_endpoints: int = 8

    def backoff(self, failures: int) -> timedelta:
        """The wait after the ``failures``-th failed attempt: doubling from
        ``first_retry_seconds`` up to ``max_retry_seconds``, times a random 0.5-1."""
        base = min(self.first_retry_seconds * 2 ** max(failures - 1, 0), self.max_retry_seconds)
        return timedelta(seconds=base * random.uniform(0.5, 1.0))


def body_of(message: q.DueMessage) -> bytes:
    """The JSON body of a message: ``{"type", "timestamp", "data"}`` (the same bytes on
    every attempt)."""
    envelope = {
        "type": message.event,
        "timestamp": message.occurred_at.isoformat().replace("+00:00", "Z"),
        "data": json.loads(message.data),
    }
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()


def _error_text(exc: httpx.HTTPError, timeout: float) -> str:
    """What went wrong, without the URL (it may hold a token)."""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        return "could not connect"
    return f"transport error ({type(exc).__name__})"


class OutboundSender:
    """One pass at a time (:meth:`run_once`), on the leader."""

    def __init__(
        self,
        engine: Engine,
        *,
        policy: OutboundPolicy | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.engine = engine
        self.policy = policy or OutboundPolicy()
        self.now = now
        self._pool = ThreadPoolExecutor(
            self.policy.parallel_endpoints, thread_name_prefix="gatecast-outbound"
        )

    def run_once(self) -> int:
        """Deliver what is due now; answers how many attempts were made."""
        now = self.now()
        # passes never overlap in one process; the hold only keeps a process that took
        # the lead over from sending the same messages at once (a crash: sent again later)
        hold = now + timedelta(seconds=max(60.0, 3 * self.policy.timeout_seconds))
        with self.engine.begin() as conn:
            due = q.claim_due(
                conn, now=now, hold_until=hold, limit=self.policy.batch, new_id=new_message_id
            )
        if not due:
            return 0
        by_endpoint: dict[int, list[q.DueMessage]] = defaultdict(list)
        for message in due:
            by_endpoint[message.endpoint_id].append(message)
        made = 0
        for count in self._pool.map(self._endpoint_pass, by_endpoint.values()):
            made += count
        return made

    def _endpoint_pass(self, messages: list[q.DueMessage]) -> int:
        """Post one endpoint's due messages in order; stop at its first failure."""
        results: list[q.AttemptResult] = []
        untried: list[int] = []
        failed_at: datetime | None = None
        retry_at: datetime | None = None
        with httpx.Client(
            timeout=self.policy.timeout_seconds,
            follow_redirects=False,
            verify=client_ssl_context(),
        ) as client:
            for message in messages:
                if failed_at is not None:
                    untried.append(message.id)
                    continue
                result = self._attempt(client, message)
                results.append(result)
                if result.outcome != "delivered":
                    failed_at = result.at
                    retry_at = result.next_attempt_at
        endpoint_id = messages[0].endpoint_id
        with self.engine.begin() as conn:
            q.record_attempts(conn, results)
            q.release(conn, untried, retry_at)
            if failed_at is None:
                q.endpoint_succeeded(conn, endpoint_id)
            else:
                delivered = [r for r in results if r.outcome == "delivered"]
                if delivered:
                    q.endpoint_succeeded(conn, endpoint_id)
                run = q.endpoint_failed(conn, endpoint_id, 1, failed_at)
                since = run["failing_since"]
                if since is not None and failed_at - since >= self.policy.disable_after:
                    hours = self.policy.disable_after.total_seconds() / 3600
                    reason = (
                        f"every attempt failed for {hours:g} h "
                        f"({run['consecutive_failures']} in a row); replay to enable it again"
                    )
                    q.disable_endpoint(conn, endpoint_id, reason)
                    log.warning("webhook endpoint %s disabled: %s", endpoint_id, reason)
        return len(results)

    def _attempt(self, client: httpx.Client, message: q.DueMessage) -> q.AttemptResult:
        body = body_of(message)
        at = self.now()
        stamp = int(at.timestamp())
        msg_id = message.webhook_id
        headers = {
            "content-type": "application/json",
            "user-agent": "gatecast-webhooks",
            "webhook-id": msg_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature_header(
                message.secret, message.previous_secret, msg_id, stamp, body
            ),
        }
        started = time.monotonic()
        status: int | None = None
        error: str | None = None
        try:
            answer = client.post(message.url, content=body, headers=headers)
            status = answer.status_code
            if not 200 <= status < 300:
                error = f"answered HTTP {status}"
        except httpx.HTTPError as exc:
            error = _error_text(exc, self.policy.timeout_seconds)
        duration_ms = int((time.monotonic() - started) * 1000)
        attempt = message.attempts + 1
        if error is None:
            outcome, next_at = "delivered", None
        else:
            first = message.first_attempt_at or at
            next_at = at + self.policy.backoff(attempt)
            outcome = "failed" if next_at - first >= self.policy.give_up_after else "retrying"
            if outcome == "failed":
                next_at = None
        return q.AttemptResult(
            message_id=message.id,
            endpoint_id=message.endpoint_id,
            attempt=attempt,
            at=at,
            outcome=outcome,
            status_code=status,
            error=error,
            duration_ms=duration_ms,
            next_attempt_at=next_at,
        )

    def close(self) -> None:
        """Stop the endpoint threads."""
        self._pool.shutdown(wait=True)


__all__ = ["OutboundPolicy", "OutboundSender", "body_of"]
