"""The body gate (issue 27): authentication before the body, per-route body limits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.params import File
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import SecretStr
from sqlalchemy import Engine
from starlette.types import Message

from gatecast.settings import Settings
from gatecast.web.app import create_app
from gatecast.web.body_limits import (
    MEDIA_ROUTES,
    OPEN_ROUTES,
    UPLOAD_ROUTES,
    declared_length,
    has_body,
    limit_for,
    template_for,
)
from gatecast.web.context import AppContext
from tests.web.conftest import API_KEY, LiveApp


def _scope(*headers: tuple[bytes, bytes]) -> dict[str, object]:
    return {"type": "http", "headers": list(headers)}


def test_a_body_is_declared_by_its_length_or_a_transfer_encoding() -> None:
    assert not has_body(_scope())
    assert not has_body(_scope((b"content-length", b"0")))
    assert has_body(_scope((b"content-length", b"12")))
    assert has_body(_scope((b"transfer-encoding", b"chunked")))
    assert declared_length(_scope((b"content-length", b"12"))) == 12
    assert declared_length(_scope((b"content-length", b"x"))) is None
    assert declared_length(_scope((b"transfer-encoding", b"chunked"))) is None


def test_uploads_take_the_import_limit_and_every_other_route_the_json_limit() -> None:
    settings = Settings(_env_file=None, import_max_bytes=5000, request_max_bytes=2048)
    assert limit_for("POST", "/api/v1/imports", settings) == 5000 + 64 * 1024
    assert limit_for("POST", "/api/v1/lists", settings) == 2048
    assert limit_for("PUT", "/api/v1/imports", settings) == 2048


def test_the_upload_table_names_exactly_the_routes_that_take_a_file(live_sqlite: LiveApp) -> None:
    """One home for the limits: a new upload route must be added to UPLOAD_ROUTES (or,
    for media files, MEDIA_ROUTES)."""
    taking_files = set()
    declared = set()
    for context in iter_route_contexts(live_sqlite.app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue
        for method in route.methods or ():
            declared.add((method, context.path))
            if any(isinstance(p.field_info, File) for p in route.dependant.body_params):
                taking_files.add((method, context.path))
    assert taking_files == UPLOAD_ROUTES | MEDIA_ROUTES
    assert declared >= OPEN_ROUTES
    app = live_sqlite.app
    assert template_for(app, "POST", "/api/v1/campaigns/7/pause") == (
        "/api/v1/campaigns/{campaign_id}/pause"
    )
    assert template_for(app, "POST", "/login") == "/login"
    assert template_for(app, "POST", "/nowhere/7") == "/nowhere/7"


def _chunks(total: int) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b" " * 65536
        sent += 65536


def test_an_unknown_caller_with_a_body_is_refused_401_and_the_limit_is_the_routes(
    live_sqlite: LiveApp,
) -> None:
    with live_sqlite.client(key=None) as anonymous:
        res = anonymous.post("/api/v1/lists", json={"name": "x"})
        assert res.status_code == 401
        assert res.headers["content-type"] == "application/problem+json"
        assert res.headers["www-authenticate"] == "Bearer"
        assert res.json()["code"] == "unauthorized"
        wrong = anonymous.post(
            "/api/v1/lists", json={"name": "x"}, headers={"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401
        # without a body the route itself answers, as before
        assert anonymous.post("/api/v1/contacts/1/opt-out").status_code == 401
        # sign-in takes its small form from anybody
        assert anonymous.post("/login", data={"api_key": "wrong"}).status_code == 401
    with live_sqlite.client() as api:
        # a chunked body past the JSON limit: 413 while it streams, as a problem
        res = api.post(
            "/api/v1/lists",
            content=_chunks(4 * 1024 * 1024),
            headers={"content-type": "application/json"},
        )
        assert res.status_code == 413
        assert res.json()["code"] == "too_large"
        assert "/api/v1/lists" in res.json()["detail"]
        assert api.post("/api/v1/lists", json={"name": "small"}).status_code == 201
        document = api.get("/openapi.json").json()
        assert "413" in document["paths"]["/api/v1/lists"]["post"]["responses"]
        assert "413" not in document["paths"]["/api/v1/lists"]["get"]["responses"]


def _call(app: Any, headers: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """Call ``app`` with an endless body of 64 KiB chunks: (status, chunks it read)."""
    read = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": b" " * 65536, "more_body": True}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/lists",
        "raw_path": b"/api/v1/lists",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }
    asyncio.run(app(scope, receive, send))
    return int(sent[0]["status"]), read


def test_the_gate_reads_nothing_for_a_stranger_and_stops_at_the_limit(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=str(sqlite_engine.url),
        reports_dir=str(tmp_path),
        request_max_bytes=256 * 1024,
        _env_file=None,
    )
    app = create_app(
        AppContext(settings=settings, engine=sqlite_engine, api_key=SecretStr(API_KEY))
    )
    chunked = (b"transfer-encoding", b"chunked")
    assert _call(app, [chunked]) == (401, 0)  # nothing read
    assert _call(app, [chunked, (b"authorization", b"Bearer wrong")]) == (401, 0)
    owner = (b"authorization", f"Bearer {API_KEY}".encode())
    assert _call(app, [(b"content-length", str(10 * 1024 * 1024).encode()), owner]) == (413, 0)
    status, read = _call(app, [chunked, owner])
    assert status == 413 and read == 5  # 4 chunks fit in 256 KiB; the fifth passes it
