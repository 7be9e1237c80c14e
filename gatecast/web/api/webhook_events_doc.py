"""The OpenAPI document's ``webhooks`` section (OpenAPI 3.1): one entry per outbound event
type, its body's schema generated from the models of :mod:`campaigns.webhook_events` (the
one source; decision 67 in docs/architecture.md). Kept apart from the rest of the
document's customisation: it only adds ``webhooks`` and its component schemas."""

from __future__ import annotations

import re
from typing import Any

from pydantic.json_schema import models_json_schema

from campaigns.webhook_events import EVENT_DATA, SUMMARIES, TEST_EVENT, envelope_model

_REF = "#/components/schemas/{model}"
#: the Standard Webhooks headers every request carries
_HEADERS = (
    ("webhook-id", "The message's id (msg_<ULID>): the same on every attempt; deduplicate by it"),
    ("webhook-timestamp", "The attempt's time, Unix seconds"),
    (
        "webhook-signature",
        "v1,<base64 HMAC-SHA256 of id.timestamp.body>, keyed with the secret after whsec_; "
        "during a rotation's overlap two values, space-separated",
    ),
)


def event_types() -> list[str]:
    """Every event type the document declares: the subscribable ones and the test event."""
    return [*EVENT_DATA, TEST_EVENT]


def _operation(event: str, ref: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": SUMMARIES[event],
            "description": f"The body gatecast posts for `{event}` (docs/webhooks.md).",
            "operationId": "webhook_" + re.sub(r"[^A-Za-z0-9_]", "_", event),
            "tags": ["webhook events"],
            "parameters": [
                {
                    "name": name,
                    "in": "header",
                    "required": True,
                    "description": text,
                    "schema": {"type": "string"},
                }
                for name, text in _HEADERS
            ],
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref}}},
            "responses": {
                "2XX": {"description": "Received: any 2xx delivers the message"},
                "default": {"description": "Anything else: tried again later, with backoff"},
            },
        }
    }


def add_webhooks(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with its ``webhooks`` section and the events' schemas (in place)."""
    events = event_types()
    keys, schema = models_json_schema(
        [(envelope_model(e), "validation") for e in events], ref_template=_REF
    )
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in schema.get("$defs", {}).items():
        components.setdefault(name, definition)
    document["webhooks"] = {
        event: _operation(event, keys[(envelope_model(event), "validation")]) for event in events
    }
    return document


__all__ = ["add_webhooks", "event_types"]
