"""The gateway boundary: typed client, outcome classification, event parsing, sandbox.

Imports nothing of gatecast's other packages.
"""

from gateway.async_client import AsyncGatewayClient
from gateway.client import GatewayClient, QrCodeResult
from gateway.errors import GatewayError, RequestValidationError
from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    Event,
    IncomingMessage,
    MalformedEvent,
    MessageStatus,
    Presence,
    QrCode,
    UnknownEvent,
)
from gateway.messages import (
    Button,
    Interactive,
    LegacyTemplate,
    ListMessage,
    ListRow,
    ListSection,
    Media,
    Message,
    TemplateButton,
    Text,
    message_from_dict,
    message_to_dict,
    message_type,
)
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome

__all__ = [
    "AsyncGatewayClient",
    "Button",
    "ConnectionStatus",
    "DeliveryStatus",
    "Event",
    "GatewayClient",
    "GatewayError",
    "IncomingMessage",
    "InstanceProblem",
    "Interactive",
    "LegacyTemplate",
    "ListMessage",
    "ListRow",
    "ListSection",
    "MalformedEvent",
    "Media",
    "Message",
    "MessageStatus",
    "OutcomeKind",
    "Presence",
    "QrCode",
    "QrCodeResult",
    "RequestValidationError",
    "SendOutcome",
    "TemplateButton",
    "Text",
    "UnknownEvent",
    "message_from_dict",
    "message_to_dict",
    "message_type",
]
