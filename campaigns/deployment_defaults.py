"""The deployment's defaults an admin sets on the Settings page (issue 31, decision 65).

Three defaults, stored in ``settings`` (``storage.queries.settings``) and applied only
when something is created, so nothing already stored changes and the dispatcher never
reads them:

- ``region``: the country of phone numbers written without ``+`` in an import that names
  none (an ISO 3166 code ``campaigns.phones`` knows; unset: ``GATECAST_DEFAULT_REGION``);
- ``pace``: a campaign file's ``[pace]`` (same fields and limits), written into the
  stored file of a campaign whose file has no ``[pace]``;
- ``schedule``: a sending ``window`` and its ``timezone`` (a campaign file's
  ``[schedule]`` fields), written into a campaign whose file gives no window (the
  timezone only when the file gives no timezone, start or cron either).

Unset (None) means the built-in default of a campaign file.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy import Engine

from campaigns.campaign_file import (
    CampaignFileError,
    CampaignSpec,
    FieldError,
    PaceSpec,
    ScheduleSpec,
    field_errors,
    window_texts,
)
from campaigns.phones import region_names
from storage.queries.settings import read_settings, write_settings

#: the ``[schedule]`` fields a default may hold
SCHEDULE_FIELDS = ("window", "timezone")


class DefaultsError(CampaignFileError):
    """Defaults that are not valid; ``errors`` names each field (``pace.daily_cap``)."""


class Defaults(BaseModel):
    """The stored defaults; None: not set (the built-in one applies)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str | None = None
    pace: PaceSpec | None = None
    schedule: ScheduleSpec | None = None

    def window_text(self) -> tuple[str, str] | None:
        """The default window as written (HH:MM each), None when none is set."""
        if self.schedule is None or self.schedule.window is None:
            return None
        return window_texts(self.schedule.window)

    def window_zone(self) -> str | None:
        """The default window's timezone, None when no window is set."""
        if self.schedule is None or self.schedule.window is None:
            return None
        return self.schedule.timezone

    def as_json(self) -> dict[str, Any]:
        """The defaults as the API shows them (``schedule``: only window and timezone)."""
        window = self.window_text()
        return {
            "region": self.region,
            "pace": None if self.pace is None else self.pace.model_dump(mode="json"),
            "schedule": None
            if self.schedule is None
            else {
                "window": None if window is None else list(window),
                "timezone": self.schedule.timezone,
            },
        }


def _region_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a two-letter country code, e.g. GB"
    if value.upper() not in {r.code for r in region_names()}:
        return f"{value!r} is not a country code we know (two letters, e.g. GB, US, DE)"
    return None


def parse_defaults(data: Mapping[str, Any]) -> Defaults:
    """Validate defaults as sent (``{"region": "GB", "pace": {...}, "schedule":
    {"window": ["09:00", "20:00"], "timezone": "Europe/London"}}``); raise
    :class:`DefaultsError` naming every field that is wrong."""
    errors: list[FieldError] = []
    region = data.get("region")
    if region is not None and (problem := _region_problem(region)) is not None:
        errors.append(FieldError("region", problem))
    schedule = data.get("schedule")
    if isinstance(schedule, Mapping):
        errors.extend(
            FieldError(f"schedule.{k}", "not a default (only window and timezone)")
            for k in schedule
            if k not in SCHEDULE_FIELDS
        )
        schedule = {k: v for k, v in schedule.items() if k in SCHEDULE_FIELDS}
    try:
        parsed = Defaults.model_validate(
            {**data, "region": region.upper() if isinstance(region, str) else None}
            | ({"schedule": schedule} if schedule is not None else {})
        )
    except ValidationError as exc:
        errors.extend(e for e in field_errors(exc) if e.path != "region")
        raise DefaultsError(errors, "settings") from None
    if errors:
        raise DefaultsError(errors, "settings")
    return parsed


def read_defaults(engine: Engine) -> Defaults:
    """The stored defaults (none set: every field None). A stored value that no longer
    validates (a region ``phonenumbers`` dropped) counts as not set."""
    stored = read_settings(engine)
    try:
        return parse_defaults({k: stored.get(k) for k in Defaults.model_fields})
    except DefaultsError:
        return Defaults()


def save_defaults(engine: Engine, defaults: Defaults, *, now: datetime, by: str | None) -> None:
    """Store ``defaults`` (a field set to None is removed: its built-in default applies)."""
    shown = defaults.as_json()
    write_settings(engine, {k: shown[k] for k in Defaults.model_fields}, now=now, by=by)


def import_region(engine: Engine, given: str | None, fallback: str) -> str:
    """The region of an import: the one ``given``, else the stored default, else
    ``fallback`` (the deployment's ``GATECAST_DEFAULT_REGION``); upper case."""
    if given:
        return given.upper()
    return (read_defaults(engine).region or fallback).upper()


def with_defaults(spec: CampaignSpec, defaults: Defaults) -> CampaignSpec:
    """``spec`` with the stored pace if its file has no ``[pace]``, the stored window
    (and timezone, when the file gives no timezone, start or cron) if it gives no window."""
    if defaults.pace is not None and "pace" not in spec.model_fields_set:
        spec = spec.model_copy(update={"pace": defaults.pace})
    chosen = defaults.schedule
    if chosen is None or chosen.window is None or spec.schedule.window is not None:
        return spec
    update: dict[str, Any] = {"window": chosen.window}
    if not {"timezone", "start", "cron"} & spec.schedule.model_fields_set:
        update["timezone"] = chosen.timezone
    return spec.model_copy(update={"schedule": spec.schedule.model_copy(update=update)})
