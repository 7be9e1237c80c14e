"""A live pair for end-to-end tests: the sandbox gateway and gatecast's webhook receiver.

Real HTTP both ways: the sandbox runs in a thread, gatecast's app is served by uvicorn on
the test's engine, and each linked instance's webhook points at the receiver.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import Engine

from gatecast.runtime.http_server import AsgiServer
from gatecast.settings import Settings
from gatecast.web.app import create_app
from gatecast.web.context import AppContext
from gateway.client import GatewayClient
from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from storage.types import utcnow
from tests.scheduler.helpers import add_instances

SECRET = "live-test-secret-0123456789"


@dataclass(frozen=True)
class Live:
    """The running sandbox, the receiver's URL and the linked instances."""

    sandbox: Sandbox
    receiver_url: str
    instance_ids: list[str]
    app: FastAPI

    def settle(self, sweep: Callable[[], int], timeout: float = 60.0) -> None:
        """Wait until the gateway has posted every event and the receiver has stored and
        applied them (nothing journalled, nothing waiting), then ``sweep`` once: what the
        running service does every second."""
        assert self.sandbox.wait_idle(timeout), "the sandbox still has events to post"
        deadline = time.monotonic() + timeout
        batcher = self.app.state.webhook_batcher
        while batcher.journalled or batcher.unapplied:
            assert time.monotonic() < deadline, "the receiver did not apply its events"
            time.sleep(0.05)
        sweep()

    def client(self) -> GatewayClient:
        """A gateway client for the sandbox (what the dispatcher's factory returns)."""
        return GatewayClient(self.sandbox.url, self.sandbox.access_token, timeout=30.0)


@contextmanager
def live_gateway(engine: Engine, config: SandboxConfig, *, instances: int = 1) -> Iterator[Live]:
    """The sandbox (``config``, auto-linking expected) and the receiver, with ``instances``
    linked instances: webhooks registered, ``instances`` rows written (connected)."""
    settings = Settings(
        database_url="sqlite:///unused.db",
        webhook_secret=SecretStr(SECRET),
        api_key=SecretStr("k" * 32),
    )
    ctx = AppContext(settings=settings, engine=engine, api_key=SecretStr("k" * 32))
    app = create_app(ctx)
    with (
        run_sandbox_in_thread(config) as sb,
        AsgiServer(app, log_level="error") as server,
    ):
        ids = [sb.create_linked_instance() for _ in range(instances)]
        with GatewayClient(sb.url, sb.access_token) as gw:
            for iid in ids:
                gw.set_webhook(iid, f"{server.url}/webhooks/gateway/{SECRET}")
        add_instances(engine, ids, utcnow())
        yield Live(sb, server.url, ids, app)
