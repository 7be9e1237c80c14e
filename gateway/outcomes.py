"""What became of a send: one typed result per response (DESIGN.md decision 3)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class OutcomeKind(StrEnum):
    """The five ways a send can end."""

    ACCEPTED = "accepted"  # a message id came back: the message left
    RETRYABLE = "retryable"  # refused before sending: safe to retry later
    AMBIGUOUS = "ambiguous"  # may or may not have left: never resend automatically
    PERMANENT = "permanent"  # this recipient or content will never work
    INSTANCE = "instance"  # the sender instance cannot send: pause it


class InstanceProblem(StrEnum):
    """Why an instance cannot send."""

    RELOGIN_REQUIRED = "relogin_required"
    NOT_ACTIVATED = "not_activated"
    INVALID_INSTANCE = "invalid_instance"
    QUOTA_EXHAUSTED = "quota_exhausted"
    BAD_TOKEN = "bad_token"  # noqa: S105  (a problem name, not a secret)
    RESTRICTED = "restricted"  # error 463 / ban signals
    # 404/405/3xx on a gateway route, or an unusable URL: fix the configuration
    GATEWAY_MISCONFIGURED = "gateway_misconfigured"


@dataclass(frozen=True)
class SendOutcome:
    """The classified result of one send request."""

    kind: OutcomeKind
    message_id: str | None = None
    reason: str = ""
    retry_after: float | None = None  # seconds, from Retry-After when given
    problem: InstanceProblem | None = None
    error_code: str | None = None
    http_status: int | None = None

    @property
    def accepted(self) -> bool:
        """True when the gateway returned a message id."""
        return self.kind is OutcomeKind.ACCEPTED


__all__ = ["InstanceProblem", "OutcomeKind", "SendOutcome"]
