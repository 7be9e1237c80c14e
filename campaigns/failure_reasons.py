"""Why a message did not arrive, in plain words: the one mapping from a row's stored error
and gateway error code to what an operator reads.

Used by the campaign page and the API's recipient listing (``reason``), by test sends, and
by the report's ``reason`` column. The stored ``error`` stays as it was (the evidence);
this only words it. Unknown errors are shown as stored.
"""

from __future__ import annotations

import re

from campaigns.cooldown import is_cooldown_error
from campaigns.delivery_lifecycle import (
    LEASE_EXPIRED_ERROR,
    OPTED_OUT_ERROR,
    RESTRICTION_CODE,
)

#: the gateway's error code for "this number is not on the app"
NOT_ON_APP_CODE = "404"

NOT_ON_APP = "not on WhatsApp"
RESTRICTED = "sender restricted: it may not reach new contacts for a while"
LOGGED_OUT = "sender logged out: link it again on the Instances page"
NOT_LINKED = "sender not linked yet: scan its QR code"
QUOTA = "sender's message quota used up"
BAD_TOKEN = "the gateway refused the access token"  # noqa: S105  (words, not a secret)
UNREACHABLE = "the gateway could not be reached"
MAYBE_SENT = "unknown whether it was sent (the gateway did not answer in time)"
STOPPED_MID_SEND = "unknown whether it was sent (gatecast stopped while sending)"
OPTED_OUT = "opted out"
COOLDOWN = "messaged recently by another campaign (contact cooldown)"
INVALID_NUMBER = "not a valid phone number"
CANCELLED = "campaign cancelled before it was sent"

#: (pattern over the lower-cased error, words); the first that matches wins
_TEXT_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), words)
    for pattern, words in (
        (r"relogin|logged out|log in again", LOGGED_OUT),
        (r"not been activated|not activated", NOT_LINKED),
        (r"exceeded the maximum limit|quota", QUOTA),
        (r"access token|credentials|http 401|http 403", BAD_TOKEN),
        (r"invalid phone number|phone number is required", INVALID_NUMBER),
        (r"not on (the app|whatsapp)|not registered|not exist on whatsapp", NOT_ON_APP),
        (r"the gateway was not reached|connecterror|proxy refused", UNREACHABLE),
        (r"may have been sent|whether the message left is unknown", MAYBE_SENT),
        (r"campaign cancelled", CANCELLED),
    )
)

_CODE = re.compile(r"\(code (\w+)\)")


def plain_reason(error: str | None, error_code: str | None = None) -> str | None:
    """What ``error`` (and the gateway's ``error_code``) means for the operator, or None
    when there is no error."""
    if not error and not error_code:
        return None
    code = error_code
    if code is None and error:
        found = _CODE.search(error)
        code = found.group(1) if found else None
    if code == NOT_ON_APP_CODE:
        return NOT_ON_APP
    if code == RESTRICTION_CODE:
        return RESTRICTED
    text = error or ""
    if text == OPTED_OUT_ERROR:
        return OPTED_OUT
    if text == LEASE_EXPIRED_ERROR:
        return STOPPED_MID_SEND
    if is_cooldown_error(text):
        return COOLDOWN
    low = text.lower()
    for pattern, words in _TEXT_RULES:
        if pattern.search(low):
            gave_up = re.match(r"gave up after (\d+) attempts", low)
            return f"{words} (gave up after {gave_up.group(1)} attempts)" if gave_up else words
    if code and not text:
        return f"failed by the gateway (code {code})"
    return text


__all__ = ["NOT_ON_APP", "NOT_ON_APP_CODE", "plain_reason"]
