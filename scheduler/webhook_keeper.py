"""The leader keeps every connected instance's webhook at the deployment's URL.

The gateway cannot report an instance's current webhook (its spec has no such
operation), so what it holds is unknown: another process, a user or the gateway itself
may have changed it. The leader therefore registers the deployment's URL
(:func:`campaigns.instances.webhook_address`) again for every connected instance each
``every_seconds``, and at once for an instance that became connected (a new link, or a
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
    linked_ids,
    registered_webhook_digests,
    set_webhook,
    webhook_digest,
)
from gateway.client import GatewayClient
from gateway.errors import GatewayError

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
    _known: set[str] = field(default_factory=set, init=False)
    _last_full: float | None = field(default=None, init=False)

    def forget(self) -> None:
        """Start over (leadership lost): the next run registers every connected instance."""
        self._known.clear()
        self._last_full = None

    def run_once(self, now: datetime) -> list[str]:
        """Register the webhook where it is due; returns the instances registered."""
        ids = linked_ids(self.engine)
        clock = self.monotonic()
        full = self._last_full is None or clock - self._last_full >= self.every_seconds
        due = ids if full else [i for i in ids if i not in self._known]
        if full:
            self._last_full = clock
        self._known = set(ids)
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
                    self._known.discard(instance_id)  # try again at the next run
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
