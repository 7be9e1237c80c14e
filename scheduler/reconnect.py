"""Automatic reconnection of instances whose connection dropped.

A web session drops now and then (the gateway reports ``disconnected``: a lost
connection, not a logout). The scheduler's leader asks the gateway to ``reconnect`` each
such instance, backing off between attempts (30 s, 1, 2, 5, then every 10 minutes by
default), and a successful reconnect lifts the pause the drop caused, so the campaign goes
on without an operator. Gateways refuse a dropped connection's sends as "relogin
required", as they do a logged-out session's: an instance a send's refusal showed logged
out (paused ``relogin_required``) is tried as well, and the gateway's answer tells the two
apart (decision 48 in docs/architecture.md): a reconnect it refuses as ``relogin`` proves a
logout (``confirm_logout``: paused until its QR code is scanned again, never tried
again). A logout a connection event or an operator reported is left alone. An instance
whose id the gateway no longer knows ("Instance ID Invalidated") becomes ``gone`` and is
not tried again.

The schedule of attempts lives in memory: a restart (or a new leader) tries again at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine

from campaigns.delivery_lifecycle import instance_pause_reason
from campaigns.instances import confirm_logout, mark_gone, operate
from gateway.client import GatewayClient
from gateway.errors import GatewayError
from gateway.outcomes import InstanceProblem
from storage.queries import instances as iq

log = logging.getLogger("gatecast.reconnect")

#: seconds to wait before the 1st, 2nd, ... retry of one dropped instance (the last repeats)
DEFAULT_BACKOFF: tuple[float, ...] = (30.0, 60.0, 120.0, 300.0, 600.0)
#: the instance state that webhook connection events give a dropped connection
DROPPED = "disconnected"
#: the pause of an instance whose reconnect the gateway refused as an invalid id
GONE_INVALIDATED = "gone: the gateway says its id is invalid"
#: the pause a send refused as "relogin required" caused: a drop or a logout
REFUSED_PAUSE = instance_pause_reason(InstanceProblem.RELOGIN_REQUIRED)


@dataclass
class _Attempts:
    count: int
    next_at: datetime


class Reconnector:
    """Asks the gateway to reconnect dropped instances, with a backoff per instance."""

    def __init__(
        self,
        engine: Engine,
        client_factory: Callable[[], GatewayClient],
        *,
        backoff: Sequence[float] = DEFAULT_BACKOFF,
    ) -> None:
        if not backoff or any(b <= 0 for b in backoff):
            raise ValueError("backoff must hold positive seconds")
        self.engine = engine
        self.client_factory = client_factory
        self.backoff = tuple(backoff)
        self._attempts: dict[str, _Attempts] = {}

    def dropped(self) -> list[str]:
        """The instances whose connection may have dropped, per the stored state: a
        connection event's ``disconnected``, or a send's "relogin required" refusal."""
        with self.engine.connect() as conn:
            return iq.reconnect_candidates(conn, dropped=DROPPED, refused=REFUSED_PAUSE)

    def run_once(self, now: datetime) -> list[str]:
        """Try every dropped instance whose next attempt is due; the ids that reconnected."""
        dropped = self.dropped()
        for gone in set(self._attempts) - set(dropped):  # connected again (or removed)
            del self._attempts[gone]
        due = [i for i in dropped if i not in self._attempts or self._attempts[i].next_at <= now]
        if not due:
            return []
        healed: list[str] = []
        with self.client_factory() as client:
            for instance_id in due:
                if self._try(client, instance_id, now):
                    healed.append(instance_id)
        return healed

    def _try(self, client: GatewayClient, instance_id: str, now: datetime) -> bool:
        previous = self._attempts.get(instance_id)
        count = previous.count + 1 if previous else 1
        wait = self.backoff[min(count, len(self.backoff)) - 1]
        self._attempts[instance_id] = _Attempts(count, now + timedelta(seconds=wait))
        try:
            outcome = operate(self.engine, client, instance_id, "reconnect", now=now)
        except GatewayError as exc:
            if exc.problem is InstanceProblem.INVALID_INSTANCE:  # the id no longer exists
                mark_gone(self.engine, instance_id, GONE_INVALIDATED, now=now)
                log.warning("instance %s no longer exists at the gateway: marked gone", instance_id)
                return False
            if exc.problem is InstanceProblem.RELOGIN_REQUIRED:  # logged out, not dropped
                confirm_logout(self.engine, instance_id, now=now)
                log.warning(
                    "instance %s is logged out (the gateway refused to reconnect it): "
                    "scan its QR code again",
                    instance_id,
                )
                return False
            log.warning(
                "reconnecting instance %s failed (attempt %d, next in %.0f s): %s",
                instance_id,
                count,
                wait,
                exc,
            )
            return False
        except Exception:
            log.exception("reconnecting instance %s raised (attempt %d)", instance_id, count)
            return False
        if outcome.resumed_reason:
            log.info(
                "instance %s reconnected; its pause (%s) is lifted",
                instance_id,
                outcome.resumed_reason,
            )
        else:
            log.info("instance %s reconnected", instance_id)
        return True


__all__ = ["DEFAULT_BACKOFF", "DROPPED", "GONE_INVALIDATED", "REFUSED_PAUSE", "Reconnector"]
