"""Sender care settings: warm-up, the health score and the 463 timelock.

One frozen value per process, set from ``GATECAST_*`` settings by the CLI at start
(:func:`configure`, as the process clock is) and read by ``scheduler/warmup.py``,
``scheduler/health.py`` and ``scheduler/timelock.py``. Tests and benchmarks that build a
dispatcher directly get the defaults. Light: ``gatecast/settings.py`` imports the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CareSettings:
    """The knobs of sender care (docs/scheduling-and-pacing.md, "Sender care")."""

    #: False: no sender warms up (``GATECAST_WARMUP_ENABLED``; a sender's own
    #: ``instance warmup --ramp/--day`` still applies)
    warmup_enabled: bool = True
    #: new-contact messages allowed on a sender's first day
    warmup_first_day: int = 15
    #: the allowance doubles every day, for this many days; then only the daily cap
    warmup_days: int = 7
    #: each day's allowance is drawn within +/- this share of the doubling (stable per
    #: sender and day), so senders do not ramp in lockstep
    warmup_spread: float = 0.2
    #: a message to a known contact uses this share of a new contact's
    warmup_known_weight: float = 0.5
    #: the health score halves in this many seconds without new signals
    health_half_life_seconds: float = 900.0
    #: score thresholds of the levels medium (pace halved), high (paused with a cool-down)
    #: and critical (paused until a person resumes)
    health_medium: float = 15.0
    health_high: float = 40.0
    health_critical: float = 80.0
    #: a sender paused at high resumes by itself after this many seconds
    health_cooldown_seconds: float = 1800.0
    #: a 463 timelock whose end the gateway does not say lasts this many seconds
    timelock_seconds: float = 60.0


DEFAULTS = CareSettings()
_current = DEFAULTS


def configure(settings: CareSettings) -> None:
    """This process's sender care settings (the CLI calls it once at start)."""
    global _current
    _current = settings


def current() -> CareSettings:
    """The settings in force in this process."""
    return _current


__all__ = ["DEFAULTS", "CareSettings", "configure", "current"]
