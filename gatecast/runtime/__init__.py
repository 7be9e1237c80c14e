"""The runtime of every face: the long-lived objects built from :class:`Settings`.

Here: the engine (schema checked), the gateway client and the embedded sandbox.
Submodules: :mod:`.http_server` (the ASGI app served by uvicorn in a thread),
:mod:`.webhooks` (secret, URL and registration of the webhook) and :mod:`.foreground`
(one campaign run to its end in this process).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gatecast.settings import Settings
from gateway.errors import RequestValidationError
from storage.engine import (
    Engine,
    current_revision,
    make_engine,
    normalise_url,
    upgrade,
    upgrades_itself,
)
from storage.revision import HEAD_REVISION
from storage.types import utcnow

if TYPE_CHECKING:  # loaded by make_gateway_client: a command that only reads never needs httpx
    from gateway.client import GatewayClient


class SchemaOutOfDate(RuntimeError):
    """The database schema is behind this version of gatecast."""


class GatewayNotConfigured(ValueError):
    """The gateway settings are missing or unusable; the message names the variable."""


def open_engine(settings: Settings, *, auto_upgrade: bool | None = None) -> Engine:
    """The engine for ``settings.database_url``, with its schema at head.

    SQLite (the embedded default) upgrades itself; PostgreSQL is upgraded with
    ``gatecast db upgrade`` so that several workers never race on a migration, and an
    out-of-date schema raises :class:`SchemaOutOfDate` naming that command.
    """
    url = normalise_url(settings.database_url)
    engine = make_engine(url)
    if auto_upgrade is None:
        auto_upgrade = upgrades_itself(url)
    rev = current_revision(engine)  # one query; Alembic is loaded only to upgrade
    if rev != HEAD_REVISION and auto_upgrade:
        upgrade(engine)
    elif rev != HEAD_REVISION:
        raise SchemaOutOfDate(
            f"database schema is at {rev or 'nothing'}, gatecast needs {HEAD_REVISION}: "
            "run `gatecast db upgrade`"
        )
    return engine


def make_gateway_client(settings: Settings) -> GatewayClient:
    """A :class:`GatewayClient` for ``GATECAST_GATEWAY_URL`` / ``_PREFIX`` / ``_ACCESS_TOKEN``.

    Raises :class:`GatewayNotConfigured` naming the variable that is unset or unusable
    (never showing the token). Use the client as a context manager so it is closed.
    """
    if not settings.gateway_url.strip():
        raise GatewayNotConfigured(
            "GATECAST_GATEWAY_URL is not set (the gateway's base URL, e.g. https://gw.example)"
        )
    token = settings.access_token.get_secret_value()
    if not token.strip():
        raise GatewayNotConfigured("GATECAST_ACCESS_TOKEN is not set")
    variables = {
        "base_url": "GATECAST_GATEWAY_URL",
        "prefix": "GATECAST_GATEWAY_PREFIX",
        "send_method": "GATECAST_SEND_METHOD",
        "timeout": "GATECAST_HTTP_TIMEOUT_SECONDS",
        "access_token": "GATECAST_ACCESS_TOKEN",
        "kind": "GATECAST_GATEWAY_KIND",
    }
    from gateway.client import GatewayClient

    try:
        return GatewayClient(
            settings.gateway_url,
            token,
            prefix=settings.gateway_prefix,
            send_method=settings.send_method,
            timeout=settings.http_timeout_seconds,
            clock=utcnow,
            kind=settings.gateway_kind,
        )
    except RequestValidationError as exc:
        name = variables.get(exc.field, exc.field)
        raise GatewayNotConfigured(f"{name}: {exc.problem}") from None


@contextlib.contextmanager
def embedded_sandbox(seed: int = 0, *, auto_link: bool = True, **config: Any) -> Iterator[Any]:
    """A sandbox gateway on a free local port (for ``serve --sandbox`` and the demo)."""
    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread

    cfg = SandboxConfig(seed=seed, auto_link=auto_link, **config)
    with run_sandbox_in_thread(cfg) as sb:
        yield sb
