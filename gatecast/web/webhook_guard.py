"""Who may post to the webhook: the gateway's source addresses (the HTTP face's rule).

* :func:`source_networks` / :func:`source_allowed`: the optional allow-list of source
  addresses (``webhook_allowed_sources``, CIDRs); a request from elsewhere is refused
  (403) before its body is read, and counted
  (``gatecast_webhook_events_refused_total{reason="source_not_allowed"}``).

Which events are taken (those of the instances held) is the inbox's
(:mod:`campaigns.inbox.guard`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from gatecast.web.context import AppContext
from gatecast.web.metrics import observe_refused

#: why a request is refused: its source address is outside the allow-list
REFUSED_SOURCE = "source_not_allowed"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def source_networks(cidrs: Sequence[str]) -> tuple[Network, ...]:
    """The allow-list's networks (a bare address is a network of one)."""
    return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in cidrs)


def source_allowed(host: str | None, networks: Sequence[Network]) -> bool:
    """True when no allow-list is set, or ``host`` (the request's peer) lies in it."""
    if not networks:
        return True
    if not host:
        return False
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr in net for net in networks)


class WebhookGuard:
    """One app's allow-list of source addresses."""

    def __init__(self, ctx: AppContext) -> None:
        self.networks = source_networks(ctx.settings.webhook_allowed_sources)

    def source_allowed(self, host: str | None) -> bool:
        """:func:`source_allowed` for this app's allow-list; a refusal is counted."""
        if source_allowed(host, self.networks):
            return True
        observe_refused(REFUSED_SOURCE)
        return False


def guard_for(state: Any, ctx: AppContext) -> WebhookGuard:
    """The :class:`WebhookGuard` kept on an app's ``state`` (made on first use)."""
    guard = getattr(state, "webhook_guard", None)
    if not isinstance(guard, WebhookGuard):
        guard = WebhookGuard(ctx)
        state.webhook_guard = guard
    return guard


__all__ = [
    "REFUSED_SOURCE",
    "WebhookGuard",
    "guard_for",
    "source_allowed",
    "source_networks",
]
