"""Fixtures for the web tests: the real app served by uvicorn on a free port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import Engine

from gatecast.runtime.http_server import proxy_options
from gatecast.settings import Settings
from gatecast.web.app import create_app
from gatecast.web.context import AppContext

API_KEY = "test-key-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveApp:
    """A running app: its base URL, context and an authenticated client."""

    url: str
    ctx: AppContext
    app: FastAPI

    def client(self, key: str | None = API_KEY, **kwargs: Any) -> httpx.Client:
        """An httpx client for the app (bearer key unless ``key`` is None)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # running in a thread
        return None


def serve(app: FastAPI, port: int | None = None) -> tuple[str, Callable[[], None]]:
    """Serve ``app`` on 127.0.0.1 in a thread; returns its URL and a stop function."""
    port = port or _free_port()
    ctx = getattr(app.state, "ctx", None)  # as gatecast's own server does
    trusted = ctx.settings.trusted_proxies if isinstance(ctx, AppContext) else ""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", **proxy_options(trusted)
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}", stop


@pytest.fixture
def make_live(tmp_path: Any) -> Iterator[Callable[..., LiveApp]]:
    """Factory: serve an app on ``engine`` (extra AppContext fields as keywords)."""
    stops: list[Callable[[], None]] = []

    def make(engine: Engine, **ctx_kwargs: Any) -> LiveApp:
        port = _free_port()
        overrides = dict(ctx_kwargs.pop("settings_overrides", {}))
        if overrides.get("public_url") == "self":
            overrides["public_url"] = f"http://127.0.0.1:{port}"
        settings = Settings(
            database_url=str(engine.url.render_as_string(hide_password=False)),
            reports_dir=str(tmp_path / "reports"),
            _env_file=None,
            **overrides,
        )
        ctx_kwargs.setdefault("api_key", SecretStr(API_KEY))
        ctx = AppContext(settings=settings, engine=engine, **ctx_kwargs)
        app = create_app(ctx)
        url, stop = serve(app, port)
        stops.append(stop)
        return LiveApp(url=url, ctx=ctx, app=app)

    yield make
    for stop in stops:
        stop()


@pytest.fixture
def live(make_live: Callable[..., LiveApp], engine: Engine) -> LiveApp:
    """The app on the SQLite-and-PostgreSQL ``engine`` fixture."""
    return make_live(engine)


@pytest.fixture
def live_sqlite(make_live: Callable[..., LiveApp], sqlite_engine: Engine) -> LiveApp:
    """The app on SQLite only (for tests whose subject is not the database)."""
    return make_live(sqlite_engine)


@pytest.fixture
def sandbox() -> Iterator[Any]:
    """A real sandbox gateway over HTTP (spec dialect)."""
    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread

    with run_sandbox_in_thread(SandboxConfig(seed=7, status_delays=(0.01, 0.02, 0.03))) as sb:
        yield sb


def gateway_factory_for(sb: Any) -> Callable[[], Any]:
    """A gateway-client factory pointed at the sandbox ``sb``."""
    from gateway.client import GatewayClient

    return lambda: GatewayClient(sb.url, sb.access_token, timeout=10)


#: three contacts in list "people"; Grace Hopper has no city
PEOPLE = (
    "name,phone,city\n"
    "Ada Lovelace,+12025550101,Berlin\n"
    "Alan Turing,+12025550102,London\n"
    "Grace Hopper,+12025550103,\n"
)


@pytest.fixture
def linked_sandbox() -> Iterator[Any]:
    """A sandbox that links an instance when its QR code is asked for."""
    from gateway.sandbox import SandboxConfig, run_sandbox_in_thread

    config = SandboxConfig(seed=7, status_delays=(0.01, 0.02, 0.03), auto_link=True)
    with run_sandbox_in_thread(config) as sb:
        yield sb


@pytest.fixture
def people_app(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine, linked_sandbox: Any, tmp_path: Any
) -> LiveApp:
    """The app on SQLite with :data:`PEOPLE` imported and a sender linked at the sandbox."""
    from campaigns.importer import ImportOptions, import_file
    from tests.journeys.harness import link_sender_over_api

    people = tmp_path / "people.csv"
    people.write_text(PEOPLE, encoding="utf-8")
    import_file(sqlite_engine, people, ImportOptions(list_name="people"))
    live = make_live(sqlite_engine, gateway_factory=gateway_factory_for(linked_sandbox))
    with live.client() as api:
        link_sender_over_api(api)
    return live
