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
    GATEWAY_FAILED_ERROR,
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

#: the gateway's error codes gatecast knows, in words: how a failed status with that
#: code is recorded (:func:`gateway_failure`) and shown (:func:`plain_reason`)
GATEWAY_CODE_WORDS: tuple[tuple[str, str], ...] = (
    (NOT_ON_APP_CODE, NOT_ON_APP),
    (RESTRICTION_CODE, RESTRICTED),
)
_CODE_WORDS = dict(GATEWAY_CODE_WORDS)

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
    if code in _CODE_WORDS:
        return _CODE_WORDS[code]
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
        return gateway_failure(code)
    return text


def gateway_failure(code: str | None) -> str:
    """The error a failed status event records on its row, in the words every face
    shows: "not on WhatsApp (code 404)", else "failed by the gateway (code N)"; the
    report prints it as stored, the dashboard and the API as :func:`plain_reason`."""
    if code is None:
        return GATEWAY_FAILED_ERROR
    return f"{_CODE_WORDS.get(code, GATEWAY_FAILED_ERROR)} (code {code})"


#: the errors :func:`gateway_failure` records for the known codes, for the statement that
#: fails rows in bulk (``storage.queries.events``)
GATEWAY_CODE_ERRORS: tuple[tuple[str, str], ...] = tuple(
    (code, gateway_failure(code)) for code, _ in GATEWAY_CODE_WORDS
)


__all__ = [
    "GATEWAY_CODE_ERRORS",
    "GATEWAY_CODE_WORDS",
    "NOT_ON_APP",
    "NOT_ON_APP_CODE",
    "gateway_failure",
    "plain_reason",
]
