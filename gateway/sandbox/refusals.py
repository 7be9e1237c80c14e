"""The gateway's application errors: HTTP 200 ``{"status":"error","message":...}`` bodies.

The texts are the real ones (gateway-field-notes.md) where a real gateway is known to use
them; the rest are the sandbox's own, documented in docs/sandbox.md.
"""

from __future__ import annotations

from typing import Any

# real error texts (gateway-field-notes.md)
TOKEN_REQUIRED = "Access token is required"  # noqa: S105  (an error text)
TOKEN_UNKNOWN = "Access token does not exist"  # noqa: S105
INSTANCE_REQUIRED = "Instance ID is required"
INSTANCE_INVALID = "Instance ID Invalidated"
NOT_ACTIVATED = "This instance ID has not been activated yet"
RELOGIN = "This WhatsApp account relogin required"
PHONE_REQUIRED = "Phone number is required"
MEDIA_OR_MESSAGE = "Please enter media url or message"
QUOTA = "The number of messages you have sent per month has exceeded the maximum limit"

# the sandbox's own texts for what the field notes do not show
INVALID_NUMBER = "Invalid phone number"
GROUP_REQUIRED = "Group ID is required"
INVALID_GROUP = "Invalid group ID"
MEDIA_URL_REQUIRED = "Media URL is required"


class GatewayRefusal(Exception):
    """An application error: answered as HTTP 200 ``{"status":"error","message":...}``."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The response body."""
        return {"status": "error", "message": self.message, **self.extra}
