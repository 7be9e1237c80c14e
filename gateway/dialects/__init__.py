"""Gateway families gatecast can drive besides the spec's (docs/architecture.md, the
gateway-kinds decision). ``GATECAST_GATEWAY_KIND`` picks one; the clients
(:mod:`gateway.client`, :mod:`gateway.async_client`) ask :func:`refusal_of` and the
dialect module for requests and outcomes; webhook bodies of every family are read by
:func:`gateway.event_parsing.parse_webhook`."""

from __future__ import annotations

from typing import Literal

GatewayKind = Literal["spec", "evolution", "waha"]
GATEWAY_KINDS: tuple[GatewayKind, ...] = ("spec", "evolution", "waha")


def refusal_of(kind: str, message_type: str) -> str | None:
    """Why a gateway of ``kind`` cannot send a message of ``message_type`` (text, media,
    interactive, template, list; None: it can). Campaign create refuses such a campaign
    with this reason, so nothing is refused at send time."""
    if kind == "evolution":
        from gateway.dialects.evolution import unsupported_reason

        return unsupported_reason(message_type)
    if kind == "waha":
        from gateway.dialects import waha

        return waha.unsupported_reason(message_type)
    return None


__all__ = ["GATEWAY_KINDS", "GatewayKind", "refusal_of"]
