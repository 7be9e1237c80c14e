"""Recipient time (``[schedule] recipient_timezone``): the zone each recipient is sent in,
and when its row is first due.

A recipient's zone is its contact's ``timezone`` attribute (imported from a ``timezone``
column, refused at import unless an IANA name), else the zone of its phone number's
region when phonenumbers knows exactly one (``+49...``: Europe/Berlin), else the
campaign's own zone (a region with several zones, such as +1 or +7, without a finer
prefix). It is resolved once per delivery row at materialisation and stored on the row
(``deliveries.recipient_tz``); the claim never calls Python per row
(``scheduler.windows.open_zones``).

The start in recipient time: a row is not due before the start's wall time in its
recipient's zone (the campaign starts at its own zone's start; recipients whose zone is
behind wait for their own wall time, those ahead are due at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from campaigns.campaign_file import timezone_problem

#: the contact attribute that names a recipient's zone (``campaigns.importer.TIMEZONE_KEY``)
TIMEZONE_ATTRIBUTE = "timezone"


def phone_zone(phone: str) -> str | None:
    """The zone phonenumbers gives an E.164 ``phone`` when it gives exactly one (by its
    region, or a finer prefix such as a US area code), else None."""
    import phonenumbers  # here: a command that never places a recipient never loads it
    from phonenumbers import timezone as phone_zones

    try:
        number = phonenumbers.parse(phone)
    except phonenumbers.NumberParseException:
        return None
    zones = phone_zones.time_zones_for_number(number)
    if len(zones) != 1 or zones[0] == phone_zones.UNKNOWN_TIMEZONE:
        return None
    return str(zones[0])


@lru_cache(maxsize=1024)
def _valid_zone(name: str) -> bool:
    return timezone_problem(name) is None


def recipient_zone(phone: str, attributes: Mapping[str, Any], fallback: str) -> str:
    """The IANA zone a recipient is sent in (module docstring); ``fallback``: the
    campaign's zone."""
    named = attributes.get(TIMEZONE_ATTRIBUTE)
    if isinstance(named, str) and named.strip() and _valid_zone(named.strip()):
        return named.strip()
    return phone_zone(phone) or fallback


class FirstDue:
    """When each zone's rows are first due: the start's wall time in that zone, not
    before ``now`` (the materialisation); one computation per zone."""

    def __init__(self, start: datetime, campaign_zone: ZoneInfo, now: datetime) -> None:
        self.wall = start.astimezone(campaign_zone).replace(tzinfo=None)
        self.now = now
        self._due: dict[str, datetime] = {}

    def __call__(self, zone: str) -> datetime:
        due = self._due.get(zone)
        if due is None:
            local = self.wall.replace(tzinfo=ZoneInfo(zone))
            # a wall time inside a DST gap resolves forward, as the window's start does
            due = max(self.now, local.astimezone(self.now.tzinfo))
            self._due[zone] = due
        return due


__all__ = ["TIMEZONE_ATTRIBUTE", "FirstDue", "phone_zone", "recipient_zone"]
