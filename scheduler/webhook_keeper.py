"""The leader keeps every linked instance's webhook at the deployment's URL.

The gateway cannot report an instance's current webhook (its spec has no such
operation), so what it holds is unknown: another process, a user or the gateway itself
may have changed it. The leader therefore registers the deployment's URL
(:func:`campaigns.instances.webhook_address`) again for every linked instance (connected,
or unconfirmed: its QR code shown) each ``every_seconds``, and at once for an instance
that became linked or changed state (a new link, a first send that confirmed it, a
reconnect after a connection loss). An instance whose row says gatecast last registered
another URL (its ``webhook_digest``: by hand, or a process without
``GATECAST_PUBLIC_URL``) or none is named in a warning (never the URL: it holds the
secret).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine

from campaigns.instances import (
    InstanceGone,
    linked_states,
    registered_webhook_digests,
    set_webhook,
    webhook_digest,
)
from gateway.client import GatewayClient
from gateway.errors import GatewayError
from storage.queries.instances import CONNECTED

log = logging.getLogger("gatecast.webhooks")


@dataclass(eq=False)
class WebhookKeeper:
    """Registers ``url`` for connected instances: all of them every ``every_seconds``,
    a newly connected one at the next :meth:`run_once`."""

    engine: Engine
    client_factory: Callable[[], GatewayClient]
    url: str
    every_seconds: float
    monotonic: Callable[[], float] = time.monotonic
    _known: dict[str, str] = field(default_factory=dict, init=False)
    _last_full: float | None = field(default=None, init=False)

    def forget(self) -> None:
        """Start over (leadership lost): the next run registers every connected instance."""
        self._known.clear()
        self._last_full = None

    def run_once(self, now: datetime) -> list[str]:
        """Register the webhook where it is due; returns the instances registered."""
        states = linked_states(self.engine)
        ids = list(states)
        clock = self.monotonic()
        full = self._last_full is None or clock - self._last_full >= self.every_seconds
        # due: every one on a full pass, else those newly linked or whose state changed
        # (an unconfirmed one that a send confirmed)
        due = ids if full else [i for i in ids if self._known.get(i) != states[i]]
        if full:
            self._last_full = clock
        self._known = dict(states)
        if not due:
            return []
        recorded = registered_webhook_digests(self.engine, due)
        expected = webhook_digest(self.url)
        done: list[str] = []
        with self.client_factory() as client:
            for instance_id in due:
                try:
                    set_webhook(self.engine, client, instance_id, self.url, now=now)
                except (GatewayError, InstanceGone) as exc:
                    log.warning("webhook of instance %s not registered: %s", instance_id, exc)
                    if states[instance_id] == CONNECTED:  # try again at the next run
                        self._known.pop(instance_id, None)
                    # an unconfirmed one (some gateways refuse the webhook before the
                    # scan) again once its state changes, or at the next full pass
                    continue
                if recorded.get(instance_id) != expected:
                    log.warning(
                        "the webhook of instance %s was not the deployment's webhook URL "
                        "(another address, or none, was registered last): registered it again",
                        instance_id,
                    )
                done.append(instance_id)
        if done:
            log.info("webhook registered again for %s", ", ".join(done))
        return done
