"""What every route needs, built once per process and reached through ``request.app``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from fastapi import Request
from pydantic import SecretStr

from gatecast.settings import Settings
from gateway.client import GatewayClient
from storage.engine import Engine
from storage.types import utcnow


@dataclass
class AppContext:
    """Settings, the database engine and the clock shared by the routes.

    ``gateway_factory`` builds a gateway client for the instance routes (default:
    ``gatecast.runtime.make_gateway_client(settings)``); tests point it at the sandbox.
    ``api_key`` overrides the key from settings / the key file (see ``web.auth``).
    """

    settings: Settings
    engine: Engine
    clock: Callable[[], datetime] = field(default=utcnow)
    gateway_factory: Callable[[], GatewayClient] | None = None
    api_key: SecretStr | None = None

    def gateway(self) -> GatewayClient:
        """A gateway client (use it as a context manager so it is closed)."""
        if self.gateway_factory is not None:
            return self.gateway_factory()
        from gatecast.runtime import make_gateway_client

        return make_gateway_client(self.settings)


def get_ctx(request: Request) -> AppContext:
    """FastAPI dependency: the process's :class:`AppContext`."""
    ctx = request.app.state.ctx
    assert isinstance(ctx, AppContext)
    return ctx
