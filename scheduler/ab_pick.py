"""When an A/B test's winner is picked: ``[ab] after`` the campaign's start, by the
dispatcher, before it claims (``campaigns.variants.pick_and_release`` picks and releases
the rest; this module only keeps the time of each running campaign's pick).

The rest's rows wait queued with no due time, so no claim can take them before the pick;
the pick makes them due. A campaign's pick time is read once (it does not change), and
forgotten once picked or stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine

from campaigns import variants
from scheduler.claiming import RunningCampaign

log = logging.getLogger("gatecast.dispatch")


@dataclass(eq=False)
class ABPicks:
    """Each running A/B campaign's pick time (None: nothing left to pick)."""

    engine: Engine
    _due: dict[int, datetime | None] = field(default_factory=dict, init=False)

    def before_claim(self, camp: RunningCampaign, now: datetime, wakes: list[datetime]) -> None:
        """Pick ``camp``'s winner when its time has come; else wake up for it."""
        if camp.policy.ab_after_seconds <= 0:
            return
        if camp.id not in self._due:
            self._due[camp.id] = variants.pick_due(self.engine, camp.id)
        due = self._due[camp.id]
        if due is None:
            return
        if now < due:
            wakes.append(due)
            return
        pick = variants.pick_and_release(self.engine, camp.id, now=now)
        self._due[camp.id] = None
        if pick is not None:
            log.info("campaign %s: the rest is sent with variant %s", camp.id, pick["winner"])

    def forget(self, campaign_ids: Iterable[int]) -> None:
        """Drop what is kept of campaigns that stopped running."""
        for cid in campaign_ids:
            self._due.pop(cid, None)


__all__ = ["ABPicks"]
