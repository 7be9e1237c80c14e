"""The outbound webhook events: each type's name and the schema of its ``data`` (pydantic
models, the one source of the names endpoints subscribe to, of the OpenAPI document's
``webhooks`` section and of docs/webhooks.md's table; decision 67 in docs/architecture.md).

The rows themselves are written by the outbox triggers (``storage/outbox.py``) in the
transaction of the change an event reports; ``storage.queries.outbound.claim_due`` adds
what a trigger cannot know (a reply's delivery and campaign, a direct message's
``metadata``). Times inside ``data`` are the database's text of the time (ISO 8601, UTC);
the envelope's ``timestamp`` is always ``...Z``.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model


class EventData(BaseModel):
    """What every event's data shares: no member beyond those declared."""

    model_config = ConfigDict(extra="forbid")


class DeliveryData(EventData):
    """A recipient's delivery row as it is after the change."""

    delivery_id: int
    campaign_id: int
    contact_id: int | None = Field(description="null: a number or group with no contact")
    to: str = Field(description="The phone number (E.164) or group id")
    sender: str | None = Field(description="The sender instance's id (null: none chosen)")
    message_id: str | None = Field(description="The gateway's message id (null: not sent)")
    state: str = Field(description="The state the row took (the type's last part)")
    error: str | None = Field(description="Why it failed, was skipped or is unknown")
    error_code: str | None
    metadata: dict[str, Any] | None = Field(
        None, description="A direct message's (POST /api/v1/messages) own JSON, as given"
    )


class ReplyData(EventData):
    """A message that came in."""

    reply_id: int
    message_id: str
    instance_id: str | None
    from_: str | None = Field(alias="from", description="The writer's phone number")
    chat: str
    contact_id: int | None
    text: str
    delivery_id: int | None = Field(description="The delivery it answers (null: none)")
    campaign_id: int | None = Field(description="That delivery's campaign (null: none)")
    metadata: dict[str, Any] | None = None


class OptedOutData(EventData):
    """A contact opted out (a STOP reply, the API, the CLI, an opt-out file)."""

    contact_id: int
    phone: str
    reason: str | None


class OptedInData(EventData):
    """A contact's opt-out was cleared (the API, the CLI, the dashboard)."""

    contact_id: int
    phone: str
    reason: str | None = Field(description="The opt-out's reason, now cleared")


class CampaignStateData(EventData):
    """A campaign moved."""

    campaign_id: int
    name: str
    from_: str = Field(alias="from")
    to: str
    reason: str | None


class CampaignHeldData(EventData):
    """What keeps a running campaign's queued recipients from sending now."""

    campaign_id: int
    name: str
    kind: str
    words: str | None
    until: str | None = Field(description="UTC; null: until someone acts")


class InstanceStateData(EventData):
    """A sender instance's connection state moved (any move)."""

    instance_id: str
    label: str
    from_: str = Field(alias="from")
    to: str


class InstanceConnectedData(InstanceStateData):
    """A sender instance's link was confirmed (state ``connected``)."""

    phone: str | None = Field(description="The account's number, when the gateway said it")


class InstanceDisconnectedData(InstanceStateData):
    """A sender instance left the states it sends from (connected, unconfirmed)."""


class SenderPausedData(EventData):
    """A sender stopped sending: paused by a person, its health, a quota, a logout..."""

    instance_id: str
    label: str
    reason: str = Field(description="Why, in words (as the API's paused_reason)")
    health_level: str


class SenderResumedData(EventData):
    """A sender sends again (a person resumed it, its cool-down ended, it was linked)."""

    instance_id: str
    label: str
    reason: str | None = Field(description="The pause it lifted")


class SenderHealthData(EventData):
    """A sender's health level changed (low, medium, high, critical)."""

    instance_id: str
    label: str | None
    from_: str = Field(alias="from")
    to: str
    score: float
    reason: str


class ImportFinishedData(EventData):
    """An import of contacts stopped: completed (with its counts) or failed."""

    import_id: int
    status: Literal["completed", "failed"]
    filename: str
    list_id: int | None
    rows_read: int
    imported: int
    updated: int
    duplicates: int
    invalid: int
    skipped_opted_out: int
    error: str | None


class WebhookTestData(EventData):
    """A test event asked for by hand."""

    endpoint_id: int
    text: str


#: every event an endpoint may subscribe to, with its data, in the order the docs list them
EVENT_DATA: dict[str, type[EventData]] = {
    "delivery.sent": DeliveryData,
    "delivery.delivered": DeliveryData,
    "delivery.read": DeliveryData,
    "delivery.failed": DeliveryData,
    "delivery.skipped": DeliveryData,
    "delivery.unknown": DeliveryData,
    "reply.received": ReplyData,
    "contact.opted_out": OptedOutData,
    "contact.opted_in": OptedInData,
    "campaign.state_changed": CampaignStateData,
    "campaign.held": CampaignHeldData,
    "instance.state_changed": InstanceStateData,
    "instance.connected": InstanceConnectedData,
    "instance.disconnected": InstanceDisconnectedData,
    "sender.paused": SenderPausedData,
    "sender.resumed": SenderResumedData,
    "sender.health_changed": SenderHealthData,
    "import.finished": ImportFinishedData,
}
#: the event a test sends (asked for by hand, never subscribed to)
TEST_EVENT = "webhook.test"
#: what each event says, for the OpenAPI document
SUMMARIES: dict[str, str] = {
    "delivery.sent": "The gateway accepted the message",
    "delivery.delivered": "The message reached the phone",
    "delivery.read": "The message was read",
    "delivery.failed": "The message failed for good (or was given up)",
    "delivery.skipped": "A recipient was skipped: opted out, in its cooldown, or unrenderable",
    "delivery.unknown": "A send's outcome is unknown (ambiguous); it is never resent by itself",
    "reply.received": "A message came in",
    "contact.opted_out": "A contact opted out",
    "contact.opted_in": "A contact's opt-out was cleared",
    "campaign.state_changed": "A campaign moved",
    "campaign.held": "A running campaign's hold changed kind",
    "instance.state_changed": "A sender instance's connection state moved",
    "instance.connected": "A sender instance is connected",
    "instance.disconnected": "A sender instance lost its link (disconnected, logged out, gone)",
    "sender.paused": "A sender was paused",
    "sender.resumed": "A sender was resumed",
    "sender.health_changed": "A sender's health level changed",
    "import.finished": "An import finished (completed or failed) with its counts",
    TEST_EVENT: "A test event asked for by hand",
}


def data_model(event: str) -> type[EventData]:
    """The model of ``event``'s data (``KeyError`` for an unknown event)."""
    return WebhookTestData if event == TEST_EVENT else EVENT_DATA[event]


@cache
def envelope_model(event: str) -> type[BaseModel]:
    """The whole body of ``event``: ``{"type", "timestamp", "data"}``."""
    name = "".join(part.title() for part in event.replace("_", ".").split(".")) + "Event"
    return create_model(
        name,
        __config__=ConfigDict(extra="forbid"),
        __doc__=SUMMARIES[event],
        type=(Literal[event], ...),  # type: ignore[arg-type]
        timestamp=(str, Field(description="When the change happened (ISO 8601, UTC, Z)")),
        data=(data_model(event), ...),
    )


def validate(body: dict[str, Any]) -> BaseModel:
    """A received body checked against its type's schema (``ValidationError`` if not)."""
    return envelope_model(str(body["type"])).model_validate(body)


__all__ = [
    "EVENT_DATA",
    "SUMMARIES",
    "TEST_EVENT",
    "EventData",
    "data_model",
    "envelope_model",
    "validate",
]
