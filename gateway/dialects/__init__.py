"""Gateway families gatecast can drive besides the spec's (docs/architecture.md, the
gateway-kinds decision). ``GATECAST_GATEWAY_KIND`` picks one; the clients
(:mod:`gateway.client`, :mod:`gateway.async_client`) ask :func:`refusal_of` and the
dialect module for requests and outcomes; webhook bodies of every family are read by
:func:`gateway.event_parsing.parse_webhook`."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Literal

GatewayKind = Literal["spec", "evolution", "waha"]
GATEWAY_KINDS: tuple[GatewayKind, ...] = ("spec", "evolution", "waha")


@dataclass(frozen=True)
class Capabilities:
    """What a gateway kind offers beyond sending (decision 68): a check that
    numbers are on the app (``number_check``: many numbers per request), typing presence
    shown to a recipient before a send (``typing``). The spec's gateway has neither, so
    the features that need them are off and nothing changes."""

    number_check: bool = False
    typing: bool = False
    #: most numbers one check request may carry
    check_batch: int = 0


NOTHING_MORE = Capabilities()


#: the dialect module of each gateway family besides the spec's, imported when first
#: asked (each imports this module)
_MODULES = {"evolution": "gateway.dialects.evolution", "waha": "gateway.dialects.waha"}


def dialect_of(kind: str) -> Any:
    """The dialect module of gateway ``kind`` (requests, outcomes, ``CAPABILITIES``,
    ``unsupported_reason``); None for the spec's gateway."""
    name = _MODULES.get(kind)
    return import_module(name) if name else None


def capabilities(kind: str) -> Capabilities:
    """What a gateway of ``kind`` offers beyond sending (:class:`Capabilities`)."""
    dialect = dialect_of(kind)
    found: Capabilities = dialect.CAPABILITIES if dialect is not None else NOTHING_MORE
    return found


def refusal_of(kind: str, message_type: str) -> str | None:
    """Why a gateway of ``kind`` cannot send a message of ``message_type`` (text, media,
    interactive, template, list; None: it can). Campaign create refuses such a campaign
    with this reason, so nothing is refused at send time."""
    dialect = dialect_of(kind)
    reason: str | None = dialect.unsupported_reason(message_type) if dialect else None
    return reason


__all__ = [
    "GATEWAY_KINDS",
    "NOTHING_MORE",
    "Capabilities",
    "GatewayKind",
    "capabilities",
    "dialect_of",
    "refusal_of",
]
