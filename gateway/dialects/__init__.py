"""Gateway families gatecast can drive besides the spec's (docs/architecture.md, the
gateway-kinds decision). ``GATECAST_GATEWAY_KIND`` picks one; the clients
(:mod:`gateway.client`, :mod:`gateway.async_client`) ask :func:`refusal_of` and the
dialect module for requests and outcomes; webhook bodies of every family are read by
:func:`gateway.event_parsing.parse_webhook`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GatewayKind = Literal["spec", "evolution"]
GATEWAY_KINDS: tuple[GatewayKind, ...] = ("spec", "evolution")


@dataclass(frozen=True)
class Capabilities:
    """What a gateway kind offers beyond sending (decision "number checks"): a check that
    numbers are on the app (``number_check``: many numbers per request), typing presence
    shown to a recipient before a send (``typing``). The spec's gateway has neither, so
    the features that need them are off and nothing changes."""

    number_check: bool = False
    typing: bool = False
    #: most numbers one check request may carry
    check_batch: int = 0


NOTHING_MORE = Capabilities()


def capabilities(kind: str) -> Capabilities:
    """What a gateway of ``kind`` offers beyond sending (:class:`Capabilities`)."""
    if kind == "evolution":
        from gateway.dialects.evolution import CAPABILITIES

        return CAPABILITIES
    return NOTHING_MORE


def refusal_of(kind: str, message_type: str) -> str | None:
    """Why a gateway of ``kind`` cannot send a message of ``message_type`` (text, media,
    interactive, template, list; None: it can). Campaign create refuses such a campaign
    with this reason, so nothing is refused at send time."""
    if kind == "evolution":
        from gateway.dialects.evolution import unsupported_reason

        return unsupported_reason(message_type)
    return None


__all__ = [
    "GATEWAY_KINDS",
    "NOTHING_MORE",
    "Capabilities",
    "GatewayKind",
    "capabilities",
    "refusal_of",
]
