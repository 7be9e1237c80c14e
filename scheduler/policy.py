"""The parts of a stored campaign spec that the scheduler obeys, read once per campaign.

``Campaign.spec`` holds ``CampaignSpec.model_dump(mode="json")`` (validated by
``campaigns.campaign_file``); this reads its pace, retry, safety and schedule sections
into plain frozen values. Missing keys fall back to the campaign file's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import time
from typing import Any
from zoneinfo import ZoneInfo

from scheduler.retry import RetryPolicy


@dataclass(frozen=True)
class Pace:
    """Pace of one sender instance."""

    per_minute: float = 20.0
    delay_min: float = 5.0
    delay_max: float = 15.0
    daily_cap: int | None = 500

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


def _time(value: Any, field: str) -> time:
    if isinstance(value, time):
        return value
    try:
        return time.fromisoformat(str(value))
    except ValueError as exc:
        raise ValueError(f"{field}: {value!r} is not a time of day (HH:MM)") from exc


def _section(spec: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = spec.get(name) or {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name}: expected a table, got {type(value).__name__}")
    return value


def policy_from_spec(spec: Mapping[str, Any], *, timezone: str | None = None) -> CampaignPolicy:
    """Read the scheduler's view of a stored campaign spec (raises ValueError naming a field)."""
    schedule = _section(spec, "schedule")
    pace = _section(spec, "pace")
    retry = _section(spec, "retry")
    safety = _section(spec, "safety")
    tz_name = str(schedule.get("timezone") or timezone or "UTC")
    window_raw = schedule.get("window")
    window: tuple[time, time] | None = None
    if window_raw:
        if len(window_raw) != 2:
            raise ValueError("schedule.window: expected [start, end]")
        window = (
            _time(window_raw[0], "schedule.window[0]"),
            _time(window_raw[1], "schedule.window[1]"),
        )
    delay = pace.get("delay_seconds", (5, 15))
    cap = pace.get("daily_cap", 500)
    return CampaignPolicy(
        timezone=ZoneInfo(tz_name),
        window=window,
        pace=Pace(
            per_minute=float(pace.get("per_minute", 20)),
            delay_min=float(delay[0]),
            delay_max=float(delay[1]),
            daily_cap=None if cap is None else int(cap),
        ),
        retry=RetryPolicy(
            max_attempts=int(retry.get("max_attempts", 4)),
            backoff_seconds=float(retry.get("backoff_seconds", 30)),
        ),
        safety=Safety(
            max_failure_rate=float(safety.get("max_failure_rate", 0.5)),
            min_sample=int(safety.get("min_sample", 20)),
        ),
        instances=tuple(str(i) for i in spec.get("instances") or ()),
        missed_grace_minutes=float(schedule.get("missed_grace_minutes", 60)),
        cron=schedule.get("cron") or None,
    )
