"""Errors raised by the gateway client, and redaction of secrets from text and URLs.

The client never raises for a failed *send* (it returns a classified
:class:`~gateway.outcomes.SendOutcome`); it raises :class:`RequestValidationError` for bad
input before any I/O, and :class:`GatewayError` when an *instance operation* fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

from gateway.outcomes import InstanceProblem, OutcomeKind

REDACTED = "***"
# query parameters whose values are secret: the token, and a webhook URL (it may carry
# the receiver's secret in its path)
_TOKEN_IN_URL = re.compile(r"((?:access_token|webhook_url)=)[^&#\s\"']*", re.IGNORECASE)


class RequestValidationError(ValueError):
    """A request cannot be sent as given; ``field`` names the offending field."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class GatewayError(Exception):
    """An instance operation failed; ``kind`` and ``problem`` say how (as for sends)."""

    def __init__(
        self,
        kind: OutcomeKind,
        problem: InstanceProblem | None,
        message: str,
        *,
        http_status: int | None = None,
    ) -> None:
        self.kind = kind
        self.problem = problem
        self.message = message
        self.http_status = http_status
        super().__init__(message)

    def __repr__(self) -> str:
        return (
            f"GatewayError(kind={self.kind.value!r}, "
            f"problem={self.problem.value if self.problem else None!r}, message={self.message!r})"
        )


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every ``access_token=`` / ``webhook_url=`` value and every given secret
    replaced by ``***``.

    Each secret is also replaced in its URL-encoded forms, so a token that went through a
    query string cannot slip through.
    """
    out = _TOKEN_IN_URL.sub(lambda m: m.group(1) + REDACTED, text)
    for secret in secrets:
        if not secret:
            continue
        for form in {secret, quote(secret, safe=""), quote_plus(secret, safe="")}:
            out = out.replace(form, REDACTED)
    return out


def _has_secret_param(text: str) -> bool:
    return "access_token" in text or "webhook_url" in text


class _RedactTokenFilter(logging.Filter):
    """Rewrites httpx's request log lines (which include the URL) without the token."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(
                redact(str(a)) if _has_secret_param(str(a)) else a for a in record.args
            )
        if isinstance(record.msg, str) and _has_secret_param(record.msg):
            record.msg = redact(record.msg)
        return True


_FILTER = _RedactTokenFilter()


def install_log_redaction() -> None:
    """Make sure httpx's own log lines never carry an access token (idempotent)."""
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


__all__ = ["GatewayError", "RequestValidationError", "install_log_redaction", "redact"]
