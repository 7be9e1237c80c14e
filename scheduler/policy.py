"""The parts of a stored campaign spec that the scheduler obeys, read once per campaign.

``Campaign.spec`` holds ``CampaignSpec.model_dump(mode="json")``; it is read back by
``campaigns.campaign_file.stored_spec`` (the one parser of campaign specs) and its pace,
retry, safety and schedule sections become plain frozen values here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import time
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from scheduler.retry import RetryPolicy

if TYPE_CHECKING:  # the spec parser (and its template engine) loads when a spec is read:
    # the intake process imports this module and reads no campaign
    from campaigns.campaign_file import CampaignSpec


@dataclass(frozen=True)
class Pace:
    """Pace of one sender instance."""

    per_minute: float = 20.0
    delay_min: float = 5.0
    delay_max: float = 15.0
    daily_cap: int | None = 500
    #: typing presence before each one-to-one send, inside the gap (``[pace] typing``)
    typing: bool = False

    @property
    def unpaced(self) -> bool:
        """True when no rate and no delay apply: send as fast as possible."""
        return self.per_minute <= 0 and self.delay_max <= 0


@dataclass(frozen=True)
class Safety:
    """When a campaign pauses itself: failure rate above ``max_failure_rate``."""

    max_failure_rate: float = 0.5
    min_sample: int = 20


@dataclass(frozen=True)
class CampaignPolicy:
    """What the dispatcher and the start jobs need to know about one campaign."""

    timezone: ZoneInfo
    window: tuple[time, time] | None
    pace: Pace
    retry: RetryPolicy
    safety: Safety
    instances: tuple[str, ...]
    missed_grace_minutes: float = 60.0
    cron: str | None = None
    #: the window and start in each recipient's zone (``deliveries.recipient_tz``)
    recipient_timezone: bool = False
    #: skip contacts messaged by any campaign in the last this many hours (0: off)
    cooldown_hours: float = 0.0
    #: at most this many identical bodies in a row per sender (0: off;
    #: ``scheduler.content_guard``)
    max_identical: int = 0
    #: an A/B test: its winner is picked this long after the start (0: no test)
    ab_after_seconds: float = 0.0


def policy_of(spec: CampaignSpec) -> CampaignPolicy:
    """The scheduler's view of a validated campaign spec."""
    schedule, pace = spec.schedule, spec.pace
    horizon = spec.retry.horizon
    return CampaignPolicy(
        timezone=schedule.zone,
        window=schedule.window,
        pace=Pace(
            per_minute=float(pace.per_minute),
            delay_min=float(pace.delay_seconds[0]),
            delay_max=float(pace.delay_seconds[1]),
            daily_cap=pace.daily_cap,
            typing=pace.typing,
        ),
        retry=RetryPolicy(
            max_attempts=spec.retry.max_attempts,
            backoff_seconds=float(spec.retry.backoff_seconds),
            horizon_seconds=horizon.total_seconds() if horizon else 0.0,
            every_seconds=spec.retry.spacing.total_seconds(),
        ),
        safety=Safety(
            max_failure_rate=spec.safety.max_failure_rate,
            min_sample=spec.safety.min_sample,
        ),
        instances=tuple(spec.instances),
        missed_grace_minutes=float(schedule.missed_grace_minutes),
        cron=schedule.cron or None,
        recipient_timezone=schedule.recipient_timezone,
        cooldown_hours=spec.cooldown_hours,
        max_identical=spec.max_identical_in_row,
        ab_after_seconds=spec.ab.wait.total_seconds() if spec.ab is not None else 0.0,
    )


def policy_from_spec(
    spec: Mapping[str, Any] | CampaignSpec, *, timezone: str | None = None
) -> CampaignPolicy:
    """The policy of a stored campaign spec, read by :func:`campaign_file.stored_spec`.

    Raises ``CampaignFileError`` (a ValueError) naming each field that does not validate.
    ``timezone`` (the campaign row's column) is accepted for the callers' convenience;
    the spec's own ``schedule.timezone``, which that column copies, is the one obeyed.
    """
    from campaigns.campaign_file import stored_spec

    del timezone
    return policy_of(stored_spec(spec))
